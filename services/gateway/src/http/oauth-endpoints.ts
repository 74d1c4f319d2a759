/**
 * The OAuth 2.0 endpoints on the API origin (conventions.md "OAuth and MCP"): the token endpoint
 * (RFC 6749 section 3.2; form-encoded as the RFC says, JSON accepted too), dynamic client
 * registration of public clients (RFC 7591) and the authorization server metadata (RFC 8414).
 * They answer in OAuth's terms (`{"error", "error_description"}`, RFC 6749 5.2), not the
 * contract's error shape; the auth service does the work.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Client } from "@connectrpc/connect";
import type { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { AppError, fromConnectError, type Logger } from "@cms/platform";
import type { RateLimiter } from "../store/rate-limit-store.js";
import { SCOPE_WORDS } from "../domain/account-pages.js";
import { sendJson } from "./answers.js";
import { readBody } from "./read-body.js";

export const TOKEN_PATH = "/functions/v1/thirdparty-oauth-token";
export const REGISTER_PATH = "/functions/v1/thirdparty-oauth-register";
export const AS_METADATA_PATH = "/.well-known/oauth-authorization-server";
/** The authorization page: APP_URL's root with oauth=1 (kept when a client adds its parameters, RFC 6749 3.1). */
export const AUTHORIZE_QUERY = "/?oauth=1";

const MAX_BODY_BYTES = 64 * 1024;

export interface OAuthEndpointsDeps {
  auth: () => Client<typeof AuthService>;
  rateLimiter: RateLimiter;
  baseUrl: () => string;
  appUrl: () => string;
  log: Logger;
  /** CLIENT_IDLE_MS: how long a request's body may send nothing. */
  bodyIdleMs: number;
}

/** An OAuth error answer; no caching of anything a token endpoint says (RFC 6749 5.1). */
function oauthError(res: ServerResponse, status: number, error: string, description: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, JSON.stringify({ error, error_description: description }), { "cache-control": "no-store", pragma: "no-cache", ...headers });
}

class BadRequest extends Error {
  constructor(readonly error: string, readonly description: string, readonly status = 400) {
    super(description);
  }
}

/** The body as text; its refusals (too large, cut short) answered in OAuth's terms with their status. */
async function readText(req: IncomingMessage, idleMs: number): Promise<string> {
  try {
    return (await readBody(req, { maxBytes: MAX_BODY_BYTES, idleMs, tooLarge: "The request body is too large." })).toString("utf8");
  } catch (err) {
    throw err instanceof AppError ? new BadRequest("invalid_request", err.detail, err.status) : err;
  }
}

/** A parameter bag from a form or JSON body: single values, except `resource` which may repeat (RFC 8707). */
export interface Params { get(name: string): string | undefined; all(name: string): string[] }

/** Parses a token request body: form-encoded (RFC 6749) or JSON; a parameter given twice is refused (RFC 6749 3.2). */
export function parseParams(contentType: string, body: string): Params {
  const type = contentType.split(";")[0]!.trim().toLowerCase();
  if (type === "application/x-www-form-urlencoded") {
    const form = new URLSearchParams(body);
    for (const key of new Set(form.keys())) {
      if (key !== "resource" && form.getAll(key).length > 1) throw new BadRequest("invalid_request", `${key} is given more than once.`);
    }
    return { get: (n) => form.get(n) ?? undefined, all: (n) => form.getAll(n) };
  }
  if (type === "application/json") {
    let json: unknown;
    try { json = JSON.parse(body); } catch { throw new BadRequest("invalid_request", "The body is not valid JSON."); }
    if (!json || typeof json !== "object" || Array.isArray(json)) throw new BadRequest("invalid_request", "The body must be a JSON object.");
    const obj = json as Record<string, unknown>;
    const str = (n: string, v: unknown): string => {
      if (typeof v === "string") return v;
      if (typeof v === "number" || typeof v === "boolean") return String(v);
      throw new BadRequest("invalid_request", `${n} must be a string.`);
    };
    return {
      get: (n) => (obj[n] === undefined || obj[n] === null ? undefined : str(n, obj[n])),
      all: (n) => {
        const v = obj[n];
        if (v === undefined || v === null) return [];
        return Array.isArray(v) ? v.map((x) => str(n, x)) : [str(n, v)];
      },
    };
  }
  throw new BadRequest("invalid_request", "Send the parameters as application/x-www-form-urlencoded (or application/json).");
}

