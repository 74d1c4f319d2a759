/**
 * The OAuth 2.0 authorization server over HTTP (the same flows in a real browser are in
 * oauth-browser.test.ts): metadata, dynamic registration, the authorization page (sign-in,
 * consent in words, remembered consent, deny), codes (single use, 60 s, bound to client,
 * redirect URI and challenge, a reused code revoking what it issued), refresh rotation with
 * family revocation on reuse, audience-bound tokens (RFC 8707), RFC 6749 errors, confidential
 * clients from the admin CLI, and mcp.revoke_session.
 */
import test from "ava";
import { createHash, randomBytes } from "node:crypto";
import { execFile } from "node:child_process";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { entryArgs } from "../helpers/split.js";
import { WebClient, hiddenField } from "../helpers/web-client.js";
import { authorizeUrl, callbackParams, pkcePair, tokenRequest } from "../helpers/oauth-client.js";

let sys: TestSystem;
let meta: Record<string, any>;
test.before(async () => {
  sys = await startTestSystem();
  meta = await (await fetch(`${sys.url}/.well-known/oauth-authorization-server`)).json() as Record<string, any>;
});
test.after.always(async () => { await sys?.stop(); });

const PASSWORD = "correct horse battery staple";
const REDIRECT = "http://127.0.0.1:9/callback";

async function member(): Promise<{ username: string; userId: string; web: WebClient }> {
  const username = `oa_${randomBytes(4).toString("hex")}`;
  const u = await sys.user({ username, password: PASSWORD });
  const web = new WebClient(sys.url);
  t0(await web.signIn(username, PASSWORD));
  return { username, userId: u.userId, web };
}
function t0(res: { status: number }) {
  if (res.status !== 303) throw new Error(`sign-in answered ${res.status}`);
}

async function register(body: Record<string, unknown>): Promise<{ status: number; body: Record<string, any> }> {
  const res = await fetch(meta.registration_endpoint, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() as Record<string, any> };
}

async function client(redirectUris: string[] = [REDIRECT], name = "Photo Sync"): Promise<string> {
  const r = await register({ client_name: name, redirect_uris: redirectUris, token_endpoint_auth_method: "none" });
  if (r.status !== 201) throw new Error(JSON.stringify(r));
  return r.body.client_id;
}

/** Runs the authorization page as a signed-in user who allows (when asked): the redirect's parameters. */
async function authorize(web: WebClient, params: { clientId: string; redirectUri?: string; scope?: string; resource?: string; challenge: string; state?: string }): Promise<Record<string, string>> {
  const url = authorizeUrl(meta.authorization_endpoint, { redirectUri: REDIRECT, state: "st-1", ...params });
  const page = await web.get(url);
  if (page.status === 303) return callbackParams(page.location!);
  if (page.status !== 200 || !page.html.includes('name="decision"')) throw new Error(`no consent page: ${page.status} ${page.html.slice(0, 500)}`);
  const allowed = await web.post(url, { csrf: hiddenField(page.html, "csrf"), decision: "allow" });
  if (allowed.status !== 303) throw new Error(`consent answered ${allowed.status}`);
  return callbackParams(allowed.location!);
}

