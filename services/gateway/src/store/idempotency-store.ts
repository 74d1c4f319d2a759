/**
 * Idempotency keys (conventions.md): a mutating call with idempotency_key is stored with its
 * response for 24 hours per (user, op, key). A replay with the same body gets the stored
 * response byte for byte; a different body gets 409 idempotency_key_reused. The first request
 * claims the key before it runs, so two concurrent requests with one key never both execute.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Knex } from "knex";
import { AppError } from "@cms/platform";

/** How long a completed record answers replays. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/** A claim still pending after this long belongs to a gateway that died mid-request. */
export const PENDING_CLAIM_TIMEOUT_MS = 5 * 60 * 1000;

/** The answer a replay gets back byte for byte: its HTTP status and JSON body. */
export interface StoredResponse { status: number; body: string }

/**
 * A claim on (user, op, key): either this request runs (and completes the record with its answer,
 * or releases it after a failure worth retrying), or an earlier run's answer is replayed.
 */
export type Claim =
  | { kind: "claimed"; complete(res: StoredResponse): Promise<void>; release(): Promise<void> }
  | { kind: "replay"; response: StoredResponse };

/** The idempotency records of the gateway schema. */
export interface IdempotencyStore {
  claim(userId: string, op: string, key: string, requestHash: string): Promise<Claim>;
  stop(): void;
}

/** The idempotency records in PostgreSQL, shared by every gateway replica. */
export function createIdempotencyStore(db: Knex, opts: { waitMs?: number } = {}): IdempotencyStore {
  const waitMs = opts.waitMs ?? 10_000;
  const sweep = setInterval(() => {
    db("idempotency_keys").where("created_at", "<", new Date(Date.now() - IDEMPOTENCY_TTL_MS)).delete().catch(() => {});
  }, 3600_000);
  sweep.unref();
  return {
    async claim(userId, op, key, requestHash) {
      const ids = { user_id: userId, op, key };
      const deadline = Date.now() + waitMs;
      for (;;) {
        // An expired record no longer counts.
        await db("idempotency_keys").where(ids).where("created_at", "<", new Date(Date.now() - IDEMPOTENCY_TTL_MS)).delete();
        const inserted = await db("idempotency_keys")
          .insert({ ...ids, request_hash: requestHash, state: "pending" })
          .onConflict(["user_id", "op", "key"]).ignore()
          .returning("key");
        if (inserted.length) {
          return {
            kind: "claimed",
            async complete(res) {
              await db("idempotency_keys").where(ids).update({ state: "done", status: res.status, response: res.body });
            },
            async release() {
              await db("idempotency_keys").where(ids).where({ state: "pending" }).delete();
            },
          };
        }
        const row = await db("idempotency_keys").where(ids).first();
        if (!row) continue; // released or expired between the two statements
        if (row.request_hash !== requestHash) {
          throw new AppError("idempotency_key_reused", `The idempotency_key "${key}" was already used for ${op} with a different request body.`, { field: "idempotency_key" });
        }
        if (row.state === "done") return { kind: "replay", response: { status: row.status, body: row.response } };
        if (Date.now() - new Date(row.created_at).getTime() > PENDING_CLAIM_TIMEOUT_MS) {
          await db("idempotency_keys").where(ids).where({ state: "pending", created_at: row.created_at }).delete();
          continue;
        }
        if (Date.now() > deadline) {
          throw new AppError("conflict", `A request with idempotency_key "${key}" is still being processed; retry shortly.`, { field: "idempotency_key" });
        }
        await sleep(50);
      }
    },
    stop() { clearInterval(sweep); },
  };
}
