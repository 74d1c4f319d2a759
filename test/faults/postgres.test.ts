/**
 * PostgreSQL connections terminated mid-traffic, in split mode on the real backends: while
 * clients read and write, every connection of the collections and media services' pools is
 * terminated (pg_terminate_backend) again and again. Requests in flight may fail, but only as the
 * contract's retryable 503 `unavailable` with Retry-After, never a 500 or a driver's message; the
 * pools reconnect by themselves (no process restarts) and every operation succeeds afterwards.
 *
 *   npm run test:backends -- test/faults/postgres.test.ts
 */
import test from "ava";
import { setTimeout as sleep } from "node:timers/promises";
import { call, splitEnabled, startSplitSystem } from "../helpers/split.js";
import { systemDb } from "../helpers/faults.js";

if (!splitEnabled) {
  test.skip("PostgreSQL connections terminated mid-traffic (skipped: needs the real backends; npm run test:backends)", () => {});
} else {
  test("pg_terminate_backend of the services' pools mid-traffic: 503 unavailable at worst, the pools recover without a restart", async (t) => {
    t.timeout(240_000);
    // As fast as the machine goes: no rate limit in the way.
    const sys = await startSplitSystem({ env: { RATE_LIMIT_PER_MINUTE: "1000000" } });
    t.teardown(() => sys.stop());
    const db = await systemDb(t, sys);
    const [gw] = sys.gateways as [string];
    const alice = await sys.user("alice");
    const created = await call(gw, alice.token, { op: "collections.create", name: "Under fire" });
    t.is(created.status, 200, JSON.stringify(created.body));
    const collectionId = created.body.collection.id as number;

    const statuses: Record<string, number> = {};
    const bad: string[] = [];
    let stop = false;
    const client = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const body = [
          { op: "collections.get", collection_id: collectionId },
          { op: "collections.update", collection_id: collectionId, description: `w${w} i${i}` },
          { op: "media.text_note.add", collection_id: collectionId, name: `n${w}-${i}`, text: "x" },
          { op: "media.list", collection_id: collectionId, limit: 5 },
        ][i % 4]!;
        const res = await call(gw, alice.token, body);
        const key = `${res.status}${res.body?.error ? ` ${res.body.error}` : ""}`;
        statuses[key] = (statuses[key] ?? 0) + 1;
        const ok = res.status === 200 || (res.status === 503 && res.body?.error === "unavailable" && res.headers.get("retry-after") !== null);
        if (!ok) bad.push(`${body.op}: ${res.status} ${JSON.stringify(res.body)}`);
        if (typeof res.body?.detail === "string" && /terminat|connection|driver|pg_/i.test(res.body.detail) && res.status >= 500 && res.body.error !== "unavailable") bad.push(`driver message leaked: ${res.body.detail}`);
      }
    };
    const clients = Array.from({ length: 4 }, (_, w) => client(w));
    let terminated = 0;
    for (let round = 0; round < 12; round++) {
      await sleep(400);
      const { rows } = await db.query(
        "SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name IN ('cms-collections', 'cms-media')",
      );
      terminated += rows.filter((r: { done: boolean }) => r.done).length;
    }
    stop = true;
    await Promise.all(clients);
    t.log(`terminated ${terminated} connections; answers: ${JSON.stringify(statuses)}`);
    t.true(terminated >= 4, "connections were terminated while the traffic ran");
    t.deepEqual(bad, [], sys.diagnostics());

    // The pools reconnect by themselves: the next calls succeed, and no process was restarted.
    for (const body of [
      { op: "collections.get", collection_id: collectionId },
      { op: "collections.update", collection_id: collectionId, description: "after" },
      { op: "media.text_note.add", collection_id: collectionId, name: "after", text: "y" },
    ]) {
      let res = await call(gw, alice.token, body);
      // A connection idle in the pool may still be the terminated one: one retry at most.
      if (res.status === 503) res = await call(gw, alice.token, body);
      t.is(res.status, 200, `${body.op} after the storm: ${JSON.stringify(res.body)}`);
    }
    t.true(sys.procs.every((p) => !p.done), "no process exited or was restarted");
    t.is(sys.procs.length, 6);
  });
}