/** Code and tokens for a fresh user and client. */
async function tokensFor(opts: { scope?: string; resource?: string; clientId?: string; web?: WebClient } = {}) {
  const web = opts.web ?? (await member()).web;
  const clientId = opts.clientId ?? await client();
  const { verifier, challenge } = pkcePair();
  const cb = await authorize(web, { clientId, scope: opts.scope ?? "collections:read collections:write", resource: opts.resource, challenge });
  const res = await tokenRequest(meta.token_endpoint, { grant_type: "authorization_code", code: cb.code!, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return { web, clientId, tokens: res.body, code: cb.code!, verifier };
}

test("RFC 8414 metadata names every endpoint: the page at APP_URL, token and registration at BASE_URL", async (t) => {
  t.is(meta.issuer, sys.url);
  t.is(meta.authorization_endpoint, `${sys.url}/?oauth=1`);
  t.is(meta.token_endpoint, `${sys.url}/functions/v1/thirdparty-oauth-token`);
  t.is(meta.registration_endpoint, `${sys.url}/functions/v1/thirdparty-oauth-register`);
  t.deepEqual(meta.code_challenge_methods_supported, ["S256"]);
  t.deepEqual(meta.response_types_supported, ["code"]);
  t.deepEqual(meta.grant_types_supported, ["authorization_code", "refresh_token"]);
  t.true(meta.token_endpoint_auth_methods_supported.includes("none"));
  t.true(meta.scopes_supported.includes("media:write"));
});

test("dynamic registration (RFC 7591) registers public clients; bad redirect URIs and grant types are refused", async (t) => {
  const ok = await register({ client_name: "Agent", redirect_uris: ["http://127.0.0.1/cb", "https://agent.example/cb"], token_endpoint_auth_method: "client_secret_post", grant_types: ["authorization_code", "refresh_token"] });
  t.is(ok.status, 201);
  t.regex(ok.body.client_id, /^cms_client_/);
  t.is(ok.body.client_secret, undefined, "public clients only");
  t.is(ok.body.token_endpoint_auth_method, "none");
  t.deepEqual(ok.body.redirect_uris, ["http://127.0.0.1/cb", "https://agent.example/cb"]);
  t.is(typeof ok.body.client_id_issued_at, "number");
  t.like((await register({ client_name: "x", redirect_uris: ["http://evil.example/cb"] })).body, { error: "invalid_redirect_uri" });
  t.like((await register({ client_name: "x", redirect_uris: ["https://a.example/cb#frag"] })).body, { error: "invalid_redirect_uri" });
  t.like((await register({ client_name: "x" })).body, { error: "invalid_redirect_uri" });
  t.like((await register({ client_name: "x", redirect_uris: ["https://a.example/cb"], grant_types: ["client_credentials"] })).body, { error: "invalid_client_metadata" });
  t.like((await register({ client_name: "x", redirect_uris: ["https://a.example/cb"], scope: "root" })).body, { error: "invalid_client_metadata" });
  const notJson = await fetch(meta.registration_endpoint, { method: "POST", body: "redirect_uris=x", headers: { "content-type": "application/x-www-form-urlencoded" } });
  t.is(notJson.status, 400);
  // A body over the endpoints' 64 KiB bound is refused as such, not as bad metadata.
  const huge = await register({ client_name: "x".repeat(70 * 1024), redirect_uris: ["https://a.example/cb"] });
  t.is(huge.status, 413);
  t.is(huge.body.error, "invalid_request");
});

test("signed out: the page signs the user in first (naming the client), then asks for consent in words; allow gives code, state and iss", async (t) => {
  const username = `oa_${randomBytes(4).toString("hex")}`;
  await sys.user({ username, password: PASSWORD });
  const clientId = await client([REDIRECT], "Photo <Sync>");
  const { verifier, challenge } = pkcePair();
  const url = authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: REDIRECT, challenge, scope: "collections:read media:write", state: "xyz" });
  const web = new WebClient(sys.url);
  const signIn = await web.get(url);
  t.is(signIn.status, 200);
  t.regex(signIn.html, /to continue to <strong>Photo &lt;Sync&gt;<\/strong>/);
  t.regex(signIn.headers.get("content-security-policy")!, /form-action 'self' http:\/\/127\.0\.0\.1:9/);
  const signedIn = await web.post("/signin", { csrf: hiddenField(signIn.html, "csrf"), return_to: hiddenField(signIn.html, "return_to"), username, password: PASSWORD });
  t.is(signedIn.status, 303);
  t.is(new URL(signedIn.location!, sys.url).toString(), url);
  const consent = await web.get(url);
  t.is(consent.status, 200);
  t.regex(consent.html, /Allow <span class="client">Photo &lt;Sync&gt;<\/span> to use your account\?/);
  t.regex(consent.html, /See your collections, private ones included/);
  t.regex(consent.html, /Upload, change and move media in your collections/);
  t.notRegex(consent.html, /Delete/);
  t.regex(consent.html, new RegExp(`Signed in as <strong>${username}</strong>`));
  const allowed = await web.post(url, { csrf: hiddenField(consent.html, "csrf"), decision: "allow" });
  t.is(allowed.status, 303);
  const cb = callbackParams(allowed.location!);
  t.true(allowed.location!.startsWith(`${REDIRECT}?`));
  t.is(cb.state, "xyz");
  t.is(cb.iss, sys.url);
  t.regex(cb.code!, /^cms_ac_/);

  const res = await tokenRequest(meta.token_endpoint, { grant_type: "authorization_code", code: cb.code!, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId });
  t.is(res.status, 200);
  t.is(res.headers.get("cache-control"), "no-store");
  t.is(res.body.token_type, "Bearer");
  t.is(res.body.expires_in, 3600);
  t.is(res.body.scope, "collections:read media:write");
  t.regex(res.body.access_token, /^cms_at_/);
  t.regex(res.body.refresh_token, /^cms_rt_/);
  const ping = await sys.call(res.body.access_token, { op: "ping" });
  t.is(ping.status, 200);
  t.deepEqual(ping.body.scopes, ["collections:read", "media:write"]);
  t.is((await sys.call(res.body.access_token, { op: "collections.create", name: "nope" })).body.error, "insufficient_scope");
});

