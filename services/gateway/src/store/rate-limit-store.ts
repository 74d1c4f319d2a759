/**
 * Per-user request limits in fixed one-minute windows. The in-memory limiter is for the
 * all-in-one process only; replicas share the PostgreSQL limiter (one upsert per reservation of
 * leaseSize requests).
 */
import type { Knex } from "knex";
import { WINDOW_MS, decide, type RateDecision } from "../domain/rate-window.js";

/** Counts one request of a key (a user, or an address for anonymous calls) and decides on it. */
export interface RateLimiter {
  hit(key: string, now?: number): Promise<RateDecision>;
  /** Stops the sweep of old windows. */
  stop(): void;
}

/** The all-in-one process's limiter: counts in this process's memory. */
export function createMemoryRateLimiter(limit: number): RateLimiter {
  const counts = new Map<string, { window: number; count: number }>();
  const sweep = setInterval(() => {
    const current = Math.floor(Date.now() / WINDOW_MS);
    for (const [k, v] of counts) if (v.window < current) counts.delete(k);
  }, WINDOW_MS);
  sweep.unref();
  return {
    async hit(key, now = Date.now()) {
      const window = Math.floor(now / WINDOW_MS);
      let e = counts.get(key);
      if (!e || e.window !== window) { e = { window, count: 0 }; counts.set(key, e); }
      e.count++;
      return decide(e.count, limit, window * WINDOW_MS, now);
    },
    stop() { clearInterval(sweep); },
  };
}

/**
 * How many requests of a window a replica reserves from the shared count at a time: 1% of the
 * limit, at least one. At the default 60 a minute every request is counted in PostgreSQL as it
 * comes; at 6,000 a replica counts 60 at once. What a replica reserved and did not use by the
 * window's end is lost to the key: with R replicas a user may be refused up to R% early, never
 * allowed more than the limit.
 */
export function leaseSize(limit: number): number {
  return Math.max(1, Math.floor(limit / 100));
}

/** A replica's reservation of one key's window: the counts `next` to `last` are its to hand out. */
interface Lease { window: number; next: number; last: number; refill?: Promise<void> }

/**
 * The replicas' shared limiter: the gateway schema's rate_limits holds, per key and window, how
 * many requests the replicas reserved (leaseSize at a time, one upsert per reservation). Each
 * request takes the next count of this replica's reservation and is decided on it, as the
 * in-memory limiter decides on its count. Once a window's count is past the limit it stays past
 * it, so a refused key is refused here until the window ends without asking PostgreSQL again.
 */
export function createPgRateLimiter(db: Knex, limit: number): RateLimiter {
  const lease = leaseSize(limit);
  const leases = new Map<string, Lease>();
  const sweep = setInterval(() => {
    db("rate_limits").where("window_start", "<", new Date(Date.now() - 2 * WINDOW_MS)).delete().catch(() => {});
    const current = Math.floor(Date.now() / WINDOW_MS);
    for (const [k, l] of leases) if (l.window < current) leases.delete(k);
  }, WINDOW_MS);
  sweep.unref();

  /** Reserves the next `lease` counts of the window for this replica (one upsert). */
  async function reserve(key: string, l: Lease): Promise<void> {
    const { rows } = await db.raw(
      `INSERT INTO rate_limits (key, window_start, count) VALUES (?, ?, ?)
       ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limits.count + excluded.count
       RETURNING count`,
      [key, new Date(l.window * WINDOW_MS), lease],
    );
    const last = Number(rows[0].count);
    l.next = last - lease + 1;
    l.last = last;
  }

  return {
    async hit(key, now = Date.now()) {
      const window = Math.floor(now / WINDOW_MS);
      for (;;) {
        let l = leases.get(key);
        if (!l || l.window !== window) {
          l = { window, next: 1, last: 0 };
          leases.set(key, l);
        }
        // Past the limit: refused for the rest of the window, whichever replica counts next.
        if (l.next > limit && l.last >= l.next) return decide(l.next, limit, window * WINDOW_MS, now);
        if (l.next <= l.last) return decide(l.next++, limit, window * WINDOW_MS, now);
        // Spent: one reservation at a time per key; the requests that come meanwhile wait for it.
        if (!l.refill) {
          const current = l;
          current.refill = reserve(key, current).finally(() => { current.refill = undefined; });
        }
        await l.refill;
      }
    },
    stop() { clearInterval(sweep); },
  };
}
