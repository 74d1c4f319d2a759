/**
 * Component tests of first-party sign-in (app/web-sessions.ts) over the in-memory store: one
 * answer for every failure, throttling per account and per address counted before the password
 * is checked and cleared by a success, sessions that resolve until they expire or sign out, and
 * a stored hash upgraded to the current parameters.
 */
import test from "ava";
import { AppError } from "@cms/platform";
import { DEFAULT_SCRYPT, hashPassword, parseHash, verifyPassword } from "../src/domain/passwords.js";
import { SIGN_IN_FAILED, WEB_SESSION_TTL_MS, type ThrottlePolicy } from "../src/domain/sign-in.js";
import { hashSecret } from "../src/domain/tokens.js";
import { FAST_SCRYPT, harness, type Harness } from "./fakes.js";

const PASSWORD = "correct horse battery";
const MINUTE = 60_000;
const POLICY: ThrottlePolicy = { windowMs: 15 * MINUTE, perAccount: 3, perAddress: 5 };

async function outcome(p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  if (err === undefined) return "signed in";
  if (!(err instanceof AppError)) return `not an AppError: ${String(err)}`;
  return err.code === "rate_limited" ? `rate_limited ${(err.extra as { retry_after_seconds: number }).retry_after_seconds}s` : `${err.code}: ${err.detail}`;
}

async function withAlice(throttle = POLICY): Promise<Harness> {
  const h = harness({ throttle });
  await h.auth.createUser("alice", "paid", false, PASSWORD);
  return h;
}

const FAILED = `unauthorized: ${SIGN_IN_FAILED}`;

test("a sign-in gives a session token that resolves to the user until it expires", async (t) => {
  const h = await withAlice();
  const s = await h.sessions.signIn("  Alice ", PASSWORD, "10.0.0.1");
  t.regex(s.token, /^cms_ws_/);
  t.like(s.user, { username: "alice", plan: "paid" });
  t.false("password_hash" in s.user);
  t.is(s.expiresAt.getTime(), h.clock.now.getTime() + WEB_SESSION_TTL_MS);
  t.is(h.state().webSessions[0]!.token_hash, hashSecret(s.token));
  t.like(await h.sessions.resolve(s.token), { user_id: s.user.id, user: { username: "alice" } });
  h.advance(WEB_SESSION_TTL_MS - 1);
  t.truthy(await h.sessions.resolve(s.token));
  h.advance(1);
  t.is(await h.sessions.resolve(s.token), undefined);
});

test("wrong password, unknown user and a user without a password all get the same answer", async (t) => {
  const h = await withAlice();
  await h.auth.createUser("bob", "free", false);
  t.is(await outcome(h.sessions.signIn("alice", "wrong password", "10.0.0.1")), FAILED);
  t.is(await outcome(h.sessions.signIn("mallory", PASSWORD, "10.0.0.2")), FAILED);
  t.is(await outcome(h.sessions.signIn("bob", "", "10.0.0.3")), FAILED);
  t.is(await outcome(h.sessions.signIn("bob", PASSWORD, "10.0.0.3")), FAILED);
  t.is(h.state().webSessions.length, 0);
});

test("the account's limit: further attempts are refused before the password is checked, even the right one", async (t) => {
  const h = await withAlice();
  for (let i = 0; i < POLICY.perAccount; i++) {
    t.is(await outcome(h.sessions.signIn("alice", `wrong ${i}`, `10.0.0.${i}`)), FAILED);
    h.advance(MINUTE);
  }
  // Three failures at 0, 1 and 2 minutes; the one at 0 leaves the window at 15 minutes, 12 from now.
  t.is(await outcome(h.sessions.signIn("alice", PASSWORD, "10.0.1.1")), "rate_limited 720s");
  t.is(await outcome(h.sessions.signIn("ALICE", PASSWORD, "10.0.1.2")), "rate_limited 720s", "the account is the same whatever the case");
  // A refused attempt is not a failure: it does not push the end of the wait.
  h.advance(12 * MINUTE - 1000);
  t.is(await outcome(h.sessions.signIn("alice", PASSWORD, "10.0.1.3")), "rate_limited 1s");
  h.advance(1000);
  t.is(await outcome(h.sessions.signIn("alice", PASSWORD, "10.0.1.4")), "signed in");
  // Other accounts are not affected.
  await h.auth.createUser("bob", "free", false, PASSWORD);
  t.is(await outcome(h.sessions.signIn("bob", PASSWORD, "10.0.0.0")), "signed in");
});