test("a consent is remembered for the same or fewer scopes; more scopes ask again", async (t) => {
  const { web } = await member();
  const clientId = await client();
  t.truthy((await authorize(web, { clientId, scope: "collections:read media:read", challenge: pkcePair().challenge })).code);
  const again = await web.get(authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge, scope: "media:read", state: "s2" }));
  t.is(again.status, 303, "no consent page the second time");
  t.like(callbackParams(again.location!), { state: "s2" });
  t.truthy(callbackParams(again.location!).code);
  const more = await web.get(authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge, scope: "media:read collections:delete" }));
  t.is(more.status, 200);
  t.regex(more.html, /Delete your collections/);
});

test("deny returns access_denied with the state to the client", async (t) => {
  const { web } = await member();
  const clientId = await client();
  const url = authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: "keep-me" });
  const page = await web.get(url);
  const denied = await web.post(url, { csrf: hiddenField(page.html, "csrf"), decision: "deny" });
  t.is(denied.status, 303);
  t.like(callbackParams(denied.location!), { error: "access_denied", state: "keep-me", iss: sys.url });
  t.false("code" in callbackParams(denied.location!));
});

test("the consent form needs its CSRF token", async (t) => {
  const { web } = await member();
  const clientId = await client();
  const url = authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge });
  await web.get(url);
  const forged = await web.post(url, { decision: "allow" });
  t.is(forged.status, 403);
  t.is(forged.location, undefined);
  const other = await member();
  const otherPage = await other.web.get(url);
  const stolen = await web.post(url, { csrf: hiddenField(otherPage.html, "csrf"), decision: "allow" });
  t.is(stolen.status, 403);
});

test("an unknown client or an unregistered redirect URI is told to the user, never redirected", async (t) => {
  const { web } = await member();
  const clientId = await client();
  const unknown = await web.get(authorizeUrl(meta.authorization_endpoint, { clientId: "cms_client_nope", redirectUri: REDIRECT, challenge: pkcePair().challenge }));
  t.is(unknown.status, 400);
  t.regex(unknown.html, /This sign-in link is not valid/);
  for (const uri of ["http://127.0.0.1:9/callback/extra", "https://attacker.example/callback", "http://127.0.0.1:9/callback?x=1"]) {
    const res = await web.get(authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: uri, challenge: pkcePair().challenge }));
    t.is(res.status, 400, uri);
    t.is(res.location, undefined);
  }
  // A loopback IP's port may change (RFC 8252).
  t.is((await web.get(authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: "http://127.0.0.1:5555/callback", challenge: pkcePair().challenge }))).status, 200);
});

