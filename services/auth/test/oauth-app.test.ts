/**
 * Component tests of the OAuth authorization server's use cases (app/oauth.ts) over the
 * in-memory stores: authorization requests, codes (single use, 60 s, bound to client, redirect
 * URI and PKCE challenge; a reused code revokes what it issued), refresh rotation with family
 * revocation on reuse, audiences from `resource`, client authentication, and mcp.revoke_session.
 */
import test from "ava";
import { ACCESS_TOKEN_TTL_SECONDS, AUTHORIZATION_CODE_TTL_SECONDS, OAuthError, REFRESH_TOKEN_TTL_SECONDS, s256, type TokenResponse } from "../src/domain/oauth.js";
import { hashSecret } from "../src/domain/tokens.js";
import { AuthorizationRefused, type AuthorizationRequest, type TokenRequest } from "../src/app/oauth.js";
import { RESOURCES, harness, type Harness } from "./fakes.js";

const REDIRECT = "https://app.example.com/cb";
const VERIFIER = "a-verifier-of-at-least-forty-three-characters-0123456789";

interface World {
  h: Harness;
  userId: string;
  session: string;
  clientId: string;
}

/** Alice signed in, and a public client registered with one redirect URI. */
async function world(): Promise<World> {
  const h = harness();
  const user = await h.auth.createUser("alice", "paid", false, "alice's password");
  const { token } = await h.sessions.signIn("alice", "alice's password", "10.0.0.1");
  const { client } = await h.oauth.registerClient({ name: "Notes app", redirectUris: [REDIRECT], confidential: false, registeredBy: "dynamic" });
  return { h, userId: user.id, session: token, clientId: client.client_id };
}

function request(w: World, over: Partial<AuthorizationRequest> = {}): AuthorizationRequest {
  return { clientId: w.clientId, redirectUri: REDIRECT, responseType: "code", codeChallenge: s256(VERIFIER), codeChallengeMethod: "S256", scope: "collections:read media:read", resources: [], ...over };
}

async function codeFor(w: World, over: Partial<AuthorizationRequest> = {}): Promise<string> {
  return (await w.h.oauth.issueCode(request(w, over), w.session)).code;
}

function exchange(w: World, code: string, over: Partial<TokenRequest> = {}): Promise<TokenResponse> {
  return w.h.oauth.token({ grantType: "authorization_code", code, redirectUri: REDIRECT, codeVerifier: VERIFIER, resources: [], clientId: w.clientId, ...over });
}

function refresh(w: World, refreshToken: string, over: Partial<TokenRequest> = {}): Promise<TokenResponse> {
  return w.h.oauth.token({ grantType: "refresh_token", refreshToken, resources: [], clientId: w.clientId, ...over });
}

/** The OAuth error code a call ends with, "ok", or what else it threw. */
async function oauthCode(p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  if (err === undefined) return "ok";
  if (err instanceof OAuthError) return err.code;
  if (err instanceof AuthorizationRefused) return `${err.error.code}${err.redirectable ? "" : " (not redirectable)"}`;
  return `unexpected: ${String(err)}`;
}

const live = async (w: World, accessToken: string) => Boolean(await w.h.auth.introspect(accessToken));

test("the code flow: a code for the signed-in user, exchanged once for tokens of the asked scopes", async (t) => {
  const w = await world();
  const checked = await w.h.oauth.checkAuthorization(request(w), w.session);
  t.like(checked, { userId: w.userId, consented: false, scopes: ["collections:read", "media:read"], audience: "" });
  const code = await codeFor(w);
  t.true((await w.h.oauth.checkAuthorization(request(w), w.session)).consented, "consent is remembered");
  t.false((await w.h.oauth.checkAuthorization(request(w, { scope: "collections:write" }), w.session)).consented, "not for more scopes");
  const tokens = await exchange(w, code);
  t.like(tokens, { token_type: "Bearer", expires_in: ACCESS_TOKEN_TTL_SECONDS, scope: "collections:read media:read" });
  const row = await w.h.auth.introspect(tokens.access_token);
  t.like(row, { user_id: w.userId, client_id: w.clientId, scopes: ["collections:read", "media:read"], audience: "" });
  t.is(row!.expires_at.getTime(), w.h.clock.now.getTime() + ACCESS_TOKEN_TTL_SECONDS * 1000);
  t.is(w.h.state().grants.length, 1);
  t.is(row!.grant_id, w.h.state().grants[0]!.id);
  t.is(w.h.state().codes[0]!.grant_id, row!.grant_id, "the code remembers the grant it issued");
  w.h.advance(ACCESS_TOKEN_TTL_SECONDS * 1000);
  t.false(await live(w, tokens.access_token), "the access token expires after an hour");
});

