/**
 * OAuth 2.0 protocol rules as pure functions (RFC 6749, RFC 7636 PKCE, RFC 8252 native apps,
 * RFC 8707 resource indicators, RFC 7591 registration, RFC 9700 current practice): PKCE S256,
 * redirect URI registration and matching, scopes, resources, lifetimes and the error type whose
 * codes are RFC 6749's.
 *
 * Why not a library: oidc-provider (the well-kept Node authorization server) serves every
 * endpoint under one issuer origin from its own Koa app, with its own interaction URLs, cookies,
 * storage adapter and token formats. Here the authorization page is `{APP_URL}/?oauth=1` while
 * the token endpoint is `{BASE_URL}/functions/v1/thirdparty-oauth-token` (two origins), the
 * gateway is a stateless HTTP front of services that talk Connect, and access tokens must be the
 * auth service's own opaque tokens that every service introspects. The protocol is small enough
 * to keep in these functions, each unit-tested.
 */
import { createHash } from "node:crypto";
import { newSecret } from "./tokens.js";

/** RFC 6749 section 5.2 / 4.1.2.1 error codes, plus RFC 8707's and RFC 7591's. */
export type OAuthErrorCode =
  | "invalid_request"
  | "invalid_client"
  | "invalid_grant"
  | "unauthorized_client"
  | "unsupported_grant_type"
  | "unsupported_response_type"
  | "invalid_scope"
  | "invalid_target"
  | "access_denied"
  | "server_error"
  | "invalid_redirect_uri"
  | "invalid_client_metadata";

/** A refusal in OAuth's own terms (not the contract's error codes). */
export class OAuthError extends Error {
  override name = "OAuthError";
  constructor(readonly code: OAuthErrorCode, readonly description: string) {
    super(`${code}: ${description}`);
  }
}

export const ACCESS_TOKEN_TTL_SECONDS = 3600;
export const REFRESH_TOKEN_TTL_SECONDS = 30 * 24 * 3600;
export const AUTHORIZATION_CODE_TTL_SECONDS = 60;

/** The bundled public client of MCP clients (conventions.md): any loopback redirect URI. */
export const MCP_CLIENT_ID = "mcp";

export const newAuthorizationCode = () => newSecret("cms_ac_");
export const newRefreshToken = () => newSecret("cms_rt_");
export const newClientSecret = () => newSecret("cms_cs_");
export const newClientId = () => newSecret("cms_client_", 12);

/** RFC 7636 4.1: 43 to 128 unreserved characters. */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
/** An S256 challenge: base64url of 32 bytes, unpadded. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/** The S256 challenge of a verifier (what a client sends at authorization). */
export function s256(verifier: string): string {
  return createHash("sha256").update(verifier, "ascii").digest("base64url");
}

/** Checks code_challenge and its method at the authorization request: S256 only (RFC 9700 2.1.1). */
export function checkChallenge(challenge: string, method: string): void {
  if (!challenge) throw new OAuthError("invalid_request", "code_challenge is required (PKCE with S256).");
  if (method !== "S256") throw new OAuthError("invalid_request", method ? `code_challenge_method ${method} is not supported; use S256.` : "code_challenge_method=S256 is required (plain is not supported).");
  if (!S256_CHALLENGE.test(challenge)) throw new OAuthError("invalid_request", "code_challenge must be the base64url SHA-256 of the verifier (43 characters).");
}

/** Whether a verifier fits the challenge stored with the code. */
export function verifierMatches(verifier: string, challenge: string): boolean {
  return VERIFIER.test(verifier) && s256(verifier) === challenge;
}

const LOOPBACK_IPS = new Set(["127.0.0.1", "[::1]"]);

/** http on a loopback host (RFC 8252 7.3), or localhost for the bundled MCP client. */
function loopback(u: URL, allowLocalhost: boolean): boolean {
  return u.protocol === "http:" && (LOOPBACK_IPS.has(u.hostname) || (allowLocalhost && u.hostname === "localhost"));
}

function parseUrl(s: string): URL | undefined {
  try {
    return new URL(s);
  } catch {
    return undefined;
  }
}

/**
 * Whether a redirect URI may be registered: absolute, without a fragment or credentials; https,
 * http on loopback (native apps, RFC 8252 7.3), or a private-use scheme in reverse-domain form
 * (RFC 8252 7.1, e.g. com.example.app:/cb). Returns why not, or undefined.
 */