test("refusals the client may hear go to its redirect URI: plain PKCE, no challenge, unknown scope, another response_type, another resource", async (t) => {
  const { web } = await member();
  const clientId = await client();
  const { verifier, challenge } = pkcePair();
  const cases: Array<[Parameters<typeof authorizeUrl>[1], string]> = [
    [{ clientId, redirectUri: REDIRECT, challenge: verifier, method: "plain" }, "invalid_request"],
    [{ clientId, redirectUri: REDIRECT, challenge: "" }, "invalid_request"],
    [{ clientId, redirectUri: REDIRECT, challenge, scope: "collections:read admin" }, "invalid_scope"],
    [{ clientId, redirectUri: REDIRECT, challenge, responseType: "token" }, "unsupported_response_type"],
    [{ clientId, redirectUri: REDIRECT, challenge, resource: "https://elsewhere.example/mcp" }, "invalid_target"],
  ];
  for (const [params, error] of cases) {
    const res = await web.get(authorizeUrl(meta.authorization_endpoint, { ...params, state: "s" }));
    t.is(res.status, 303, error);
    t.like(callbackParams(res.location!), { error, state: "s" });
  }
});

test("codes are single-use: a second exchange fails and revokes the tokens the first one issued", async (t) => {
  const { clientId, tokens, code, verifier } = await tokensFor();
  t.is((await sys.call(tokens.access_token, { op: "ping" })).status, 200);
  const again = await tokenRequest(meta.token_endpoint, { grant_type: "authorization_code", code, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId });
  t.is(again.status, 400);
  t.is(again.body.error, "invalid_grant");
  t.is((await sys.call(tokens.access_token, { op: "ping" })).status, 401, "the access token it issued is revoked");
  const refreshed = await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: clientId });
  t.is(refreshed.body.error, "invalid_grant", "and its refresh token");
});

test("a code is bound to its verifier, redirect URI and client, and lives 60 s", async (t) => {
  const { web } = await member();
  const clientId = await client();
  const otherClient = await client();
  const exchange = async (over: Record<string, string>) => {
    const { verifier, challenge } = pkcePair();
    const cb = await authorize(web, { clientId, challenge, scope: "media:read" });
    return tokenRequest(meta.token_endpoint, { grant_type: "authorization_code", code: cb.code!, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId, ...over });
  };
  t.like((await exchange({ code_verifier: pkcePair().verifier })).body, { error: "invalid_grant" });
  t.like((await exchange({ code_verifier: "" })).body, { error: "invalid_request" });
  t.like((await exchange({ redirect_uri: "http://127.0.0.1:10/callback" })).body, { error: "invalid_grant" });
  t.like((await exchange({ client_id: otherClient })).body, { error: "invalid_grant" });
  const unknown = await exchange({ client_id: "cms_client_unknown" });
  t.is(unknown.status, 401);
  t.is(unknown.body.error, "invalid_client");
  t.like((await exchange({ code: "cms_ac_made_up" })).body, { error: "invalid_grant" });

  const { verifier, challenge } = pkcePair();
  const cb = await authorize(web, { clientId, challenge, scope: "media:read" });
  await sys.system.dbOf("auth")!("oauth_codes").update({ expires_at: new Date(Date.now() - 1000) }).where({ code_hash: createHash("sha256").update(cb.code!).digest("hex") });
  t.like((await tokenRequest(meta.token_endpoint, { grant_type: "authorization_code", code: cb.code!, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId })).body, { error: "invalid_grant" });
});

