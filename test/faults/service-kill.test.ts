/**
 * The media service killed with SIGKILL in the middle of an operation, then restarted, in split
 * mode on the real backends. While it is down the gateway answers the contract's 503
 * `unavailable` with Retry-After; the killed operation never half-happens, and the same
 * idempotency key afterwards runs it once and then replays the stored answer; a chunked upload
 * begun before the kill resumes after the restart and finishes with the right sha256.
 *
 *   npm run test:backends -- test/faults/service-kill.test.ts
 */
import test from "ava";
import { createHash, randomBytes } from "node:crypto";
import { call, mustCall, postOp, splitEnabled, startSplitSystem } from "../helpers/split.js";
import { heldInMedia, systemDb } from "../helpers/faults.js";

if (!splitEnabled) {
  test.skip("a service killed mid-operation and restarted (skipped: needs the real backends; npm run test:backends)", () => {});
} else {
  test("media SIGKILLed mid-operation: 503 unavailable with Retry-After meanwhile, the idempotency key runs once after the restart, a chunked upload resumes", async (t) => {
    t.timeout(300_000);
    const sys = await startSplitSystem();
    t.teardown(() => sys.stop());
    const db = await systemDb(t, sys);
    const [gw] = sys.gateways as [string];
    const alice = await sys.user("alice");
    const must = mustCall(sys, gw, alice.token);
    const collectionId = (await must({ op: "collections.create", name: "Killed" })).collection.id as number;
    const noteId = (await must({ op: "media.text_note.add", collection_id: collectionId, name: "to delete", text: "x" })).media.id as number;

    // A chunked upload in progress: begun, its first chunk sent.
    const file = randomBytes(40_000);
    const sha256 = createHash("sha256").update(file).digest("hex");
    const begun = await must({ op: "media.upload_begin", collection_id: collectionId, filename: "resumed.bin", content_type: "application/octet-stream", content_length: file.length, sha256 });
    const size = begun.chunk_bytes as number;
    const chunks = Array.from({ length: Math.ceil(file.length / size) }, (_, i) => file.subarray(i * size, (i + 1) * size));
    t.true(chunks.length >= 2);
    const sendChunk = (i: number) => call(gw, alice.token, { op: "media.upload_chunk", upload_id: begun.upload_id, index: i, content_base64: chunks[i]!.toString("base64"), content_length: chunks[i]!.length });
    t.is((await sendChunk(0)).status, 200);

    // Mid-operation: media.delete waits inside media's transaction on the collection's lock when
    // media is killed, so it cannot have committed.
    const deleteBody = { op: "media.delete", media_ids: [noteId], mode: "soft", confirm: true, idempotency_key: "delete-once" };
    const deleting = await heldInMedia(db, sys, collectionId, () => call(gw, alice.token, deleteBody));
    const media = sys.procs.find((p) => p.name === "media" && !p.done)!;
    media.child.kill("SIGKILL");
    await media.exited;
    await deleting.release();
    const killed = await deleting.answer;
    t.is(killed.status, 503, JSON.stringify(killed.body));
    t.is(killed.body.error, "unavailable");
    t.truthy(killed.headers.get("retry-after"));

    // During the outage: every media operation answers 503 unavailable with Retry-After.
    for (const body of [{ op: "media.list", collection_id: collectionId }, { op: "media.get", media_id: noteId }, deleteBody]) {
      const res = await call(gw, alice.token, body);
      t.is(res.status, 503, `${body.op} while media is down: ${JSON.stringify(res.body)}`);
      t.is(res.body.error, "unavailable");
      t.truthy(res.body.detail);
      t.regex(res.headers.get("retry-after") ?? "", /^\d+$/);
    }
    const chunkDown = await sendChunk(1);
    t.is(chunkDown.status, 503);
    // Operations of the other services still work.
    t.is((await call(gw, alice.token, { op: "collections.get", collection_id: collectionId })).status, 200);

    await sys.restart("media");

    // The same idempotency key runs the delete once, then replays its answer byte for byte.
    const first = await postOp(gw, alice.token, deleteBody);
    const firstText = await first.text();
    t.is(first.status, 200, firstText);
    t.is(first.headers.get("idempotent-replayed"), null);
    const replay = await postOp(gw, alice.token, deleteBody);
    t.is(replay.status, 200);
    t.is(replay.headers.get("idempotent-replayed"), "true");
    t.is(await replay.text(), firstText);
    const listed = (await must({ op: "media.list", collection_id: collectionId })).media as Array<{ id: number }>;
    t.false(listed.some((m) => m.id === noteId), "the note is deleted (once)");

    // The chunked upload resumes: the chunks not yet sent, then finish, and the bytes are right.
    for (let i = 1; i < chunks.length; i++) t.is((await sendChunk(i)).status, 200);
    const finished = await must({ op: "media.upload_finish", upload_id: begun.upload_id, content_length: file.length, sha256 });
    const mediaId = finished.media.id as number;
    const download = await postOp(gw, alice.token, { op: "media.download", media_id: mediaId });
    t.is(download.status, 200);
    t.is(createHash("sha256").update(Buffer.from(await download.arrayBuffer())).digest("hex"), sha256);
  });
}
