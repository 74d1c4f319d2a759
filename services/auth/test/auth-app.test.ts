/**
 * Component tests of the auth use cases (app/auth.ts) over the in-memory stores: users and
 * passwords, access tokens minted, introspected, expired and revoked, service credentials and
 * API keys.
 */
import test from "ava";
import { AppError } from "@cms/platform";
import { parseHash, verifyPassword } from "../src/domain/passwords.js";
import { ALL_SCOPES, DEFAULT_TOKEN_TTL_SECONDS, hashSecret } from "../src/domain/tokens.js";
import { FAST_SCRYPT, harness } from "./fakes.js";

async function refusal(p: Promise<unknown>): Promise<{ code: string; field?: unknown }> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  if (!(err instanceof AppError)) return { code: `not an AppError: ${String(err)}` };
  return { code: err.code, field: (err.extra as { field?: unknown }).field };
}

test("a user is created once per username; bad names, plans and passwords are refused naming the field", async (t) => {
  const h = harness();
  const u = await h.auth.createUser("alice", "paid", false, "a long enough password");
  t.like(u, { username: "alice", plan: "paid", is_admin: false });
  t.false("password_hash" in u, "the hash never leaves the store through the app");
  t.deepEqual(await refusal(h.auth.createUser("alice", "free", false)), { code: "conflict", field: "username" });
  t.deepEqual(await refusal(h.auth.createUser("Alice!", "free", false)), { code: "invalid_request", field: "username" });
  t.deepEqual(await refusal(h.auth.createUser("bob", "gold", false)), { code: "invalid_request", field: "plan" });
  t.deepEqual(await refusal(h.auth.createUser("bob", "free", false, "short")), { code: "invalid_request", field: "password" });
  t.deepEqual(h.state().users.map((r) => r.username), ["alice"]);
  // The password is stored hashed, under the parameters the app was given.
  const stored = h.state().users[0]!.password_hash!;
  t.deepEqual(parseHash(stored)?.params, FAST_SCRYPT);
  t.true(await verifyPassword("a long enough password", stored));
  // Without a password the user cannot sign in with one.
  await h.auth.createUser("carol", "free", true);
  t.is(h.state().users.find((r) => r.username === "carol")!.password_hash, null);
});

test("setPassword replaces the hash of an existing user, refuses a weak password and an unknown user", async (t) => {
  const h = harness();
  await h.auth.createUser("alice", "free", false);
  await h.auth.setPassword("alice", "a brand new password");
  t.true(await verifyPassword("a brand new password", h.state().users[0]!.password_hash!));
  t.deepEqual(await refusal(h.auth.setPassword("alice", "1234567")), { code: "invalid_request", field: "password" });
  t.true(await verifyPassword("a brand new password", h.state().users[0]!.password_hash!), "unchanged by the refusal");
  t.is((await refusal(h.auth.setPassword("nobody", "a brand new password"))).code, "not_found");
});

test("a minted token introspects with its user and scopes until it expires", async (t) => {
  const h = harness();
  const alice = await h.auth.createUser("alice", "founding", false);
  const minted = await h.auth.mintToken("alice", ["media:read", "collections:read", "media:read"], { ttlSeconds: 60, clientId: "cli" });
  t.deepEqual(minted.scopes, ["media:read", "collections:read"]);
  t.is(minted.expiresAt.getTime(), h.clock.now.getTime() + 60_000);
  t.is(h.state().tokens[0]!.token_hash, hashSecret(minted.accessToken), "stored hashed, never in clear");
  const row = await h.auth.introspect(minted.accessToken);
  t.like(row, { id: minted.tokenId, user_id: alice.id, client_id: "cli", audience: "", grant_id: null, user: { username: "alice", plan: "founding" } });
  h.advance(59_999);
  t.truthy(await h.auth.introspect(minted.accessToken));
  h.advance(1);
  t.is(await h.auth.introspect(minted.accessToken), undefined, "expired at expires_at");
  t.is(await h.auth.introspect("cms_at_unknown"), undefined);
});

test("minting: every scope by default, the default lifetime, unknown users and scopes refused", async (t) => {
  const h = harness();
  await h.auth.createUser("alice", "free", false);
  const minted = await h.auth.mintToken("alice", undefined);
  t.deepEqual(minted.scopes, [...ALL_SCOPES]);
  t.is(minted.expiresAt.getTime(), h.clock.now.getTime() + DEFAULT_TOKEN_TTL_SECONDS * 1000);
  t.is(h.state().tokens[0]!.client_id, "");
  t.is((await refusal(h.auth.mintToken("nobody", undefined))).code, "not_found");
  t.deepEqual(await refusal(h.auth.mintToken("alice", ["media:read", "root"])), { code: "invalid_request", field: "scopes" });
  t.is(h.state().tokens.length, 1, "nothing stored for a refusal");
});

test("a revoked token no longer introspects; revoking again reports nothing revoked but names the same hash", async (t) => {
  const h = harness();
  await h.auth.createUser("alice", "free", false);
  const a = await h.auth.mintToken("alice", undefined);
  const b = await h.auth.mintToken("alice", undefined);
  t.deepEqual(await h.auth.revokeToken(a.accessToken), { revoked: true, tokenHash: hashSecret(a.accessToken) });
  t.is(await h.auth.introspect(a.accessToken), undefined);
  t.truthy(await h.auth.introspect(b.accessToken), "other tokens of the user live on");
  const firstRevocation = h.state().tokens[0]!.revoked_at;
  h.advance(1000);
  t.deepEqual(await h.auth.revokeToken(a.accessToken), { revoked: false, tokenHash: hashSecret(a.accessToken) });
  t.deepEqual(h.state().tokens[0]!.revoked_at, firstRevocation, "the first revocation's time is kept");
  t.is((await h.auth.revokeToken("cms_at_unknown")).revoked, false);
});

test("service credentials: shown once, recognised by prefix and hash, dead once revoked", async (t) => {
  const h = harness();
  const { name, credential } = await h.auth.createServiceCredential("billing");
  t.is(name, "billing");
  t.is(await h.auth.serviceOf(credential), "billing");
  t.is(await h.auth.serviceOf(credential.replace("cms_svc_", "cms_at_")), undefined, "another kind of secret is not looked up");
  t.is(await h.auth.serviceOf(`${credential}x`), undefined);
  h.state().serviceCredentials[0]!.revoked_at = h.clock.now;
  t.is(await h.auth.serviceOf(credential), undefined);
  t.is((await refusal(h.auth.createServiceCredential("Billing Service"))).code, "invalid_request");
});

test("API keys: a given key or a new one, stored hashed; the same key twice is one key", async (t) => {
  const h = harness();
  const made = await h.auth.createApiKey("ci");
  t.regex(made, /^cms_key_/);
  t.true(await h.auth.checkApiKey(made));
  t.is(await h.auth.createApiKey("seed", "fixed-key"), "fixed-key");
  t.is(await h.auth.createApiKey("again", "fixed-key"), "fixed-key");
  t.deepEqual([...h.state().apiKeys], [[hashSecret(made), "ci"], [hashSecret("fixed-key"), "seed"]]);
  t.true(await h.auth.checkApiKey("fixed-key"));
  t.false(await h.auth.checkApiKey("other-key"));
  t.false(await h.auth.checkApiKey(""));
});