test("refresh tokens rotate; presenting an old one revokes the whole family", async (t) => {
  const { clientId, tokens } = await tokensFor({ scope: "collections:read media:read" });
  const r1 = await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: clientId });
  t.is(r1.status, 200);
  t.not(r1.body.refresh_token, tokens.refresh_token);
  t.is(r1.body.scope, "collections:read media:read");
  const narrowed = await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: r1.body.refresh_token, client_id: clientId, scope: "media:read" }, { json: true });
  t.is(narrowed.status, 200, "JSON bodies are accepted too");
  t.is(narrowed.body.scope, "media:read");
  t.like((await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: narrowed.body.refresh_token, client_id: clientId, scope: "collections:write" })).body, { error: "invalid_scope" });
  t.is((await sys.call(narrowed.body.access_token, { op: "ping" })).status, 200);

  // The first refresh token, already rotated away, comes back (stolen): the family is revoked.
  const reuse = await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: clientId });
  t.is(reuse.body.error, "invalid_grant");
  t.is((await sys.call(narrowed.body.access_token, { op: "ping" })).status, 401);
  t.is((await sys.call(r1.body.access_token, { op: "ping" })).status, 401);
  t.like((await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: narrowed.body.refresh_token, client_id: clientId })).body, { error: "invalid_grant" });
});

test("token endpoint errors are RFC 6749 JSON", async (t) => {
  t.like((await tokenRequest(meta.token_endpoint, { grant_type: "password", username: "a", password: "b", client_id: "mcp" })).body, { error: "unsupported_grant_type" });
  t.like((await tokenRequest(meta.token_endpoint, { client_id: "mcp" })).body, { error: "invalid_request" });
  const dup = await fetch(meta.token_endpoint, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "grant_type=refresh_token&client_id=mcp&client_id=other" });
  t.like(await dup.json(), { error: "invalid_request" });
  const get = await fetch(meta.token_endpoint);
  t.is(get.status, 405);
  const text = await fetch(meta.token_endpoint, { method: "POST", headers: { "content-type": "text/plain" }, body: "x" });
  t.like(await text.json(), { error: "invalid_request" });
});

test("resource (RFC 8707): a token bound to {MCP_URL}/mcp is refused by the JSON endpoint; introspection tells its audience", async (t) => {
  const mcp = `${sys.url}/mcp`;
  const bound = await tokensFor({ resource: mcp, scope: "collections:read" });
  const res = await sys.call(bound.tokens.access_token, { op: "ping" });
  t.is(res.status, 401);
  t.regex(res.body.detail, /bound to .*\/mcp/);
  const info = await sys.system.clients.get(AuthService).introspectToken({ token: bound.tokens.access_token });
  t.true(info.active);
  t.is(info.audience, mcp);
  t.is(info.clientId, bound.clientId);
  // Refreshing keeps the audience; asking for another resource at the token endpoint is invalid_target.
  const r = await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: bound.tokens.refresh_token, client_id: bound.clientId, resource: mcp });
  t.is(r.status, 200);
  t.is((await sys.system.clients.get(AuthService).introspectToken({ token: r.body.access_token })).audience, mcp);
  t.like((await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: r.body.refresh_token, client_id: bound.clientId, resource: `${sys.url}/functions/v1/thirdparty-v1` })).body, { error: "invalid_target" });
  // Without a resource, no audience: the JSON endpoint accepts it.
  const plain = await tokensFor({ scope: "collections:read" });
  t.is((await sys.system.clients.get(AuthService).introspectToken({ token: plain.tokens.access_token })).audience, "");
  t.is((await sys.call(plain.tokens.access_token, { op: "ping" })).status, 200);
  // A token bound to the JSON endpoint works there.
  const api = await tokensFor({ resource: `${sys.url}/functions/v1/thirdparty-v1`, scope: "collections:read" });
  t.is((await sys.call(api.tokens.access_token, { op: "ping" })).status, 200);
});

