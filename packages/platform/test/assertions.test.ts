/**
 * Caller assertions and the authentication interceptors: what a service accepts and refuses,
 * checked through an in-memory router with the real interceptors in front of stub handlers.
 */
import test from "ava";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignJWT } from "jose";
import { createPrivateKey } from "node:crypto";
import { Code, ConnectError, createClient, createContextValues, createRouterTransport, type Interceptor } from "@connectrpc/connect";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import {
  ASSERTION_HEADER, actAsKey, assertCalls, authenticateCalls, callerOf, createAssertionSigner, createAssertionVerifier, generateCallerKeyPem,
  loadCallerKeys, mapErrors, principalOf, createLogger, type Caller, type Principal, type TokenResolver,
} from "@cms/platform";

const alice: Caller = { userId: "3f1c3a52-8f4e-4a8e-9f5e-0c7a1d2b3c4d", username: "alice", plan: "paid", isAdmin: false, scopes: ["collections:read"], tokenId: "t1" };

async function keysIn(dir: string, verify: string[] = []) {
  return loadCallerKeys(undefined, verify, dir);
}

test("a signed assertion verifies for its audience and carries the user; it is reused while fresh", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cms-keys-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const keys = await keysIn(dir);
  const signer = createAssertionSigner(keys);
  const token = await signer.sign({ user: alice, service: "gateway" }, "collections");
  t.is(await signer.sign({ user: alice, service: "gateway" }, "collections"), token, "cached");
  t.not(await signer.sign({ user: alice, service: "gateway" }, "media"), token, "one per audience");
  const p = await createAssertionVerifier(keys).verify(token, "collections");
  t.deepEqual(p.user, alice);
  t.true(p.internal);
  t.is(p.forwardedBy, undefined);
  const fwd = await createAssertionVerifier(keys).verify(await signer.sign({ user: alice, service: "collections", forwarded: true }, "media"), "media");
  t.is(fwd.forwardedBy, "collections");
  const svc = await createAssertionVerifier(keys).verify(await signer.sign({ service: "media" }, "collections"), "collections");
  t.is(svc.user, undefined);
  t.is(svc.service, "media");
  // The pair is kept under DATA_DIR: a second load gets the same key.
  t.is((await keysIn(dir)).kid, keys.kid);
});

test("refused: another audience, another key, expired, too long-lived, not a JWT", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cms-keys-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const keys = await keysIn(dir);
  const verifier = createAssertionVerifier(keys);
  const token = await createAssertionSigner(keys).sign({ user: alice, service: "gateway" }, "collections");
  await t.throwsAsync(verifier.verify(token, "media"), { message: /addressed to another service/ });

  const forgedKeys = await loadCallerKeys(generateCallerKeyPem().privateKey, [], dir);
  const forged = await createAssertionSigner(forgedKeys).sign({ user: alice, service: "gateway" }, "collections");
  await t.throwsAsync(verifier.verify(forged, "collections"), { message: /not signed with a key of this system/ });

  // Signed with the right key id but another key: the signature fails.
  const other = createPrivateKey(generateCallerKeyPem().privateKey);
  const sneaky = await new SignJWT({ svc: "gateway" }).setProtectedHeader({ alg: "EdDSA", kid: keys.kid }).setIssuer("cms").setSubject(alice.userId)
    .setAudience("collections").setIssuedAt().setExpirationTime("60s").sign(other);
  await t.throwsAsync(verifier.verify(sneaky, "collections"), { message: /signature does not verify/ });

  const past = Date.now() - 10 * 60_000;
  const expired = await createAssertionSigner(keys, () => past).sign({ user: alice, service: "gateway" }, "collections");
  await t.throwsAsync(verifier.verify(expired, "collections"), { message: /expired/ });

  const longLived = await new SignJWT({ svc: "gateway" }).setProtectedHeader({ alg: "EdDSA", kid: keys.kid }).setIssuer("cms").setSubject(alice.userId)
    .setAudience("collections").setIssuedAt().setExpirationTime("1d").sign(keys.signing);
  await t.throwsAsync(verifier.verify(longLived, "collections"), { message: /lifetime/ });

  await t.throwsAsync(verifier.verify("not-a-jwt", "collections"), { message: /not a JWT/ });
});

