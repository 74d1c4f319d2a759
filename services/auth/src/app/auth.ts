/**
 * The auth service's use cases over its store port, shared by the RPC handlers
 * and the admin CLI.
 */
import { AppError, isUniqueViolation } from "@cms/platform";
import type { AuthStore, UserRow } from "../store/auth-store.js";
import { DEFAULT_SCRYPT, hashPassword, passwordProblem, type ScryptParams } from "../domain/passwords.js";
import { DEFAULT_TOKEN_TTL_SECONDS, SERVICE_CREDENTIAL_PREFIX, hashSecret, isTokenActive, newAccessToken, newApiKey, newServiceCredential, PLANS, type Plan, parseScopes } from "../domain/tokens.js";

export const USERNAME_PATTERN = /^[a-z0-9_-]{1,63}$/;

export interface AuthOptions {
  now?: () => Date;
  /** The parameters new passwords are hashed with; tests pass cheaper ones. */
  scrypt?: ScryptParams;
}

export function createAuth(store: AuthStore, opts: AuthOptions = {}) {
  const now = opts.now ?? (() => new Date());
  /** The hash of an acceptable new password; an unacceptable one is refused naming the rule. */
  const newPasswordHash = async (password: string): Promise<string> => {
    const problem = passwordProblem(password);
    if (problem) throw new AppError("invalid_request", problem, { field: "password" });
    return hashPassword(password, opts.scrypt ?? DEFAULT_SCRYPT);
  };
  return {
    /** A new user; with a password, one that can sign in on the web pages. */
    async createUser(username: string, plan: string, isAdmin: boolean, password?: string): Promise<UserRow> {
      if (!USERNAME_PATTERN.test(username)) throw new AppError("invalid_request", "username must be 1 to 63 characters of a-z, 0-9, _ and -.", { field: "username" });
      if (!(PLANS as readonly string[]).includes(plan)) throw new AppError("invalid_request", `plan must be one of ${PLANS.join(", ")}.`, { field: "plan" });
      const passwordHash = password === undefined ? undefined : await newPasswordHash(password);
      try {
        return await store.createUser({ username, plan: plan as Plan, isAdmin, passwordHash });
      } catch (err) {
        if (isUniqueViolation(err)) throw new AppError("conflict", `A user named "${username}" already exists.`, { field: "username" });
        throw err;
      }
    },

    /** Sets or replaces a user's password (admin CLI `user password`). */
    async setPassword(username: string, password: string): Promise<void> {
      const hash = await newPasswordHash(password);
      if (!(await store.setPasswordHash(username, hash))) throw new AppError("not_found", `No user named "${username}".`);
    },

    /** `scopes`: a list, or a string of them separated by spaces or commas (parseScopes); unset, all. */
    async mintToken(username: string, scopes: string | string[] | undefined, opts: { ttlSeconds?: number; clientId?: string } = {}) {
      const user = await store.userByUsername(username);
      if (!user) throw new AppError("not_found", `No user named "${username}".`);
      let parsed;
      try {
        parsed = parseScopes(scopes);
      } catch (err) {
        throw new AppError("invalid_request", (err as Error).message, { field: "scopes" });
      }
      const token = newAccessToken();
      const expiresAt = new Date(now().getTime() + (opts.ttlSeconds || DEFAULT_TOKEN_TTL_SECONDS) * 1000);
      const row = await store.insertToken({ tokenHash: hashSecret(token), userId: user.id, scopes: parsed, clientId: opts.clientId ?? "", expiresAt });
      return { accessToken: token, scopes: parsed, expiresAt, tokenId: row.id };
    },

    async introspect(token: string) {
      const row = await store.tokenWithUser(hashSecret(token));
      if (!row || !isTokenActive(row, now())) return undefined;
      return row;
    },

    /** Revokes a token; whether it was live, and its hash (for the revocation broadcast). */
    async revokeToken(token: string): Promise<{ revoked: boolean; tokenHash: string }> {
      const tokenHash = hashSecret(token);
      return { revoked: await store.revokeToken(tokenHash), tokenHash };
    },

    /** The name of the service a live service credential identifies. */
    async serviceOf(credential: string): Promise<string | undefined> {
      if (!credential.startsWith(SERVICE_CREDENTIAL_PREFIX)) return undefined;
      const row = await store.serviceCredential(hashSecret(credential));
      return row && row.revoked_at === null ? row.name : undefined;
    },

    async createServiceCredential(name: string): Promise<{ name: string; credential: string }> {
      if (!/^[a-z0-9_-]{1,63}$/.test(name)) throw new AppError("invalid_request", "A service name is 1 to 63 characters of a-z, 0-9, _ and -.", { field: "name" });
      const credential = newServiceCredential();
      await store.insertServiceCredential(name, hashSecret(credential));
      return { name, credential };
    },

    async createApiKey(label: string, key?: string): Promise<string> {
      const apikey = key || newApiKey();
      await store.insertApiKey(hashSecret(apikey), label);
      return apikey;
    },

    async checkApiKey(apikey: string): Promise<boolean> {
      return apikey ? store.apiKeyExists(hashSecret(apikey)) : false;
    },
  };
}

export type Auth = ReturnType<typeof createAuth>;