test("authorization requests: an unknown client or unregistered redirect URI is not redirected; the rest is", async (t) => {
  const w = await world();
  t.is(await oauthCode(w.h.oauth.checkAuthorization(request(w, { clientId: "cms_client_nobody" }))), "invalid_request (not redirectable)");
  t.is(await oauthCode(w.h.oauth.checkAuthorization(request(w, { clientId: "" }))), "invalid_request (not redirectable)");
  t.is(await oauthCode(w.h.oauth.checkAuthorization(request(w, { redirectUri: "https://evil.example/cb" }))), "invalid_request (not redirectable)");
  t.is(await oauthCode(w.h.oauth.checkAuthorization(request(w, { responseType: "token" }))), "unsupported_response_type");
  t.is(await oauthCode(w.h.oauth.checkAuthorization(request(w, { codeChallengeMethod: "plain", codeChallenge: VERIFIER }))), "invalid_request");
  t.is(await oauthCode(w.h.oauth.checkAuthorization(request(w, { scope: "admin" }))), "invalid_scope");
  t.is(await oauthCode(w.h.oauth.checkAuthorization(request(w, { resources: ["https://elsewhere.example/mcp"] }))), "invalid_target");
  t.is(await oauthCode(w.h.oauth.issueCode(request(w), "cms_ws_not-a-session")), "access_denied", "nobody signed in: no code");
  t.is(w.h.state().codes.length, 0);
});

test("a code is single-use: presented again it is refused, and the tokens it issued are revoked and announced", async (t) => {
  const w = await world();
  const code = await codeFor(w);
  const first = await exchange(w, code);
  const second = await refresh(w, first.refresh_token);
  t.is(await oauthCode(exchange(w, code)), "invalid_grant");
  t.false(await live(w, first.access_token));
  t.false(await live(w, second.access_token), "tokens issued later in the same grant go too");
  t.is(await oauthCode(refresh(w, second.refresh_token)), "invalid_grant", "the grant's refresh tokens are dead");
  t.deepEqual(new Set(w.h.announced), new Set([hashSecret(first.access_token), hashSecret(second.access_token)]));
  t.like(w.h.state().grants[0], { revoked_reason: "authorization code reused" });
  // A third presentation revokes nothing more and announces nothing.
  t.is(await oauthCode(exchange(w, code)), "invalid_grant");
  t.is(w.h.announced.length, 2);
});

test("a code is bound to its client, redirect URI and challenge, and lives 60 seconds", async (t) => {
  const w = await world();
  const other = (await w.h.oauth.registerClient({ name: "Other", redirectUris: [REDIRECT], confidential: false, registeredBy: "dynamic" })).client.client_id;
  const refusals: Array<[string, (code: string) => Promise<unknown>]> = [
    ["another client", (code) => exchange(w, code, { clientId: other })],
    ["another redirect URI", (code) => exchange(w, code, { redirectUri: "https://app.example.com/cb2" })],
    ["no redirect URI", (code) => exchange(w, code, { redirectUri: undefined })],
    ["another verifier", (code) => exchange(w, code, { codeVerifier: `${VERIFIER}x` })],
    ["expired", (code) => { w.h.advance(AUTHORIZATION_CODE_TTL_SECONDS * 1000); return exchange(w, code); }],
  ];
  for (const [why, attempt] of refusals) {
    const code = await codeFor(w);
    t.is(await oauthCode(attempt(code)), "invalid_grant", why);
  }
  t.is(w.h.state().grants.length, 0, "no grant for a refused exchange");
  t.is(w.h.state().tokens.length, 0);
  t.is(await oauthCode(exchange(w, await codeFor(w), { codeVerifier: undefined })), "invalid_request", "PKCE is required");
  t.is(await oauthCode(exchange(w, "cms_ac_never-issued")), "invalid_grant");
});

