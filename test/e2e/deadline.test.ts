/**
 * A call past its deadline in the all-in-one process, whose services call each other in process
 * (a call made outside another is bounded by the clients' 60 s, CALL_TIMEOUT_MS; here a shorter
 * deadline, given as any caller gives one): its caller is answered deadline_exceeded at the
 * deadline, and the handler, still waiting for a row another session holds, commits nothing once
 * the row is let go. Before, an in-process call had no deadline at all: it answered whenever its
 * handler ended, and committed then. A call a handler makes to another service ends with its own
 * call: the service two hops down, still waiting, commits nothing either; the sub-collection the
 * first service had committed is undone at once, and a stop meanwhile waits for that undo before
 * it closes the pools. Split mode's service ports are tested so in service-ports.test.ts.
 */
import test, { type ExecutionContext } from "ava";
import pg from "pg";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { actAsKey, createLogger } from "@cms/platform";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { LOCK_TEST_DEADLINE_MS, MEDIA_LOCK, countOf, linkRowsIn, lockWaiters, until } from "../helpers/faults.js";

let sys: TestSystem;
test.before(async () => { sys = await startTestSystem(); });
test.after.always(async () => { await sys?.stop(); });

test("an in-process call whose deadline passes while it waits for a lock is answered deadline_exceeded and commits nothing", async (t) => {
  const owner = await sys.user();
  const id = (await sys.must(owner.token, { op: "collections.create", name: "Kept" })).collection.id as number;
  const collections = sys.system.clients.get(CollectionsService);
  const asOwner = () => createContextValues().set(actAsKey, { userId: owner.userId, username: owner.username, plan: "free", isAdmin: false, scopes: ["collections:write"], tokenId: "deadline-test" });
  const holder = new pg.Client({ connectionString: sys.system.databaseUrl });
  await holder.connect();
  t.teardown(() => holder.end());
  try {
    await holder.query("BEGIN");
    await holder.query("SELECT id FROM collections.collections WHERE id = $1 FOR UPDATE", [id]);
    const started = Date.now();
    const late = collections.updateCollection({ collectionId: BigInt(id), name: "Too late" }, { timeoutMs: LOCK_TEST_DEADLINE_MS, contextValues: asOwner() })
      .then(() => "OK", (err) => Code[ConnectError.from(err).code]);
    t.true(await until(async () => (await lockWaiters(holder, "%collections%for update%")) > 0, LOCK_TEST_DEADLINE_MS + 2_000), "the update waits for the row");
    t.is(await late, "DeadlineExceeded");
    t.true(Date.now() - started < LOCK_TEST_DEADLINE_MS + 2_000, "answered at the deadline, not when the lock timeout (5 s) ended the statement");
    // The handler went on waiting for the row past its deadline; it is let go only now.
    t.is(await lockWaiters(holder, "%collections%for update%"), 1, "the update still waits for the row");
    await holder.query("ROLLBACK");
    // Locking the row again waits until the update's transaction has ended, one way or the other.
    await holder.query("BEGIN");
    const after = await holder.query("SELECT name FROM collections.collections WHERE id = $1 FOR UPDATE", [id]);
    await holder.query("COMMIT");
    t.is(after.rows[0].name, "Kept", "its caller was told it failed, and nothing was written");
  } finally {
    await holder.query("ROLLBACK").catch(() => {});
  }
  // In time, the same update is written.
  const renamed = await collections.updateCollection({ collectionId: BigInt(id), name: "Renamed" }, { timeoutMs: 5_000, contextValues: asOwner() });
  t.is(renamed.collection?.name, "Renamed");
});

const childrenOf = (db: pg.Client, parentId: number) => countOf(db, "SELECT count(*)::int AS n FROM collections.collections WHERE parent_id = $1", parentId);
const pendingSteps = (db: pg.Client) => countOf(db, "SELECT count(*)::int AS n FROM collections.pending_steps");

/**
 * A new user's parent collection, a client of the system's database holding media's lock on it
 * in an open transaction, and a collections.createCollection of a child under it with
 * LOCK_TEST_DEADLINE_MS: collections commits the sub-collection, then asks media for its link
 * row in the parent, whose insert is seen waiting on the lock. `late` is the create's answer.
 */
