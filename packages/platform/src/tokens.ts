/**
 * Bearer tokens presented to this system: users' access tokens and services' credentials, both
 * resolved by the auth service's IntrospectToken and cached briefly. The gateway resolves every
 * request's token this way, and so does a service called directly by an internal caller. A
 * revocation broadcast drops the cached entry at once on every replica (forget); the short TTL
 * bounds staleness when a broadcast is missed.
 */
import { createHash } from "node:crypto";
import type { IntrospectTokenResponse } from "@cms/contracts/auth/v1/auth_pb";
import type { Caller, Principal } from "./caller.js";
import { fromConnectError } from "./errors.js";
import { TtlCache } from "./ttl-cache.js";

export function sha256Hex(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

export interface TokenResolver {
  /** The principal of a bearer token (a user, or an external service), or undefined when it is unknown, expired or revoked. */
  resolve(token: string): Promise<Principal | undefined>;
  /** Drops a cached token (by its SHA-256 hex), after a revocation. */
  forget(tokenHash: string): void;
}

export function createTokenResolver(introspect: (token: string) => Promise<IntrospectTokenResponse>, ttlMs: number): TokenResolver {
  const cache = new TtlCache<Principal | null>(ttlMs);
  // One introspection per token at a time: the requests that find the entry expired together
  // (every connection of a busy client, each TTL) wait for the same answer.
  const inFlight = new Map<string, Promise<Principal | null>>();

  /** The principal the auth service answers for a token (not cached here). */
  async function lookup(token: string): Promise<{ principal: Principal | null; ttl: number }> {
    let res: IntrospectTokenResponse;
    try {
      res = await introspect(token);
    } catch (err) {
      throw fromConnectError(err);
    }
    let principal: Principal | null = null;
    if (res.active && res.user) {
      const user: Caller = {
        userId: res.user.userId, username: res.user.username, plan: res.user.plan as Caller["plan"], isAdmin: res.user.isAdmin,
        scopes: res.scopes, tokenId: res.tokenId, audience: res.audience,
      };
      principal = { user, internal: false };
    } else if (res.active && res.serviceName) {
      principal = { service: res.serviceName, internal: false };
    }
    // Never cache past the token's own expiry.
    const left = principal && res.expiresAt ? Date.parse(res.expiresAt) - Date.now() : ttlMs;
    return { principal, ttl: Math.min(ttlMs, left) };
  }

  return {
    async resolve(token) {
      const key = sha256Hex(token);
      const hit = cache.get(key);
      if (hit !== undefined) return hit ?? undefined;
      let pending = inFlight.get(key);
      if (!pending) {
        // Cached only while still the current lookup: a revocation (forget) meanwhile wins.
        const current: Promise<Principal | null> = lookup(token).then(({ principal, ttl }) => {
          if (inFlight.get(key) === current) cache.set(key, principal, ttl);
          return principal;
        }).finally(() => {
          if (inFlight.get(key) === current) inFlight.delete(key);
        });
        inFlight.set(key, (pending = current));
      }
      return (await pending) ?? undefined;
    },
    forget(tokenHash) {
      cache.delete(tokenHash);
      // A lookup under way may have read the token before its revocation: its answer is not cached.
      inFlight.delete(tokenHash);
    },
  };
}