test("confidential clients authenticate at the token endpoint; public ones need only their id", async (t) => {
  const w = await world();
  const { client, secret } = await w.h.oauth.registerClient({ name: "Server app", redirectUris: [REDIRECT], confidential: true, registeredBy: "cli" });
  t.regex(secret!, /^cms_cs_/);
  t.is(w.h.state().clients.find((c) => c.client_id === client.client_id)!.secret_hash, hashSecret(secret!));
  const conf = { ...w, clientId: client.client_id };
  t.is(await oauthCode(exchange(conf, await codeFor(conf))), "invalid_client");
  t.is(await oauthCode(exchange(conf, await codeFor(conf), { clientSecret: "cms_cs_wrong" })), "invalid_client");
  t.is(await oauthCode(exchange(conf, await codeFor(conf), { clientSecret: secret })), "ok");
  t.is(await oauthCode(exchange(w, await codeFor(w), { clientId: undefined })), "invalid_client");
  t.is(await oauthCode(exchange(w, await codeFor(w), { clientId: "cms_client_nobody" })), "invalid_client");
  t.is(await oauthCode(w.h.oauth.token({ grantType: "password", resources: [], clientId: w.clientId })), "unsupported_grant_type");
  t.is(await oauthCode(w.h.oauth.token({ grantType: "", resources: [], clientId: w.clientId })), "invalid_request");
});

test("refresh rotates: each refresh token is good once, and the new tokens keep the grant", async (t) => {
  const w = await world();
  const first = await exchange(w, await codeFor(w));
  const second = await refresh(w, first.refresh_token);
  t.not(second.refresh_token, first.refresh_token);
  t.is(second.scope, first.scope);
  t.true(await live(w, first.access_token), "rotation does not revoke the access token still in use");
  t.like(await w.h.auth.introspect(second.access_token), { grant_id: w.h.state().grants[0]!.id, client_id: w.clientId });
  const third = await refresh(w, second.refresh_token, { scope: "media:read" });
  t.is(third.scope, "media:read", "a refresh may narrow the scopes");
  t.is(await oauthCode(refresh(w, third.refresh_token, { scope: "collections:write" })), "invalid_scope", "never widen them");
  t.is(w.h.state().grants.length, 1);
});

test("a refresh token presented twice revokes its whole family, and the revocation is committed", async (t) => {
  const w = await world();
  const first = await exchange(w, await codeFor(w));
  const second = await refresh(w, first.refresh_token);
  const other = await exchange(w, await codeFor(w));
  t.is(await oauthCode(refresh(w, first.refresh_token)), "invalid_grant");
  for (const tok of [first, second]) t.false(await live(w, tok.access_token));
  t.is(await oauthCode(refresh(w, second.refresh_token)), "invalid_grant", "the thief's or the client's newer token is dead too");
  t.like(w.h.state().grants[0], { revoked_reason: "refresh token reused" });
  t.deepEqual(new Set(w.h.announced), new Set([hashSecret(first.access_token), hashSecret(second.access_token)]));
  t.true(await live(w, other.access_token), "another grant of the same user and client is untouched");
  t.is(await oauthCode(refresh(w, other.refresh_token)), "ok");
});

test("refresh tokens are bound to their client and expire after 30 days", async (t) => {
  const w = await world();
  const other = (await w.h.oauth.registerClient({ name: "Other", redirectUris: [REDIRECT], confidential: false, registeredBy: "dynamic" })).client.client_id;
  const tokens = await exchange(w, await codeFor(w));
  t.is(await oauthCode(refresh(w, tokens.refresh_token, { clientId: other })), "invalid_grant");
  t.is(await oauthCode(refresh(w, tokens.refresh_token)), "ok", "another client's attempt does not use it up");
  const later = await exchange(w, await codeFor(w));
  w.h.advance(REFRESH_TOKEN_TTL_SECONDS * 1000);
  t.is(await oauthCode(refresh(w, later.refresh_token)), "invalid_grant");
  t.is(await oauthCode(refresh(w, "cms_rt_never-issued")), "invalid_grant");
  t.is(await oauthCode(refresh(w, "")), "invalid_request");
});

test("the audience comes from resource: kept by the code and by refreshes, another one refused", async (t) => {
  const w = await world();
  const bound = await exchange(w, await codeFor(w, { resources: [`${RESOURCES.mcp}/`] }));
  t.is((await w.h.auth.introspect(bound.access_token))!.audience, RESOURCES.mcp, "canonical form (no trailing slash)");
  const again = await refresh(w, bound.refresh_token, { resources: [RESOURCES.mcp] });
  t.is((await w.h.auth.introspect(again.access_token))!.audience, RESOURCES.mcp);
  const plain = await refresh(w, again.refresh_token);
  t.is((await w.h.auth.introspect(plain.access_token))!.audience, RESOURCES.mcp, "without resource, the grant's audience");
  t.is(await oauthCode(refresh(w, plain.refresh_token, { resources: [RESOURCES.api] })), "invalid_target");
  t.is(await oauthCode(refresh(w, plain.refresh_token, { resources: ["https://elsewhere.example/"] })), "invalid_target");
  // At the code exchange too: the resource, if repeated, must be the authorization request's.
  t.is(await oauthCode(exchange(w, await codeFor(w, { resources: [RESOURCES.mcp] }), { resources: [RESOURCES.api] })), "invalid_target");
  const none = await exchange(w, await codeFor(w));
  t.is((await w.h.auth.introspect(none.access_token))!.audience, "", "no resource: a token for the JSON endpoint");
});

