/**
 * Keys of upload URLs minted with nothing waiting for them (the media service's classic and
 * thumbnail uploads, the collections service's cover uploads). An object PUT under such a key that
 * no write ever took up would stay stored for good, outside every quota (quotas count rows). Each
 * service records the key in a table of its schema before it hands out the URL, and a job of its
 * own hands the keys to media.objects.orphaned once their URL expired long enough ago; the object
 * cleanup then removes whatever nothing names.
 */
import type { Knex } from "knex";
import { emitObjectsOrphaned } from "./events.js";
import type { Queryable, UnitOfWork } from "./unit-of-work.js";

/** Keys handed to the cleanup per unit of work. */
const BATCH = 500;

/** Creates a service's table of upload keys (from its migration). */
export async function createUploadKeysTable(knex: Knex, table: string): Promise<void> {
  await knex.raw(`CREATE TABLE ${table} (
    store_key text PRIMARY KEY,
    user_id text NOT NULL,
    expires_at timestamptz NOT NULL)`);
  await knex.raw(`CREATE INDEX ${table}_expiry ON ${table} (expires_at)`);
}

/** A service's upload keys, on the pool or in a unit of work's transaction. */
export interface UploadKeys {
  /** A key and when its URL expires. */
  record(storeKey: string, userId: string, expiresAt: Date): Promise<void>;
  /** Forgets up to `limit` keys whose URL expired before `before`; their keys. */
  takeExpiredBefore(before: Date, limit: number): Promise<string[]>;
}

export function uploadKeysIn(q: Queryable, table: string): UploadKeys {
  return {
    async record(storeKey, userId, expiresAt) {
      await q(table).insert({ store_key: storeKey, user_id: userId, expires_at: expiresAt });
    },
    async takeExpiredBefore(before, limit) {
      const { rows } = await q.raw(
        `DELETE FROM ${table} WHERE store_key IN (
           SELECT store_key FROM ${table} WHERE expires_at < ? ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED)
         RETURNING store_key`,
        [before, limit],
      );
      return rows.map((r: { store_key: string }) => r.store_key);
    },
  };
}

/**
 * Hands every key whose URL expired more than `graceMs` before `now` to media.objects.orphaned, a
 * unit of work per batch (the keys leave the table with their event); how many went. The grace is
 * UPLOAD_SESSION_TTL_MS (a day) in both services: the time a write has to take an upload up.
 */
export async function orphanUnclaimedUploadKeys<S>(unitOfWork: UnitOfWork<S>, keysOf: (stores: S) => UploadKeys, now: Date, graceMs: number): Promise<number> {
  const before = new Date(now.getTime() - graceMs);
  let orphaned = 0;
  for (;;) {
    const taken = await unitOfWork(async (stores, events) => {
      const keys = await keysOf(stores).takeExpiredBefore(before, BATCH);
      await emitObjectsOrphaned(events, keys);
      return keys;
    });
    orphaned += taken.length;
    if (taken.length < BATCH) return orphaned;
  }
}