/** HTTP Basic client credentials (RFC 6749 2.3.1: each part form-urlencoded), if the header has them. */
export function basicCredentials(header: string | undefined): { clientId: string; clientSecret: string } | undefined {
  const m = header ? /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header) : null;
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, "base64").toString("utf8");
  const i = decoded.indexOf(":");
  if (i < 0) return undefined;
  const unform = (s: string) => decodeURIComponent(s.replace(/\+/g, " "));
  try {
    return { clientId: unform(decoded.slice(0, i)), clientSecret: unform(decoded.slice(i + 1)) };
  } catch {
    return undefined;
  }
}

/** The status an OAuth error is answered with. */
function statusOf(error: string): number {
  return error === "invalid_client" ? 401 : error === "server_error" ? 500 : 400;
}

export function createOAuthEndpoints(deps: OAuthEndpointsDeps) {
  /** Per-address budget of these anonymous endpoints (RATE_LIMIT_PER_MINUTE). */
  async function limited(req: IncomingMessage, res: ServerResponse, what: string): Promise<boolean> {
    const rate = await deps.rateLimiter.hit(`${what}:${req.socket.remoteAddress ?? "?"}`);
    if (rate.allowed) return false;
    const retry = String(Math.max(1, Math.ceil(rate.resetMs / 1000)));
    oauthError(res, 429, "slow_down", `Too many requests; retry in ${retry} s.`, { "retry-after": retry });
    return true;
  }

  function guard(what: string, fn: (req: IncomingMessage, res: ServerResponse) => Promise<void>) {
    return async (req: IncomingMessage, res: ServerResponse) => {
      try {
        await fn(req, res);
      } catch (err) {
        if (res.headersSent) { res.destroy(); return; }
        if (err instanceof BadRequest) { oauthError(res, err.status, err.error, err.description); return; }
        const app = fromConnectError(err);
        deps.log.error({ err }, `${what} failed`);
        oauthError(res, app.status >= 500 ? (app.code === "unavailable" ? 503 : 500) : 400, app.status >= 500 ? "server_error" : "invalid_request", app.status >= 500 ? "The authorization server failed; retry later." : app.detail);
      }
    };
  }

  async function token(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "POST") { oauthError(res, 405, "invalid_request", `Use POST ${TOKEN_PATH}.`, { allow: "POST" }); return; }
    if (await limited(req, res, "oauth-token")) return;
    const p = parseParams(String(req.headers["content-type"] ?? ""), await readText(req, deps.bodyIdleMs));
    const basic = basicCredentials(req.headers.authorization);
    if (req.headers.authorization && !basic) throw new BadRequest("invalid_request", "The Authorization header of the token endpoint must be HTTP Basic client credentials.");
    if (basic && p.get("client_secret") !== undefined) throw new BadRequest("invalid_request", "Authenticate the client one way: HTTP Basic or client_secret in the body, not both.");
    if (basic && p.get("client_id") !== undefined && p.get("client_id") !== basic.clientId) throw new BadRequest("invalid_request", "client_id differs from the HTTP Basic credentials.");
    const out = await deps.auth().exchangeToken({
      grantType: p.get("grant_type") ?? "", code: p.get("code") ?? "", redirectUri: p.get("redirect_uri") ?? "", codeVerifier: p.get("code_verifier") ?? "",
      refreshToken: p.get("refresh_token") ?? "", scope: p.get("scope"), resource: p.all("resource"),
      clientId: basic?.clientId ?? p.get("client_id") ?? "", clientSecret: basic?.clientSecret ?? p.get("client_secret") ?? "",
    });
    if (out.error) {
      const challenge: Record<string, string> = out.error.error === "invalid_client" && basic ? { "www-authenticate": 'Basic realm="oauth", charset="UTF-8"' } : {};
      oauthError(res, statusOf(out.error.error), out.error.error, out.error.errorDescription, challenge);
      return;
    }
    sendJson(res, 200, JSON.stringify({
      access_token: out.accessToken, token_type: out.tokenType, expires_in: out.expiresIn, refresh_token: out.refreshToken, scope: out.scope,
    }), { "cache-control": "no-store", pragma: "no-cache" });
  }

  async function register(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "POST") { oauthError(res, 405, "invalid_request", `Use POST ${REGISTER_PATH}.`, { allow: "POST" }); return; }
    if (await limited(req, res, "oauth-register")) return;
    const type = String(req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    if (type !== "application/json") throw new BadRequest("invalid_client_metadata", "Send the client metadata as application/json (RFC 7591).");
    // Read before the parse's catch, so that a refused body (413, cut short) keeps its own answer.
    const text = await readText(req, deps.bodyIdleMs);
    let meta: Record<string, unknown>;
    try {
      const json = JSON.parse(text);
      if (!json || typeof json !== "object" || Array.isArray(json)) throw new Error();
      meta = json;
    } catch {
      throw new BadRequest("invalid_client_metadata", "The body must be a JSON object of client metadata.");
    }
    const uris = meta.redirect_uris;
    if (!Array.isArray(uris) || !uris.length || !uris.every((u) => typeof u === "string")) throw new BadRequest("invalid_redirect_uri", "redirect_uris must be a non-empty array of URIs.");
    const listed = (name: string, allowed: string[]) => {
      const v = meta[name];
      if (v === undefined) return;
      if (!Array.isArray(v) || !v.every((x) => typeof x === "string" && allowed.includes(x))) {
        throw new BadRequest("invalid_client_metadata", `${name} may only hold ${allowed.join(", ")}.`);
      }
    };
    listed("grant_types", ["authorization_code", "refresh_token"]);
    listed("response_types", ["code"]);
    const name = typeof meta.client_name === "string" && meta.client_name.trim() ? meta.client_name : new URL(uris[0] as string, "http://invalid").host || "An application";
    if (meta.scope !== undefined && typeof meta.scope !== "string") throw new BadRequest("invalid_client_metadata", "scope must be a space-separated string.");
    const out = await deps.auth().registerClient({ clientName: name, redirectUris: uris as string[], confidential: false, scope: meta.scope as string | undefined, registeredBy: "dynamic" });
    if (out.error) { oauthError(res, 400, out.error.error, out.error.errorDescription); return; }
    // Registered as a public client whatever authentication method was asked for (RFC 7591 2: the
    // server may replace values; the answer holds what was registered).
    const body: Record<string, unknown> = {
      client_id: out.clientId, client_id_issued_at: Number(out.clientIdIssuedAt), client_name: out.clientName, redirect_uris: out.redirectUris,
      grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none",
    };
    if (out.scope) body.scope = out.scope;
    sendJson(res, 201, JSON.stringify(body), { "cache-control": "no-store", pragma: "no-cache" });
  }

  async function metadata(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "GET" && req.method !== "HEAD") { oauthError(res, 405, "invalid_request", `Use GET ${AS_METADATA_PATH}.`, { allow: "GET" }); return; }
    sendJson(res, 200, JSON.stringify(authorizationServerMetadata(deps.baseUrl(), deps.appUrl())), { "cache-control": "public, max-age=300" });
  }

  return {
    pages: [
      [TOKEN_PATH, guard("token endpoint", token)],
      [REGISTER_PATH, guard("client registration", register)],
      [AS_METADATA_PATH, guard("authorization server metadata", metadata)],
    ] as Array<[string, (req: IncomingMessage, res: ServerResponse) => Promise<void>]>,
  };
}

/** RFC 8414 metadata: every endpoint, and what this server supports. */
export function authorizationServerMetadata(baseUrl: string, appUrl: string): Record<string, unknown> {
  return {
    issuer: baseUrl,
    authorization_endpoint: `${appUrl}${AUTHORIZE_QUERY}`,
    token_endpoint: `${baseUrl}${TOKEN_PATH}`,
    registration_endpoint: `${baseUrl}${REGISTER_PATH}`,
    scopes_supported: Object.keys(SCOPE_WORDS),
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: ["authorization_code", "refresh_token"],
    token_endpoint_auth_methods_supported: ["none", "client_secret_basic", "client_secret_post"],
    code_challenge_methods_supported: ["S256"],
    authorization_response_iss_parameter_supported: true,
  };
}
