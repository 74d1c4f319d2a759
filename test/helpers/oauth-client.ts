/** A third-party OAuth client for tests: PKCE pairs, authorization URLs, token requests. */
import { createHash, randomBytes } from "node:crypto";

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

export interface AuthorizeParams {
  clientId: string;
  redirectUri: string;
  challenge: string;
  scope?: string;
  state?: string;
  resource?: string;
  method?: string;
  responseType?: string;
}

/** The authorization page URL as a client builds it from the metadata's authorization_endpoint. */
export function authorizeUrl(endpoint: string, p: AuthorizeParams): string {
  const u = new URL(endpoint);
  u.searchParams.set("response_type", p.responseType ?? "code");
  u.searchParams.set("client_id", p.clientId);
  u.searchParams.set("redirect_uri", p.redirectUri);
  u.searchParams.set("code_challenge", p.challenge);
  u.searchParams.set("code_challenge_method", p.method ?? "S256");
  if (p.scope !== undefined) u.searchParams.set("scope", p.scope);
  if (p.state !== undefined) u.searchParams.set("state", p.state);
  if (p.resource !== undefined) u.searchParams.set("resource", p.resource);
  return u.toString();
}

export interface TokenAnswer { status: number; body: Record<string, any>; headers: Headers }

/** POSTs to the token endpoint, form-encoded (or JSON). */
export async function tokenRequest(tokenEndpoint: string, params: Record<string, string>, opts: { json?: boolean; headers?: Record<string, string> } = {}): Promise<TokenAnswer> {
  const res = await fetch(tokenEndpoint, {
    method: "POST",
    headers: { "content-type": opts.json ? "application/json" : "application/x-www-form-urlencoded", ...opts.headers },
    body: opts.json ? JSON.stringify(params) : new URLSearchParams(params).toString(),
  });
  return { status: res.status, body: await res.json() as Record<string, any>, headers: res.headers };
}

/** The query parameters of a redirect to the client. */
export function callbackParams(location: string): Record<string, string> {
  return Object.fromEntries(new URL(location).searchParams);
}
