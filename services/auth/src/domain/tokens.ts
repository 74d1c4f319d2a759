/** Rules for opaque access tokens and API keys: format, hashing, scopes, expiry. */
import { createHash, randomBytes } from "node:crypto";

export const ALL_SCOPES = [
  "collections:read",
  "collections:write",
  "collections:delete",
  "media:read",
  "media:write",
  // Not in the contract's list of scopes, but media.delete requires it (Endpoints > Media).
  "media:delete",
  "profile:write",
] as const;
export type Scope = (typeof ALL_SCOPES)[number];

export const PLANS = ["free", "paid", "founding"] as const;
export type Plan = (typeof PLANS)[number];

export const DEFAULT_TOKEN_TTL_SECONDS = 30 * 24 * 3600;

/**
 * A new secret (token, key, code, credential): a recognisable prefix, then `bytes` random bytes
 * in base64url (256 bits unless said). Every secret of the auth service is made here.
 */
export function newSecret(prefix: string, bytes = 32): string {
  return `${prefix}${randomBytes(bytes).toString("base64url")}`;
}

/** A new opaque access token: a recognisable prefix and 256 random bits. */
export function newAccessToken(): string {
  return newSecret("cms_at_");
}

/** A service credential: what an internal service outside this system presents as its bearer token. */
export const SERVICE_CREDENTIAL_PREFIX = "cms_svc_";

export function newServiceCredential(): string {
  return newSecret(SERVICE_CREDENTIAL_PREFIX);
}

export function newApiKey(): string {
  return newSecret("cms_key_", 24);
}

/** Tokens and keys are stored only as SHA-256 digests. */
export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

/** Parses a space- or comma-separated scope list; unknown scopes are an error. */
export function parseScopes(input: string | string[] | undefined): Scope[] {
  if (input === undefined) return [...ALL_SCOPES];
  const parts = (Array.isArray(input) ? input : input.split(/[\s,]+/)).map((s) => s.trim()).filter(Boolean);
  const unknown = parts.filter((p) => !(ALL_SCOPES as readonly string[]).includes(p));
  if (unknown.length) throw new Error(`unknown scope(s): ${unknown.join(", ")}; known: ${ALL_SCOPES.join(" ")}`);
  return [...new Set(parts)] as Scope[];
}

export function isTokenActive(t: { expires_at: Date; revoked_at: Date | null }, now = new Date()): boolean {
  return t.revoked_at === null && t.expires_at.getTime() > now.getTime();
}
