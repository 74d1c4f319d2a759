/**
 * Who may call: the gateway API key and the bearer token, both resolved through the auth
 * service and cached briefly. A token revocation broadcast drops the cached entry at once on
 * every replica; the short TTL bounds staleness when a broadcast is missed.
 */
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { TtlCache, createTokenResolver as createPrincipalResolver, fromConnectError, type Caller, type Clients } from "@cms/platform";

/** The gateway's view of bearer tokens: users only (a service credential is not a user). */
export interface TokenResolver {
  /** The caller of a bearer token, or undefined when the token is unknown, expired, revoked or not a user's. */
  resolve(token: string): Promise<Caller | undefined>;
  /** Drops a cached token (by its sha256) that was just revoked. */
  forget(tokenHash: string): void;
}

/** The token resolver over the auth service's introspection, cached for `ttlMs`. */
export function createTokenResolver(clients: Clients, ttlMs: number): TokenResolver {
  const principals = createPrincipalResolver((token) => clients.get(AuthService).introspectToken({ token }), ttlMs);
  return {
    resolve: async (token) => (await principals.resolve(token))?.user,
    forget: (hash) => principals.forget(hash),
  };
}

/** Whether an `apikey` header value is a gateway API key. */
export interface ApiKeyChecker {
  check(apikey: string | undefined): Promise<boolean>;
}

/** Keys from GATEWAY_API_KEYS are checked in memory; others (admin CLI `apikey create`) via auth. */
export function createApiKeyChecker(clients: Clients, staticKeys: string[]): ApiKeyChecker {
  const fixed = new Set(staticKeys);
  const cache = new TtlCache<boolean>(60_000);
  return {
    async check(apikey) {
      if (!apikey) return false;
      if (fixed.has(apikey)) return true;
      const hit = cache.get(apikey);
      if (hit !== undefined) return hit;
      const { valid } = await clients.get(AuthService).checkApiKey({ apikey }).catch((err) => { throw fromConnectError(err); });
      cache.set(apikey, valid, valid ? 60_000 : 2_000);
      return valid;
    },
  };
}
