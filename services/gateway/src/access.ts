/**
 * Who may call: the gateway API key and the bearer token, both resolved through the auth
 * service and cached briefly. A token revocation broadcast drops the cached entry at once on
 * every replica; the short TTL bounds staleness when a broadcast is missed.
 */
import { createHash } from "node:crypto";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { AppError, fromConnectError, type Caller, type Clients } from "@cms/platform";

interface Cached<T> { value: T; expiresAt: number }

/** A small TTL cache with a size bound (oldest entries go first). */
export class TtlCache<T> {
  private map = new Map<string, Cached<T>>();
  constructor(private ttlMs: number, private max = 10000) {}
  get(key: string, now = Date.now()): T | undefined {
    const hit = this.map.get(key);
    if (!hit) return undefined;
    if (hit.expiresAt <= now) { this.map.delete(key); return undefined; }
    return hit.value;
  }
  set(key: string, value: T, ttlMs = this.ttlMs, now = Date.now()): void {
    if (ttlMs <= 0) return;
    if (this.map.size >= this.max && !this.map.has(key)) {
      const first = this.map.keys().next().value;
      if (first !== undefined) this.map.delete(first);
    }
    this.map.set(key, { value, expiresAt: now + ttlMs });
  }
  delete(key: string): void { this.map.delete(key); }
  clear(): void { this.map.clear(); }
}

export function sha256Hex(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

export interface TokenResolver {
  /** The caller of a bearer token, or undefined when the token is unknown, expired or revoked. */
  resolve(token: string): Promise<Caller | undefined>;
  forget(tokenHash: string): void;
}

export function createTokenResolver(clients: Clients, ttlMs: number): TokenResolver {
  const cache = new TtlCache<Caller | null>(ttlMs);
  const auth = () => clients.get(AuthService);
  return {
    async resolve(token) {
      const key = sha256Hex(token);
      const hit = cache.get(key);
      if (hit !== undefined) return hit ?? undefined;
      let res;
      try {
        res = await auth().introspectToken({ token });
      } catch (err) {
        throw fromConnectError(err);
      }
      const caller: Caller | null = res.active && res.user ? {
        userId: res.user.userId,
        username: res.user.username,
        plan: res.user.plan as Caller["plan"],
        isAdmin: res.user.isAdmin,
        scopes: res.scopes,
        tokenId: res.tokenId,
      } : null;
      // Never cache past the token's own expiry.
      const left = caller ? Date.parse(res.expiresAt) - Date.now() : ttlMs;
      cache.set(key, caller, Math.min(ttlMs, left));
      return caller ?? undefined;
    },
    forget(tokenHash) {
      cache.delete(tokenHash);
    },
  };
}

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

export function bearerOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw new AppError("unauthorized", "The Authorization header must be \"Bearer <access token>\".");
  return m[1];
}
