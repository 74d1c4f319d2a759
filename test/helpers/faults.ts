/**
 * Pieces the fault and deadline tests share (test/faults/, split mode on the real backends;
 * test/e2e/deadline, service-ports): waiting for a condition, a client of the system's database,
 * the backends waiting on a lock, media's link rows, and a media call
 * held inside media's transaction (on the advisory lock media takes on a collection) so that a
 * process can be killed or stopped while the call is surely in flight.
 */
import type { ExecutionContext } from "ava";
import pg from "pg";
import { setTimeout as sleep } from "node:timers/promises";
import type { SplitSystem } from "./split.js";

/** The first key of the advisory lock the media service takes on a collection while it changes its rows. */
export const MEDIA_LOCK = 0x6d656469;

/** Polls `check` every 100 ms until it holds or `ms` pass; whether it held. */
export async function until(check: () => Promise<boolean> | boolean, ms = 30_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await sleep(100);
  }
  return false;
}

/**
 * The deadline of a call a test lets run past it while the call waits on a lock the test holds:
 * long enough for the call to reach the lock even on a loaded machine (the test sees it wait
 * before the deadline passes), short of DB_LOCK_TIMEOUT_MS (5 s), which would end the wait itself.
 */
export const LOCK_TEST_DEADLINE_MS = 2_000;

/**
 * How many backends of db's database wait on a lock while running a statement like `queryLike`
 * (ILIKE). db may be inside a transaction (holding the lock): PostgreSQL keeps a transaction's
 * first read of the activity statistics for the rest of it, so that read is let go first.
 */
export async function lockWaiters(db: pg.Client, queryLike: string): Promise<number> {
  await db.query("SELECT pg_stat_clear_snapshot()");
  return countOf(db, "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE $1", queryLike);
}

/** The count `sql` (SELECT count(*)::int AS n ...) finds through `db`. */
export async function countOf(db: pg.Client, sql: string, ...params: unknown[]): Promise<number> {
  return (await db.query(sql, params)).rows[0].n;
}

/** How many link rows media holds in the collection `parentId` (one per sub-collection under it). */
export function linkRowsIn(db: pg.Client, parentId: number | bigint): Promise<number> {
  return countOf(db, "SELECT count(*)::int AS n FROM media.media WHERE collection_id = $1", parentId);
}

/** A client of the split system's database, closed when the test ends. */
export async function systemDb(t: ExecutionContext, sys: SplitSystem): Promise<pg.Client> {
  const db = new pg.Client({ connectionString: sys.env.DATABASE_URL });
  await db.connect();
  t.teardown(() => db.end());
  return db;
}

/**
 * Holds media's lock on `collectionId`, starts `send()` (a media call that changes rows of that
 * collection), and waits until media's transaction waits on the lock. `release()` lets it go on.
 */
export async function heldInMedia<T>(db: pg.Client, sys: SplitSystem, collectionId: number, send: () => Promise<T>): Promise<{ answer: Promise<T>; release(): Promise<void> }> {
  await db.query("SELECT pg_advisory_lock($1::int, $2::int)", [MEDIA_LOCK, collectionId]);
  const answer = send();
  // pg_locks covers the whole server: the test's own database only (tests beside it take the
  // same lock on collections of the same id in theirs).
  const waiting = await until(async () => (await countOf(db,
    `SELECT count(*)::int AS n FROM pg_locks
     WHERE locktype = 'advisory' AND NOT granted AND classid = $1::bigint::oid AND objid = $2::bigint::oid
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    MEDIA_LOCK, collectionId,
  )) > 0);
  if (!waiting) throw new Error(`media's transaction never waited on the lock\n${sys.diagnostics()}`);
  return { answer, release: async () => { await db.query("SELECT pg_advisory_unlock($1::int, $2::int)", [MEDIA_LOCK, collectionId]); } };
}