test("unknown usernames are throttled like real ones: the throttle names no account", async (t) => {
  const h = await withAlice();
  for (let i = 0; i < POLICY.perAccount; i++) t.is(await outcome(h.sessions.signIn("mallory", PASSWORD, `10.0.0.${i}`)), FAILED);
  t.regex(await outcome(h.sessions.signIn("mallory", PASSWORD, "10.0.0.9")), /^rate_limited /);
});

test("attempts are counted before the password is checked: concurrent guesses cannot all get through", async (t) => {
  const h = await withAlice();
  const guesses = await Promise.all(Array.from({ length: 12 }, (_, i) => outcome(h.sessions.signIn("alice", `guess ${i}`, `10.0.2.${i}`))));
  const checked = guesses.filter((g) => g === FAILED).length;
  t.true(checked <= POLICY.perAccount, `${checked} of 12 concurrent guesses had their password checked`);
  t.true(guesses.every((g) => g === FAILED || g.startsWith("rate_limited ")), guesses.join(", "));
  t.is(h.state().attempts.filter((a) => a.key === "u:alice").length, checked, "refused attempts are forgotten, failures kept");
});

test("a success clears the account's failures but not the address's", async (t) => {
  const h = await withAlice();
  await h.auth.createUser("bob", "free", false, PASSWORD);
  for (let i = 0; i < POLICY.perAccount - 1; i++) t.is(await outcome(h.sessions.signIn("alice", "wrong", "10.0.0.1")), FAILED);
  t.is(await outcome(h.sessions.signIn("alice", PASSWORD, "10.0.0.1")), "signed in");
  t.deepEqual(h.state().attempts.filter((a) => a.key === "u:alice"), [], "the account starts again");
  for (let i = 0; i < POLICY.perAccount - 1; i++) t.is(await outcome(h.sessions.signIn("alice", "wrong", "10.0.0.1")), FAILED);
  t.is(await outcome(h.sessions.signIn("alice", PASSWORD, "10.0.0.1")), "signed in", "not blocked by failures made before the success");
  // The address made 4 failures (the successes are not counted); its fifth blocks it for every account.
  t.is(h.state().attempts.filter((a) => a.key === "ip:10.0.0.1").length, 4);
  t.is(await outcome(h.sessions.signIn("bob", "wrong", "10.0.0.1")), FAILED);
  t.regex(await outcome(h.sessions.signIn("bob", PASSWORD, "10.0.0.1")), /^rate_limited /);
  t.is(await outcome(h.sessions.signIn("bob", PASSWORD, "10.0.0.2")), "signed in", "from another address");
});

test("failures older than twice the window are purged as new attempts come", async (t) => {
  const h = await withAlice();
  t.is(await outcome(h.sessions.signIn("alice", "wrong", "10.0.0.1")), FAILED);
  h.advance(2 * POLICY.windowMs + 1);
  t.is(await outcome(h.sessions.signIn("nobody", "wrong", "10.0.0.2")), FAILED);
  t.deepEqual(h.state().attempts.map((a) => a.key), ["u:nobody", "ip:10.0.0.2"]);
});

test("sign-out ends the session once; a token that is not a session's signs nothing out", async (t) => {
  const h = await withAlice();
  const a = await h.sessions.signIn("alice", PASSWORD, "10.0.0.1");
  const b = await h.sessions.signIn("alice", PASSWORD, "10.0.0.1");
  t.deepEqual(await h.sessions.signOut(a.token), { signedOut: true, tokenHash: hashSecret(a.token) });
  t.is(await h.sessions.resolve(a.token), undefined);
  t.truthy(await h.sessions.resolve(b.token), "the user's other sessions live on");
  t.false((await h.sessions.signOut(a.token)).signedOut);
  // An access token is not a session: sign-out does not revoke it.
  const minted = await h.auth.mintToken("alice", undefined);
  t.false((await h.sessions.signOut(minted.accessToken)).signedOut);
  t.truthy(await h.auth.introspect(minted.accessToken));
  t.is(await h.sessions.resolve(minted.accessToken), undefined);
});

test("a password hashed under other parameters is re-hashed under the current ones at sign-in", async (t) => {
  const h = await withAlice();
  const old = await hashPassword(PASSWORD, { ...FAST_SCRYPT, r: 4 });
  h.state().users[0]!.password_hash = old;
  t.is(await outcome(h.sessions.signIn("alice", PASSWORD, "10.0.0.1")), "signed in");
  const now = h.state().users[0]!.password_hash!;
  t.not(now, old);
  t.deepEqual(parseHash(now)?.params, FAST_SCRYPT);
  t.true(await verifyPassword(PASSWORD, now));
  t.notDeepEqual(FAST_SCRYPT, DEFAULT_SCRYPT, "the tests run on cheap parameters; production keeps its own");
});