test("the bundled client mcp takes any loopback redirect URI, on any port, and nothing else", async (t) => {
  const { web } = await member();
  for (const redirectUri of ["http://127.0.0.1:43123/oauth/callback", "http://localhost:5173/cb"]) {
    const { verifier, challenge } = pkcePair();
    const cb = await authorize(web, { clientId: "mcp", redirectUri, challenge, scope: "collections:read", resource: `${sys.url}/mcp` });
    const res = await tokenRequest(meta.token_endpoint, { grant_type: "authorization_code", code: cb.code!, redirect_uri: redirectUri, code_verifier: verifier, client_id: "mcp" });
    t.is(res.status, 200, redirectUri);
  }
  const evil = await web.get(authorizeUrl(meta.authorization_endpoint, { clientId: "mcp", redirectUri: "https://evil.example/cb", challenge: pkcePair().challenge }));
  t.is(evil.status, 400);
});

test("mcp.revoke_session, called with the web session token, ends the user's MCP sessions and leaves other clients' tokens", async (t) => {
  const { web } = await member();
  const mcp = `${sys.url}/mcp`;
  const viaMcpClient = await tokensFor({ web, clientId: "mcp", scope: "collections:read" }).catch(() => undefined);
  // The bundled client needs a loopback redirect: REDIRECT is one.
  t.truthy(viaMcpClient);
  const bound = await tokensFor({ web, resource: mcp, scope: "collections:read" });
  const other = await tokensFor({ web, scope: "collections:read" });
  const sessionToken = web.jar.get("cms_session")!;
  const res = await sys.call(sessionToken, { op: "mcp.revoke_session" });
  t.is(res.status, 200);
  t.is(res.body.revoked, 2);
  const introspect = (token: string) => sys.system.clients.get(AuthService).introspectToken({ token });
  t.false((await introspect(viaMcpClient!.tokens.access_token)).active);
  t.false((await introspect(bound.tokens.access_token)).active);
  t.like((await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: bound.tokens.refresh_token, client_id: bound.clientId })).body, { error: "invalid_grant" });
  t.is((await sys.call(other.tokens.access_token, { op: "ping" })).status, 200, "another client's token is not an MCP session");
  t.is((await sys.call(sessionToken, { op: "ping" })).status, 200, "the web session goes on");
});

test.serial("admin CLI client create: a confidential client authenticates with HTTP Basic; a wrong secret is 401 invalid_client", async (t) => {
  t.timeout(120_000);
  const out = await new Promise<string>((resolve, reject) => execFile(process.execPath, [...entryArgs("packages/server/src/admin-cli.ts"), "client", "create", "--name", "Backoffice", "--redirect-uri", "https://backoffice.example/cb", "--confidential"], { env: { ...process.env, ...sys.env, LOG_LEVEL: "error" } }, (err, stdout, stderr) => (err ? reject(new Error(stderr)) : resolve(stdout))));
  const created = JSON.parse(out.trim());
  t.regex(created.client_id, /^cms_client_/);
  t.regex(created.client_secret, /^cms_cs_/);
  const { web } = await member();
  const redirectUri = "https://backoffice.example/cb";
  const run = async (auth: string | undefined, body: Record<string, string> = {}) => {
    const { verifier, challenge } = pkcePair();
    const cb = await authorize(web, { clientId: created.client_id, redirectUri, challenge, scope: "media:read" });
    return tokenRequest(meta.token_endpoint, { grant_type: "authorization_code", code: cb.code!, redirect_uri: redirectUri, code_verifier: verifier, ...body }, { headers: auth ? { authorization: auth } : {} });
  };
  const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")}`;
  t.is((await run(basic(created.client_id, created.client_secret))).status, 200);
  t.is((await run(undefined, { client_id: created.client_id, client_secret: created.client_secret })).status, 200);
  const wrong = await run(basic(created.client_id, "cms_cs_wrong"));
  t.is(wrong.status, 401);
  t.is(wrong.body.error, "invalid_client");
  t.regex(wrong.headers.get("www-authenticate")!, /^Basic/);
  const missing = await run(undefined, { client_id: created.client_id });
  t.is(missing.body.error, "invalid_client");
});
