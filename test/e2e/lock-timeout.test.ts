/**
 * A row another session keeps locked (an operator's open transaction, a stuck client of the
 * database): the calls that must lock it wait DB_LOCK_TIMEOUT_MS at most and answer 503
 * unavailable, and the service's other calls go on meanwhile. Before the lock timeout, five such
 * calls (the all-in-one pool's size) took every connection of the collections service, and any
 * other call of it (another collection's get, a media.list's access check) waited 15 s for a
 * connection and failed too, until the holder let go.
 */
import test from "ava";
import pg from "pg";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;
test.before(async () => { sys = await startTestSystem({ DB_LOCK_TIMEOUT_MS: "700" }); });
test.after.always(async () => { await sys?.stop(); });

test("calls on a row another session holds answer 503 after DB_LOCK_TIMEOUT_MS, other collections answer meanwhile, and the row is writable once it is let go", async (t) => {
  const owner = await sys.user();
  const locked = (await sys.must(owner.token, { op: "collections.create", name: "Held" })).collection.id as number;
  const other = (await sys.must(owner.token, { op: "collections.create", name: "Free" })).collection.id as number;
  const holder = new pg.Client({ connectionString: sys.system.databaseUrl });
  await holder.connect();
  try {
    await holder.query("BEGIN");
    await holder.query("SELECT id FROM collections.collections WHERE id = $1 FOR UPDATE", [locked]);
    // More waiting calls than the pool has connections.
    const updates = Array.from({ length: 8 }, (_, i) => sys.call(owner.token, { op: "collections.update", collection_id: locked, name: `Renamed ${i}` }));
    const [get, list] = await Promise.all([
      sys.call(owner.token, { op: "collections.get", collection_id: other }),
      sys.call(owner.token, { op: "media.list", collection_id: other }),
    ]);
    t.is(get.status, 200, JSON.stringify(get.body));
    t.is(get.body.collection.name, "Free");
    t.is(list.status, 200, JSON.stringify(list.body));
    for (const u of await Promise.all(updates)) {
      t.is(u.status, 503, JSON.stringify(u.body));
      t.is(u.body.error, "unavailable");
      t.truthy(u.headers.get("retry-after"));
      t.notRegex(JSON.stringify(u.body), /lock|canceling/i, "the database's words stay in the log");
    }
    // Nothing of the refused updates was written.
    t.is((await sys.must(owner.token, { op: "collections.get", collection_id: locked })).collection.name, "Held");
  } finally {
    await holder.query("ROLLBACK").catch(() => {});
    await holder.end();
  }
  const renamed = await sys.call(owner.token, { op: "collections.update", collection_id: locked, name: "Renamed" });
  t.is(renamed.status, 200, JSON.stringify(renamed.body));
  t.is(renamed.body.collection.name, "Renamed");
});
