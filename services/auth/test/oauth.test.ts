/** OAuth protocol rules: PKCE, redirect URIs, scopes, resources. */
import test from "ava";
import { OAuthError, audienceOf, checkChallenge, consentCovers, narrowedScopes, redirectUriMatches, redirectUriProblem, requestedScopes, s256, verifierMatches } from "../src/domain/oauth.js";

const code = (fn: () => unknown) => {
  try { fn(); } catch (err) { return err instanceof OAuthError ? err.code : "other"; }
  return undefined;
};

test("PKCE S256: RFC 7636 appendix B's example, and only S256", (t) => {
  const verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
  t.is(s256(verifier), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
  t.true(verifierMatches(verifier, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"));
  t.false(verifierMatches(`${verifier}x`, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"));
  t.false(verifierMatches("short", s256("short")), "a verifier under 43 characters is refused even when it hashes right");
  t.is(code(() => checkChallenge("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "S256")), undefined);
  t.is(code(() => checkChallenge(verifier, "plain")), "invalid_request");
  t.is(code(() => checkChallenge("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "")), "invalid_request");
  t.is(code(() => checkChallenge("", "S256")), "invalid_request");
  t.is(code(() => checkChallenge("too-short", "S256")), "invalid_request");
});

test("redirect URIs that may be registered", (t) => {
  for (const ok of ["https://app.example.com/cb", "http://127.0.0.1:8123/callback", "http://[::1]/cb", "http://localhost:3000/cb", "com.example.app:/oauth2redirect"]) {
    t.is(redirectUriProblem(ok), undefined, ok);
  }
  for (const bad of ["http://app.example.com/cb", "https://app.example.com/cb#frag", "javascript:alert(1)", "data:text/html,x", "/relative", "https://user:pw@app.example.com/", "myapp:/cb"]) {
    t.truthy(redirectUriProblem(bad), bad);
  }
});

test("redirect URIs match exactly, but a loopback IP's port may change (RFC 8252 7.3)", (t) => {
  const reg = ["https://app.example.com/cb", "http://127.0.0.1/callback"];
  t.true(redirectUriMatches(reg, "https://app.example.com/cb"));
  t.false(redirectUriMatches(reg, "https://app.example.com/cb/"));
  t.false(redirectUriMatches(reg, "https://app.example.com/cb?x=1"));
  t.false(redirectUriMatches(reg, "https://app.example.com/cb/../evil"));
  t.false(redirectUriMatches(reg, "https://app.example.com.evil.example/cb"));
  t.false(redirectUriMatches(reg, "https://APP.example.com/cb"), "no normalisation: exact strings");
  t.true(redirectUriMatches(reg, "http://127.0.0.1:49152/callback"));
  t.false(redirectUriMatches(reg, "http://127.0.0.1:49152/other"));
  t.false(redirectUriMatches(reg, "http://localhost:49152/callback"), "localhost is not an IP literal");
  t.false(redirectUriMatches(reg, "http://127.0.0.1:49152/callback#x"));
});

test("the bundled MCP client accepts any loopback URI, and only loopback", (t) => {
  t.true(redirectUriMatches([], "http://127.0.0.1:5173/oauth/callback", true));
  t.true(redirectUriMatches([], "http://localhost:33418/callback", true));
  t.true(redirectUriMatches([], "http://[::1]:9/x", true));
  t.false(redirectUriMatches([], "https://127.0.0.1/cb", true));
  t.false(redirectUriMatches([], "http://127.0.0.2/cb", true));
  t.false(redirectUriMatches([], "http://evil.example/cb", true));
  t.false(redirectUriMatches([], "http://localhost.evil.example/cb", true));
  t.false(redirectUriMatches([], "http://user@127.0.0.1/cb", true));
});

test("scopes: the ones asked for, a default when none, unknown ones refused; a refresh only narrows", (t) => {
  const known = ["collections:read", "collections:write", "media:read"];
  t.deepEqual(requestedScopes("media:read collections:read media:read", known, null), ["media:read", "collections:read"]);
  t.deepEqual(requestedScopes(undefined, known, null), known);
  t.deepEqual(requestedScopes("", known, ["media:read"]), ["media:read"]);
  t.is(code(() => requestedScopes("collections:read admin", known, null)), "invalid_scope");
  t.deepEqual(narrowedScopes("media:read", ["media:read", "collections:read"]), ["media:read"]);
  t.deepEqual(narrowedScopes(undefined, ["media:read"]), ["media:read"]);
  t.is(code(() => narrowedScopes("collections:write", ["media:read"])), "invalid_scope");
});

test("resource indicators: none, or one of ours (a trailing slash aside); anything else invalid_target", (t) => {
  const known = ["https://mcp.example.com/mcp", "https://api.example.com/functions/v1/thirdparty-v1"];
  t.is(audienceOf([], known), "");
  t.is(audienceOf(["https://mcp.example.com/mcp"], known), "https://mcp.example.com/mcp");
  t.is(audienceOf(["https://mcp.example.com/mcp/"], known), "https://mcp.example.com/mcp");
  t.is(audienceOf(["https://mcp.example.com/mcp", "https://mcp.example.com/mcp"], known), "https://mcp.example.com/mcp");
  t.is(code(() => audienceOf(["https://other.example.com/mcp"], known)), "invalid_target");
  t.is(code(() => audienceOf(["/mcp"], known)), "invalid_target");
  t.is(code(() => audienceOf(["https://mcp.example.com/mcp#x"], known)), "invalid_target");
  t.is(code(() => audienceOf(known, known)), "invalid_target");
});

test("an earlier consent covers a request for the same or fewer scopes", (t) => {
  t.true(consentCovers(["a", "b"], ["a"]));
  t.true(consentCovers(["a"], []));
  t.false(consentCovers(["a"], ["a", "b"]));
  t.false(consentCovers(undefined, ["a"]));
});
