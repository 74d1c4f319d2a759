/** Sign-in throttling: per account and per address, over a sliding window. */
import test from "ava";
import { DEFAULT_THROTTLE, throttleDecision, throttleKeys, tooManyAttempts } from "../src/domain/sign-in.js";

const now = new Date("2026-11-25T12:00:00Z");
const ago = (ms: number) => new Date(now.getTime() - ms);
const times = (n: number, spacingMs = 1000) => Array.from({ length: n }, (_, i) => ago((i + 1) * spacingMs));

test("fewer failures than either limit: allowed", (t) => {
  t.deepEqual(throttleDecision({ account: times(4), address: times(19) }, now), { allowed: true });
});

test("the account's fifth failure within 15 minutes blocks it until the oldest of those five ages out", (t) => {
  const d = throttleDecision({ account: times(5, 60_000), address: [] }, now);
  // Oldest of the five was 5 minutes ago: 10 minutes to wait.
  t.deepEqual(d, { allowed: false, retryAfterSeconds: 600 });
});

test("twenty failures from one address block it, whatever the accounts", (t) => {
  const d = throttleDecision({ account: [], address: times(20, 30_000) }, now);
  t.false(d.allowed);
  t.is((d as { retryAfterSeconds: number }).retryAfterSeconds, 15 * 60 - 20 * 30);
});

test("failures older than the window do not count", (t) => {
  const old = Array.from({ length: 10 }, (_, i) => ago(DEFAULT_THROTTLE.windowMs + i * 1000));
  t.deepEqual(throttleDecision({ account: old, address: old }, now), { allowed: true });
});

test("a username is counted the same whatever its case or spaces, existing or not", (t) => {
  t.is(throttleKeys(" Alice ", "10.0.0.1").account, throttleKeys("alice", "10.0.0.2").account);
  t.is(throttleKeys("x", "").address, "ip:?");
});

test("the refusal names minutes, not the limit that was hit", (t) => {
  t.is(tooManyAttempts(30), "Too many sign-in attempts. Try again in 1 minute.");
  t.is(tooManyAttempts(600), "Too many sign-in attempts. Try again in 10 minutes.");
});
