/**
 * The chunked upload's finish against in-memory fakes: the file is assembled and stored outside
 * any unit of work, and a short unit then completes the session only if it still holds the
 * chunks the file was made of; a finish that lost the race answers the winner's item.
 */
import test from "ava";
import { createHash, randomBytes } from "node:crypto";
import { AppError, EVENTS, runInCallScope } from "@cms/platform";
import { callerOf, fakeMediaApp } from "./fakes.js";

const OWNER = "00000000-0000-4000-8000-000000000001";
const owner = callerOf(OWNER);
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

async function session(file: Buffer, parts: number) {
  const f = fakeMediaApp();
  const begun = await f.app.chunked.beginUpload(owner, { collectionId: 1, filename: "data.bin", contentLength: file.length, tags: ["Data"] });
  const size = Math.ceil(file.length / parts);
  const send = (index: number, bytes = file.subarray(index * size, (index + 1) * size)) =>
    f.app.chunked.uploadChunk(owner, { uploadId: begun.uploadId, index, contentBase64: bytes.toString("base64"), contentLength: bytes.length });
  for (let i = 0; i < parts; i++) await send(i);
  return { ...f, uploadId: begun.uploadId, send };
}

const storedFiles = (f: { objects: { objects: Map<string, unknown> } }) => [...f.objects.objects.keys()].filter((k) => !k.includes("upload-chunks/"));

test("finish makes the item, marks the session finished, discards the chunks through the outbox; finishing again answers the same item", async (t) => {
  const file = randomBytes(200_000);
  const f = await session(file, 4);
  t.is(f.state.chunks.filter((c) => c.store_key).length, 0, "50 KB chunks stay inline");
  const done = await f.app.chunked.finishUpload(owner, { uploadId: f.uploadId, sha256: sha(file) });
  t.like(done.row, { name: "data.bin", tags: ["data"], size_bytes: file.length, sha256: sha(file), collection_id: 1 });
  t.deepEqual(f.objects.objects.get(done.row.main_url)!.bytes, file);
  t.like(f.state.sessions[0], { state: "finished", media_id: done.row.id });
  t.deepEqual(f.state.chunks, []);
  t.deepEqual(await f.app.chunked.finishUpload(owner, { uploadId: f.uploadId }), done);
  t.like(await t.throwsAsync(f.app.chunked.uploadChunk(owner, { uploadId: f.uploadId, index: 0, contentBase64: "AA==", contentLength: 1 })), {
    detail: `Upload session ${f.uploadId} is already finished (media ${done.row.id}).`,
  });
});

test("a finish that loses to another finish of the same session answers the winner's item and removes its own file", async (t) => {
  const file = randomBytes(100_000);
  const f = await session(file, 2);
  let winner: Awaited<ReturnType<typeof f.app.chunked.finishUpload>> | undefined;
  f.objects.hooks.onPut = async () => { winner = await f.app.chunked.finishUpload(owner, { uploadId: f.uploadId }); };
  const loser = await f.app.chunked.finishUpload(owner, { uploadId: f.uploadId });
  t.deepEqual(loser, winner);
  t.is(f.state.media.length, 1);
  t.deepEqual(storedFiles(f), [winner!.row.main_url], "the losing finish's file is gone");
});

test("chunks sent while the file was being assembled fail the finish; the session stays open and the next finish takes them", async (t) => {
  const file = randomBytes(100_000);
  const f = await session(file, 2);
  const fixed = Buffer.from(file);
  fixed.fill(7, 0, 10);
  f.objects.hooks.onPut = async () => { await f.send(0, fixed.subarray(0, 50_000)); };
  const err = await t.throwsAsync(f.app.chunked.finishUpload(owner, { uploadId: f.uploadId }), { instanceOf: AppError });
  t.is(err.detail, "Chunks of the session changed while the file was being assembled; finish again. The session stays open: nothing was stored.");
  t.deepEqual(storedFiles(f), [], "the assembled file is removed");
  t.deepEqual(f.state.media, []);
  t.is(f.state.sessions[0]!.state, "open");
  const done = await f.app.chunked.finishUpload(owner, { uploadId: f.uploadId });
  t.deepEqual(f.objects.objects.get(done.row.main_url)!.bytes, fixed);
});

test("a chunk object lost from the store is reported as missing, its row dropped; sent again, the finish works", async (t) => {
  const file = randomBytes(300_000);
  const f = await session(file, 3);
  const objectChunks = f.state.chunks.filter((c) => c.store_key).sort((a, b) => a.idx - b.idx);
  t.is(objectChunks.length, 3, "100 KB chunks are store objects");
  await f.objects.store.delete([objectChunks[1]!.store_key!]);
  const err = await t.throwsAsync(f.app.chunked.finishUpload(owner, { uploadId: f.uploadId }), { instanceOf: AppError });
  t.like(err, { extra: { field: "upload_id", missing_indexes: [1] } });
  t.deepEqual(f.state.chunks.filter((c) => c.state === "stored").map((c) => c.idx).sort(), [0, 2]);
  t.deepEqual(storedFiles(f), []);
  await f.send(1);
  const done = await f.app.chunked.finishUpload(owner, { uploadId: f.uploadId });
  t.deepEqual(f.objects.objects.get(done.row.main_url)!.bytes, file);
  const orphaned = f.events.filter((e) => e.type === EVENTS.objectsOrphaned).flatMap((e) => e.payload.store_keys as string[]);
  t.true(objectChunks.every((c) => orphaned.includes(c.store_key!)), "every chunk object goes through the outbox");
});