async function createWaitingOnMedia(t: ExecutionContext, target: TestSystem) {
  const owner = await target.user();
  const parentId = (await target.must(owner.token, { op: "collections.create", name: "Parent" })).collection.id as number;
  const asOwner = createContextValues().set(actAsKey, { userId: owner.userId, username: owner.username, plan: "free", isAdmin: false, scopes: ["collections:write", "media:write"], tokenId: "deadline-test" });
  const holder = new pg.Client({ connectionString: target.system.databaseUrl });
  // A stop of an embedded database ends its connection.
  holder.on("error", () => {});
  await holder.connect();
  t.teardown(() => holder.end().catch(() => {}));
  await holder.query("BEGIN");
  await holder.query("SELECT pg_advisory_xact_lock($1, $2)", [MEDIA_LOCK, parentId]);
  const late = target.system.clients.get(CollectionsService).createCollection({ name: "Child", parentCollectionId: BigInt(parentId) }, { timeoutMs: LOCK_TEST_DEADLINE_MS, contextValues: asOwner })
    .then(() => "OK", (err) => Code[ConnectError.from(err).code]);
  t.true(await until(async () => (await lockWaiters(holder, "%pg_advisory_xact_lock%")) > 0, LOCK_TEST_DEADLINE_MS + 2_000), "media's link insert waits for the parent's lock");
  return { parentId, asOwner, holder, late };
}

test("a call's deadline bounds the calls it makes: media, waiting for a lock, writes no link row once the first caller was answered", async (t) => {
  const { parentId, asOwner, holder, late } = await createWaitingOnMedia(t, sys);
  try {
    t.is(await late, "DeadlineExceeded");
    t.is(await lockWaiters(holder, "%pg_advisory_xact_lock%"), 1, "media's link insert still waits past the deadline");
    await holder.query("ROLLBACK");
    // Taking the lock again waits until media's transaction has ended, one way or the other.
    await holder.query("BEGIN");
    await holder.query("SELECT pg_advisory_xact_lock($1, $2)", [MEDIA_LOCK, parentId]);
    await holder.query("COMMIT");
    t.is(await linkRowsIn(holder, parentId), 0, "the link row was not written for a caller answered deadline_exceeded");
    // Its caller was told nothing changed: the collection is undone at once (outside the ended
    // call), not left to the recovery job's pass after STEP_GRACE_MS (2 min), where a retry
    // would have seen it twice.
    t.true(await until(async () => (await childrenOf(holder, parentId)) === 0 && (await pendingSteps(holder)) === 0, 10_000), "the committed sub-collection was undone and its step settled");
  } finally {
    await holder.query("ROLLBACK").catch(() => {});
  }
  // In time, the same create writes its link row.
  const made = await sys.system.clients.get(CollectionsService).createCollection({ name: "Child in time", parentCollectionId: BigInt(parentId) }, { timeoutMs: 5_000, contextValues: asOwner });
  t.truthy(made.collection?.id);
  t.is(await linkRowsIn(holder, parentId), 1);
});

test("a stop waits for the handlers still running: a create whose caller was answered undoes its collection before the pools close", async (t) => {
  const lines: Array<{ level: string; msg: string }> = [];
  const log = createLogger("info", {}, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  const own = await startTestSystem({}, { log });
  t.teardown(() => own.stop());
  const { parentId, holder, late } = await createWaitingOnMedia(t, own);
  t.is(await late, "DeadlineExceeded");
  // Stopped while the create's handler still waits on media: the stop waits for it.
  const stopping = own.restart();
  t.true(await until(() => lines.some((l) => l.msg === "waiting for the handlers still running"), 10_000), "the stop waits for the running handlers");
  await holder.query("ROLLBACK");
  await stopping;
  t.deepEqual(lines.filter((l) => l.level === "error" || l.level === "fatal").map((l) => l.msg), [], "nothing failed for lack of a pool");
  // Started again on the same data: the sub-collection was undone before the stop went on.
  const db = new pg.Client({ connectionString: own.system.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  t.is(await childrenOf(db, parentId), 0);
  t.is(await pendingSteps(db), 0);
});
