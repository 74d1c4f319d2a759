/**
 * Sign-in rules: how many failed attempts an account and an address may make before sign-ins
 * are refused for a while, the one answer every failure gets, and web session tokens.
 */
import { newSecret } from "./tokens.js";

export interface ThrottlePolicy {
  /** Failures counted over this window. */
  windowMs: number;
  /** Failures of one username (existing or not) within the window before it is refused. */
  perAccount: number;
  /** Failures from one address within the window before it is refused. */
  perAddress: number;
}

/**
 * Five wrong passwords per account per 15 minutes stop a guessing attack on one account (a user
 * who mistyped five times waits a few minutes); twenty per address stop one machine from trying
 * a common password over many accounts.
 */
export const DEFAULT_THROTTLE: ThrottlePolicy = { windowMs: 15 * 60_000, perAccount: 5, perAddress: 20 };

/** The keys failures are counted under. The username is counted whether or not it exists: the throttle names no account. */
export function throttleKeys(username: string, address: string): { account: string; address: string } {
  return { account: `u:${username.trim().toLowerCase()}`, address: `ip:${address || "?"}` };
}

/** Recent failures of a key: their times. */
export interface FailureCounts {
  account: Date[];
  address: Date[];
}

/**
 * Whether a sign-in may be attempted now, and if not, in how many seconds the oldest failure
 * that blocks it leaves the window.
 */
export function throttleDecision(failures: FailureCounts, now: Date, policy: ThrottlePolicy = DEFAULT_THROTTLE): { allowed: true } | { allowed: false; retryAfterSeconds: number } {
  const since = now.getTime() - policy.windowMs;
  const waitFor = (times: Date[], limit: number): number => {
    const recent = times.map((t) => t.getTime()).filter((t) => t > since).sort((a, b) => a - b);
    if (recent.length < limit) return 0;
    // The failure that must age out for the count to drop below the limit.
    return recent[recent.length - limit]! + policy.windowMs - now.getTime();
  };
  const wait = Math.max(waitFor(failures.account, policy.perAccount), waitFor(failures.address, policy.perAddress));
  return wait > 0 ? { allowed: false, retryAfterSeconds: Math.ceil(wait / 1000) } : { allowed: true };
}

/** The one sentence every wrong username or password gets (it must not tell which was wrong). */
export const SIGN_IN_FAILED = "The username or password is incorrect.";

/** The sentence of a refused attempt; it does not say whether the account or the address hit the limit. */
export function tooManyAttempts(retryAfterSeconds: number): string {
  const minutes = Math.ceil(retryAfterSeconds / 60);
  return `Too many sign-in attempts. Try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`;
}

/** A first-party web session lives this long from sign-in. */
export const WEB_SESSION_TTL_MS = 14 * 24 * 3600_000;

export const WEB_SESSION_PREFIX = "cms_ws_";

/** A new web session token: a recognisable prefix and 256 random bits (stored hashed). */
export function newWebSessionToken(): string {
  return newSecret(WEB_SESSION_PREFIX);
}
