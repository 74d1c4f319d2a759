/**
 * The rate limit's rule: per-key request counts in fixed one-minute windows. The stores count;
 * this decides what a count means.
 */

/** What one counted request is told: go on or not, and what the rate-limit headers say. */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Milliseconds until the window resets. */
  resetMs: number;
}

/** The length of one rate-limit window. */
export const WINDOW_MS = 60_000;

/** The decision for the `count`-th request of the window that started at `windowStart`. */
export function decide(count: number, limit: number, windowStart: number, now: number): RateDecision {
  return { allowed: count <= limit, limit, remaining: Math.max(0, limit - count), resetMs: windowStart + WINDOW_MS - now };
}