export function redirectUriProblem(uri: string): string | undefined {
  const u = parseUrl(uri);
  if (!u || uri.length > 2000) return `${JSON.stringify(uri.slice(0, 200))} is not an absolute URI.`;
  if (u.hash || uri.includes("#")) return "A redirect URI must not have a fragment.";
  if (u.username || u.password) return "A redirect URI must not carry credentials.";
  if (u.protocol === "https:") return undefined;
  if (u.protocol === "http:") return loopback(u, true) ? undefined : "http redirect URIs are allowed on loopback only (127.0.0.1, [::1], localhost); use https.";
  const scheme = u.protocol.slice(0, -1);
  if (/^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+$/.test(scheme)) return undefined;
  return `The scheme ${scheme}: is not allowed; use https, http on loopback, or a reverse-domain private-use scheme.`;
}

/**
 * Whether a requested redirect URI is one the client registered: exact string comparison
 * (RFC 9700 2.1), except that a loopback IP's port may differ (RFC 8252 7.3: native apps listen
 * on an ephemeral port). The bundled MCP client accepts any loopback URI, localhost included.
 */
export function redirectUriMatches(registered: readonly string[], requested: string, anyLoopback = false): boolean {
  const req = parseUrl(requested);
  if (!req || req.hash || requested.includes("#")) return false;
  if (anyLoopback && loopback(req, true) && !req.username && !req.password) return true;
  if (registered.includes(requested)) return true;
  if (!loopback(req, false)) return false;
  return registered.some((r) => {
    const reg = parseUrl(r);
    if (!reg || !loopback(reg, false)) return false;
    return reg.hostname === req.hostname && reg.pathname === req.pathname && reg.search === req.search;
  });
}

/**
 * The scopes asked for (RFC 6749 3.3: space-separated); without a scope parameter, the client's
 * registered scopes, or else every scope (the consent page lists them). Unknown: invalid_scope.
 */
export function requestedScopes(scope: string | undefined, known: readonly string[], clientDefault: readonly string[] | null): string[] {
  if (scope === undefined || scope.trim() === "") return [...(clientDefault ?? known)];
  const parts = [...new Set(scope.split(" ").filter(Boolean))];
  const unknown = parts.filter((p) => !known.includes(p));
  if (unknown.length) throw new OAuthError("invalid_scope", `Unknown scope${unknown.length > 1 ? "s" : ""}: ${unknown.join(" ")}. Known: ${known.join(" ")}.`);
  return parts;
}

/** A refresh may narrow the grant's scopes, never widen them (RFC 6749 6). */
export function narrowedScopes(scope: string | undefined, granted: readonly string[]): string[] {
  if (scope === undefined || scope.trim() === "") return [...granted];
  const parts = [...new Set(scope.split(" ").filter(Boolean))];
  const extra = parts.filter((p) => !granted.includes(p));
  if (extra.length) throw new OAuthError("invalid_scope", `The grant does not include ${extra.join(" ")}.`);
  return parts;
}

/** A resource URI compared without a trailing slash (`https://x/mcp/` is `https://x/mcp`). */
function canonicalResource(r: string): string {
  const u = parseUrl(r);
  if (!u) return r;
  u.hash = "";
  return u.toString().replace(/\/$/, "");
}

/**
 * The audience of a token from the RFC 8707 `resource` parameters: none (a token for the JSON
 * endpoint, as before), or exactly one of the resources this server protects. Another resource,
 * a relative one, one with a fragment, or several: invalid_target.
 */
export function audienceOf(resources: readonly string[], known: readonly string[]): string {
  const given = resources.filter((r) => r !== "");
  if (!given.length) return "";
  if (given.length > 1 && new Set(given.map(canonicalResource)).size > 1) throw new OAuthError("invalid_target", "Ask for one resource per token.");
  const r = given[0]!;
  const u = parseUrl(r);
  if (!u || r.includes("#")) throw new OAuthError("invalid_target", "resource must be an absolute URI without a fragment.");
  const match = known.find((k) => canonicalResource(k) === canonicalResource(r));
  if (!match) throw new OAuthError("invalid_target", `This server issues tokens for ${known.join(" and ")}, not for ${r}.`);
  return canonicalResource(match);
}

/** Whether an earlier consent covers the scopes asked for now. */
export function consentCovers(consented: readonly string[] | undefined, asked: readonly string[]): boolean {
  return Boolean(consented) && asked.every((s) => consented!.includes(s));
}

/** The successful token response (RFC 6749 5.1). */
export interface TokenResponse {
  access_token: string;
  token_type: "Bearer";
  expires_in: number;
  refresh_token: string;
  scope: string;
}