test("a refused refresh does not use the token up: the client can retry without tripping reuse detection", async (t) => {
  const w = await world();
  const bound = await exchange(w, await codeFor(w, { resources: [RESOURCES.mcp] }));
  t.is(await oauthCode(refresh(w, bound.refresh_token, { resources: [RESOURCES.api] })), "invalid_target");
  t.is(await oauthCode(refresh(w, bound.refresh_token, { scope: "profile:write" })), "invalid_scope");
  t.is(await oauthCode(refresh(w, bound.refresh_token)), "ok");
  t.true(await live(w, bound.access_token));
  t.is(w.h.state().grants[0]!.revoked_at, null);
});

test("mcp.revoke_session ends the MCP grants and MCP tokens with their refresh families, and the calling token; nothing else", async (t) => {
  const w = await world();
  const mcp = { ...w, clientId: "mcp" };
  const loopback = "http://127.0.0.1:5173/callback";
  const viaMcpClient = await exchange(mcp, await codeFor(mcp, { redirectUri: loopback }), { redirectUri: loopback });
  const boundToMcp = await exchange(w, await codeFor(w, { resources: [RESOURCES.mcp] }));
  const forApi = await exchange(w, await codeFor(w, { resources: [RESOURCES.api] }));
  const mintedForMcp = await w.h.auth.mintToken("alice", undefined, { clientId: "mcp-cli" });
  const plainToken = await w.h.auth.mintToken("alice", undefined);
  const calling = await w.h.auth.mintToken("alice", undefined, { clientId: "cli" });
  // Bob's MCP session is his own.
  await w.h.auth.createUser("bob", "free", false);
  const bobs = await w.h.auth.mintToken("bob", undefined, { clientId: "mcp" });

  const out = await w.h.oauth.revokeMcpSession(w.userId, calling.tokenId);
  t.deepEqual(out, { revoked: 4 }, "two grants, the token minted for an MCP client, the calling token");
  for (const tok of [viaMcpClient.access_token, boundToMcp.access_token, mintedForMcp.accessToken, calling.accessToken]) t.false(await live(w, tok));
  t.is(await oauthCode(refresh(mcp, viaMcpClient.refresh_token)), "invalid_grant");
  t.is(await oauthCode(refresh(w, boundToMcp.refresh_token)), "invalid_grant");
  for (const tok of [forApi.access_token, plainToken.accessToken, bobs.accessToken]) t.true(await live(w, tok));
  t.is(await oauthCode(refresh(w, forApi.refresh_token)), "ok");
  t.deepEqual(new Set(w.h.announced), new Set([viaMcpClient.access_token, boundToMcp.access_token, mintedForMcp.accessToken, calling.accessToken].map(hashSecret)));
  // Nothing left to end.
  t.deepEqual(await w.h.oauth.revokeMcpSession(w.userId, calling.tokenId), { revoked: 0 });
});

test("client registration: redirect URIs, names and scopes are checked; the secret is shown once", async (t) => {
  const w = await world();
  const reg = (over: Partial<Parameters<Harness["oauth"]["registerClient"]>[0]>) =>
    w.h.oauth.registerClient({ name: "App", redirectUris: [REDIRECT], confidential: false, registeredBy: "dynamic", ...over });
  t.is(await oauthCode(reg({ redirectUris: [] })), "invalid_redirect_uri");
  t.is(await oauthCode(reg({ redirectUris: ["http://app.example.com/cb"] })), "invalid_redirect_uri");
  t.is(await oauthCode(reg({ name: "  " })), "invalid_client_metadata");
  t.is(await oauthCode(reg({ scope: "media:read root" })), "invalid_client_metadata");
  const { client, secret } = await reg({ redirectUris: [REDIRECT, REDIRECT], scope: "media:read" });
  t.is(secret, undefined);
  t.like(client, { redirect_uris: [REDIRECT], scopes: ["media:read"], secret_hash: null, any_loopback: false, registered_by: "dynamic" });
  // The client's scopes are the default of a request that names none.
  const checked = await w.h.oauth.checkAuthorization(request({ ...w, clientId: client.client_id }, { scope: undefined }));
  t.deepEqual(checked.scopes, ["media:read"]);
});
