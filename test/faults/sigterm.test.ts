/**
 * SIGTERM during traffic, in split mode on the real backends: the media service, then a gateway,
 * each stopped while a call waits inside media's transaction. The call in flight finishes with
 * 200, calls arriving meanwhile are refused (503 unavailable through the gateway; the stopping
 * gateway takes no new connection), the process exits 0, and the event the in-flight call wrote
 * is published before the exit (the outbox is empty).
 *
 *   npm run test:backends -- test/faults/sigterm.test.ts
 */
import test from "ava";
import { setTimeout as sleep } from "node:timers/promises";
import { call, mustCall, splitEnabled, startSplitSystem } from "../helpers/split.js";
import { heldInMedia, systemDb, until } from "../helpers/faults.js";

if (!splitEnabled) {
  test.skip("SIGTERM during traffic (skipped: needs the real backends; npm run test:backends)", () => {});
} else {
  test("SIGTERM to a service and to a gateway mid-call: the call finishes, new ones are refused, exit 0, no event left unpublished", async (t) => {
    t.timeout(300_000);
    const sys = await startSplitSystem({ gateways: 2 });
    t.teardown(() => sys.stop());
    const db = await systemDb(t, sys);
    const [gw, gw2] = sys.gateways as [string, string];
    const alice = await sys.user("alice");
    const must = mustCall(sys, gw2, alice.token);
    const collectionId = (await must({ op: "collections.create", name: "Stopping" })).collection.id as number;
    const note = async () => (await must({ op: "media.text_note.add", collection_id: collectionId, name: "n", text: "x" })).media.id as number;
    /** A media.delete through `via` that waits inside media's transaction until `release`. */
    const deleteInFlight = async (via: string) => {
      const id = await note();
      return heldInMedia(db, sys, collectionId, () => call(via, alice.token, { op: "media.delete", media_ids: [id], mode: "soft", confirm: true }));
    };
    const outboxOf = async (schema: string) => Number((await db.query(`SELECT count(*)::int AS n FROM "${schema}".outbox`)).rows[0].n);

    // 1. The media service.
    const media = sys.procs.find((p) => p.name === "media" && !p.done)!;
    const first = await deleteInFlight(gw);
    media.child.kill("SIGTERM");
    await sleep(1000);
    const refused = await call(gw, alice.token, { op: "media.list", collection_id: collectionId });
    t.is(refused.status, 503, `a new call while media stops: ${JSON.stringify(refused.body)}`);
    t.is(refused.body.error, "unavailable");
    t.false(media.done, "media waits for the call in flight");
    await first.release();
    const finished = await first.answer;
    t.is(finished.status, 200, `the call in flight finishes: ${JSON.stringify(finished.body)}`);
    const exit = await media.exited;
    t.deepEqual(exit, { code: 0, signal: null }, sys.diagnostics());
    t.is(await outboxOf("media"), 0, "the event the call wrote was published before the exit");

    await sys.restart("media");

    // 2. A gateway.
    const gateway = sys.procs.find((p) => p.name === "gateway-0" && !p.done)!;
    const second = await deleteInFlight(gw);
    gateway.child.kill("SIGTERM");
    await sleep(1000);
    const ready = await fetch(`${gw}/readyz`).then((r) => r.status, () => 0);
    t.true(ready === 503 || ready === 0, `a stopping gateway is not ready (${ready})`);
    // The other gateway serves meanwhile.
    t.is((await call(gw2, alice.token, { op: "collections.get", collection_id: collectionId })).status, 200);
    await second.release();
    const done = await second.answer;
    t.is(done.status, 200, `the call in flight through the stopping gateway finishes: ${JSON.stringify(done.body)}`);
    t.deepEqual(await gateway.exited, { code: 0, signal: null }, sys.diagnostics());
    await t.throwsAsync(fetch(`${gw}/healthz`), undefined, "the stopped gateway takes no new connection");
    await until(async () => (await outboxOf("media")) === 0, 10_000);
    t.is(await outboxOf("media"), 0);
  });
}