test("the declared length, the sha256 and missing indexes are checked before anything is stored", async (t) => {
  const file = randomBytes(100_000);
  const f = await session(file, 2);
  t.like(await t.throwsAsync(f.app.chunked.finishUpload(owner, { uploadId: f.uploadId, contentLength: 5 })), { extra: { field: "content_length", expected_bytes: 100_000 } });
  const wrong = await t.throwsAsync(f.app.chunked.finishUpload(owner, { uploadId: f.uploadId, sha256: "0".repeat(64) }), { instanceOf: AppError });
  t.like(wrong, { extra: { field: "sha256", actual_sha256: sha(file) } });
  t.deepEqual(storedFiles(f), []);
  await f.app.chunked.abortUpload(owner, f.uploadId);
  t.like(await t.throwsAsync(f.app.chunked.finishUpload(owner, { uploadId: f.uploadId })), { code: "not_found" });
  t.deepEqual(f.state.chunks, []);
});

test("begin counts stored files (each object once) and open uploads against the quotas", async (t) => {
  const f = fakeMediaApp({ collectionStorageQuotaBytes: 1000, userStorageQuotaBytes: 10_000 });
  await f.stores.media.insert({ collection_id: 1, owner_user_id: OWNER, created_by: OWNER, main_url: "store://u/1/a", viewer: "other", size_bytes: 600, position: 0 });
  await f.stores.media.insert({ collection_id: 1, owner_user_id: OWNER, created_by: OWNER, main_url: "store://u/1/a", viewer: "other", size_bytes: 600, position: 1 });
  await f.app.chunked.beginUpload(owner, { collectionId: 1, contentLength: 300, tags: [] });
  const over = await t.throwsAsync(f.app.chunked.beginUpload(owner, { collectionId: 1, contentLength: 101, tags: [] }), { instanceOf: AppError });
  t.like(over, { code: "invalid_request", extra: { quota: "collection_storage", used_bytes: 900, requested_bytes: 101 } });
  t.is(f.state.sessions.length, 1);
});

test("a large chunk is written while its key is reserved: a refused reservation stores nothing and is the error; a failed write drops the reservation", async (t) => {
  const file = randomBytes(300_000);
  const f = await session(file, 2); // two chunks of 150,000 bytes: objects, not rows
  const chunkObjects = () => [...f.objects.objects.keys()].filter((k) => k.includes("upload-chunks/"));
  t.is(chunkObjects().length, 2);
  const rows = () => f.state.chunks.map((c) => `${c.idx}:${c.state}`).sort();
  t.deepEqual(rows(), ["0:stored", "1:stored"]);

  // Index 5 lies beyond the declared length: the reservation refuses it, and its error is the answer.
  const bytes = file.subarray(0, 150_000);
  const beyond = await t.throwsAsync(f.app.chunked.uploadChunk(owner, { uploadId: f.uploadId, index: 5, contentBase64: bytes.toString("base64"), contentLength: bytes.length }), { instanceOf: AppError });
  t.is(beyond.code, "invalid_request");
  t.is(chunkObjects().length, 2, "no object for the refused chunk");
  t.deepEqual(rows(), ["0:stored", "1:stored"]);

  // A write that fails after the reservation: the row goes, no object stays, the stored chunk stays.
  f.objects.hooks.onPut = () => { throw new Error("disk full"); };
  await t.throwsAsync(f.app.chunked.uploadChunk(owner, { uploadId: f.uploadId, index: 1, contentBase64: bytes.toString("base64"), contentLength: bytes.length }), { message: "disk full" });
  t.deepEqual(rows(), ["0:stored", "1:stored"], "the reservation was dropped");
  t.is(chunkObjects().length, 2);

  const done = await f.app.chunked.finishUpload(owner, { uploadId: f.uploadId, sha256: sha(file) });
  t.is(done.row.sha256, sha(file));
});

test("a large chunk whose call ended while it was written: its object and its reservation go, the stored chunk stays", async (t) => {
  const file = randomBytes(300_000);
  const f = await session(file, 2);
  const rows = () => f.state.chunks.map((c) => `${c.idx}:${c.state}`).sort();
  const chunkObjects = () => [...f.objects.objects.keys()].filter((k) => k.includes("upload-chunks/"));
  const call = new AbortController();
  // The caller's deadline passes while the bytes are written, once the key is reserved.
  f.objects.hooks.onPut = async () => {
    while (!f.state.chunks.some((c) => c.idx === 1 && c.state === "writing")) await new Promise((r) => setImmediate(r));
    call.abort();
  };
  const bytes = file.subarray(150_000);
  const err = await t.throwsAsync(runInCallScope({ principal: { internal: true }, service: "media", signal: call.signal }, () =>
    f.app.chunked.uploadChunk(owner, { uploadId: f.uploadId, index: 1, contentBase64: bytes.toString("base64"), contentLength: bytes.length })), { instanceOf: AppError });
  t.is(err.code, "unavailable");
  // Before, the reservation's removal was a unit of the ended call too, refused: its row stayed.
  t.deepEqual(rows(), ["0:stored", "1:stored"], "the reservation was dropped");
  t.is(chunkObjects().length, 2, "the new chunk's object removed");
  const done = await f.app.chunked.finishUpload(owner, { uploadId: f.uploadId, sha256: sha(file) });
  t.is(done.row.sha256, sha(file));
});
