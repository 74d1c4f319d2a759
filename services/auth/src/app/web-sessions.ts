/**
 * First-party sign-in on the web pages: a username and password give a web session (a token the
 * gateway keeps in an HttpOnly cookie). Attempts are throttled per account and per address
 * before any password is checked, every failure gets the same answer, and an unknown username
 * costs as much time as a wrong password.
 */
import { AppError } from "@cms/platform";
import { DEFAULT_SCRYPT, dummyHash, hashPassword, needsRehash, verifyPassword, type ScryptParams } from "../domain/passwords.js";
import { DEFAULT_THROTTLE, SIGN_IN_FAILED, WEB_SESSION_PREFIX, WEB_SESSION_TTL_MS, newWebSessionToken, throttleDecision, throttleKeys, tooManyAttempts, type ThrottlePolicy } from "../domain/sign-in.js";
import { hashSecret, isTokenActive } from "../domain/tokens.js";
import type { AuthStore, UserRow, WebSessionRow } from "../store/auth-store.js";

export interface WebSessionsOptions {
  throttle?: ThrottlePolicy;
  now?: () => Date;
  /** The parameters passwords are (re-)hashed with; tests pass cheaper ones. */
  scrypt?: ScryptParams;
}

export function createWebSessions(store: AuthStore, opts: WebSessionsOptions = {}) {
  const policy = opts.throttle ?? DEFAULT_THROTTLE;
  const now = opts.now ?? (() => new Date());
  const scrypt = opts.scrypt ?? DEFAULT_SCRYPT;

  return {
    /** Signs a user in from `address`; the new session's token (shown once) and user. */
    async signIn(username: string, password: string, address: string): Promise<{ token: string; user: UserRow; expiresAt: Date }> {
      const keys = throttleKeys(username, address);
      const at = now();
      // Counted first, so that attempts made at the same moment count against each other.
      const attemptIds = await store.recordSignInAttempt([keys.account, keys.address], new Date(at.getTime() - 2 * policy.windowMs));
      const since = new Date(at.getTime() - policy.windowMs);
      const decision = throttleDecision({
        account: await store.signInAttempts(keys.account, since, attemptIds),
        address: await store.signInAttempts(keys.address, since, attemptIds),
      }, at, policy);
      if (!decision.allowed) {
        // A refused attempt is not a failure: it does not extend the wait.
        await store.forgetSignInAttempts(attemptIds);
        throw new AppError("rate_limited", tooManyAttempts(decision.retryAfterSeconds), { retry_after_seconds: decision.retryAfterSeconds });
      }
      const user = await store.userWithPassword(username.trim().toLowerCase());
      const stored = user?.password_hash ?? null;
      // Verified against a dummy hash when there is no account or password: same cost, same answer.
      const matches = await verifyPassword(password, stored ?? await dummyHash(scrypt));
      if (!user || !stored || !matches) throw new AppError("unauthorized", SIGN_IN_FAILED);
      await store.forgetSignInAttempts(attemptIds);
      await store.clearSignInAttempts(keys.account);
      if (needsRehash(stored, scrypt)) await store.setPasswordHash(user.username, await hashPassword(password, scrypt));
      const token = newWebSessionToken();
      const expiresAt = new Date(at.getTime() + WEB_SESSION_TTL_MS);
      await store.insertWebSession({ tokenHash: hashSecret(token), userId: user.id, expiresAt });
      const { password_hash: _, ...plain } = user;
      return { token, user: plain, expiresAt };
    },

    /** The live session of a token, or undefined (unknown, expired, signed out). */
    async resolve(token: string): Promise<(WebSessionRow & { user: UserRow }) | undefined> {
      if (!token.startsWith(WEB_SESSION_PREFIX)) return undefined;
      const row = await store.webSessionWithUser(hashSecret(token));
      return row && isTokenActive(row, now()) ? row : undefined;
    },

    /** Ends a session; the token's hash, for the revocation broadcast. */
    async signOut(token: string): Promise<{ signedOut: boolean; tokenHash: string }> {
      const tokenHash = hashSecret(token);
      return { signedOut: token.startsWith(WEB_SESSION_PREFIX) && await store.revokeWebSession(tokenHash), tokenHash };
    },
  };
}

export type WebSessions = ReturnType<typeof createWebSessions>;