test("rotation: an assertion signed with the previous key verifies while its public key is listed", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cms-keys-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const old = generateCallerKeyPem();
  const next = generateCallerKeyPem();
  const oldKeys = await loadCallerKeys(old.privateKey, [], dir);
  const token = await createAssertionSigner(oldKeys).sign({ service: "media" }, "collections");
  const rotated = await loadCallerKeys(next.privateKey, [old.publicKey], dir);
  t.is((await createAssertionVerifier(rotated).verify(token, "collections")).service, "media");
  const done = await loadCallerKeys(next.privateKey, [], dir);
  await t.throwsAsync(createAssertionVerifier(done).verify(token, "collections"));
});

/** A social service stub behind the real interceptors; records the principal of each call. */
async function stubSystem(tokens: TokenResolver) {
  const dir = mkdtempSync(join(tmpdir(), "cms-keys-"));
  const keys = await keysIn(dir);
  const seen: Array<Principal | undefined> = [];
  const log = createLogger("fatal", {});
  const server: Interceptor[] = [mapErrors(log), authenticateCalls({ verifier: createAssertionVerifier(keys), tokens })];
  const routes = (router: import("@connectrpc/connect").ConnectRouter) => router.service(SocialService, {
    async resolveHandle(_req, ctx) { seen.push(principalOf(ctx)); return { found: true, userId: callerOf(ctx)?.userId ?? "" }; },
    async listAliases(_req, ctx) { seen.push(principalOf(ctx)); return { json: "{}" } as never; },
    async getTagVocabulary(_req, ctx) { seen.push(principalOf(ctx)); return { json: "{}" } as never; },
  });
  const signed = createRouterTransport(routes, { router: { interceptors: server }, transport: { interceptors: [assertCalls({ signer: createAssertionSigner(keys), identity: "gateway" })] } });
  const bare = createRouterTransport(routes, { router: { interceptors: server } });
  return { signed: createClient(SocialService, signed), bare: createClient(SocialService, bare), seen, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const codeOf = async (p: Promise<unknown>) => {
  try { await p; return "ok"; } catch (err) { return Code[ConnectError.from(err).code]; }
};

test("a service refuses an unsigned call, and takes an internal caller's token only for public operations it allows", async (t) => {
  const bob: Caller = { ...alice, userId: "9a8b7c6d-1111-4222-8333-944455556666", username: "bob", scopes: [], tokenId: "t2" };
  const tokens: TokenResolver = {
    async resolve(token) {
      if (token === "user-token") return { user: alice, internal: false };
      if (token === "scopeless-token") return { user: bob, internal: false };
      if (token === "svc-credential") return { service: "analytics", internal: false };
      return undefined;
    },
    forget() {},
  };
  const sys = await stubSystem(tokens);
  t.teardown(sys.cleanup);
  const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

  t.is(await codeOf(sys.bare.resolveHandle({ handle: "x" })), "Unauthenticated", "no caller at all");
  t.is(await codeOf(sys.bare.resolveHandle({ handle: "x" }, { headers: { [ASSERTION_HEADER]: "forged.jwt.value" } })), "Unauthenticated", "a forged assertion");
  t.is(await codeOf(sys.bare.resolveHandle({ handle: "x" }, bearer("unknown"))), "Unauthenticated", "an unknown token");
  t.is(await codeOf(sys.bare.resolveHandle({ handle: "x" }, bearer("user-token"))), "PermissionDenied", "internal RPCs are for processes of this system");

  t.is(await codeOf(sys.bare.listAliases({}, bearer("user-token"))), "ok", "a user token with the op's scope");
  t.deepEqual(sys.seen.at(-1), { user: alice, internal: false });
  t.is(await codeOf(sys.bare.listAliases({}, bearer("scopeless-token"))), "PermissionDenied", "insufficient_scope");
  t.is(await codeOf(sys.bare.listAliases({}, bearer("svc-credential"))), "Unauthenticated", "a service credential is no user");
  t.is(await codeOf(sys.bare.getTagVocabulary({}, bearer("svc-credential"))), "ok", "an anonymous operation");
  t.deepEqual(sys.seen.at(-1), { service: "analytics", internal: false });

  // Signed calls: as the service itself, or for a user named by the call option.
  t.is(await codeOf(sys.signed.resolveHandle({ handle: "x" })), "ok");
  t.deepEqual(sys.seen.at(-1), { service: "gateway", internal: true });
  const res = await sys.signed.resolveHandle({ handle: "x" }, { contextValues: createContextValues().set(actAsKey, alice) });
  t.is(res.userId, alice.userId);
});
