/**
 * Per-user request limits in fixed one-minute windows. The in-memory limiter is for the
 * all-in-one process only; replicas share the PostgreSQL limiter (one upsert per request).
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

/** The replicas' shared limiter: one upsert per request in the gateway schema's rate_limits. */
export function createPgRateLimiter(db: Knex, limit: number): RateLimiter {
  const sweep = setInterval(() => {
    db("rate_limits").where("window_start", "<", new Date(Date.now() - 2 * WINDOW_MS)).delete().catch(() => {});
  }, WINDOW_MS);
  sweep.unref();
  return {
    async hit(key, now = Date.now()) {
      const windowStart = Math.floor(now / WINDOW_MS) * WINDOW_MS;
      const { rows } = await db.raw(
        `INSERT INTO rate_limits (key, window_start, count) VALUES (?, ?, 1)
         ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limits.count + 1
         RETURNING count`,
        [key, new Date(windowStart)],
      );
      return decide(Number(rows[0].count), limit, windowStart, now);
    },
    stop() { clearInterval(sweep); },
  };
}
