/**
 * In-memory fakes of the auth service's ports, for component tests of its application layer:
 * the auth store and the OAuth store over one state (the tables they share, as in the auth
 * schema), with the SQL adapters' rules — unique keys, what an update touches (only live rows
 * are revoked, only unused codes and refresh tokens are taken), the database clock for stamps —
 * and a unit of work that works on a copy and commits it only when its work returns (units run
 * one at a time; a write outside them while one is open is refused, as the copy would lose it).
 * The clock is the test's: it moves only when a test moves it.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import type { EventWriter, UnitOfWork } from "@cms/platform";
import { createAuth } from "../src/app/auth.js";
import { createOAuth, type Resources } from "../src/app/oauth.js";
import { createWebSessions } from "../src/app/web-sessions.js";
import type { ScryptParams } from "../src/domain/passwords.js";
import type { ThrottlePolicy } from "../src/domain/sign-in.js";
import type { AuthStore, ServiceCredentialRow, TokenRow, UserRow, WebSessionRow } from "../src/store/auth-store.js";
import type { ClientRow, CodeRow, GrantRow, OAuthStore, RefreshRow } from "../src/store/oauth-store.js";

/** The auth schema's tables. */
export interface State {
  users: Array<UserRow & { password_hash: string | null }>;
  tokens: TokenRow[];
  apiKeys: Map<string, string>;
  serviceCredentials: Array<ServiceCredentialRow & { credential_hash: string }>;
  webSessions: Array<WebSessionRow & { token_hash: string }>;
  attempts: Array<{ id: number; key: string; at: Date }>;
  clients: ClientRow[];
  consents: Array<{ user_id: string; client_id: string; scopes: string[] }>;
  grants: Array<GrantRow & { revoked_reason: string | null }>;
  codes: CodeRow[];
  refreshTokens: RefreshRow[];
  attemptSeq: number;
}

/** As after the migrations: no rows but the bundled MCP client. */
export function emptyState(): State {
  return {
    users: [], tokens: [], apiKeys: new Map(), serviceCredentials: [], webSessions: [], attempts: [], consents: [], grants: [], codes: [], refreshTokens: [],
    clients: [{ client_id: "mcp", name: "MCP client", redirect_uris: [], secret_hash: null, any_loopback: true, scopes: null, registered_by: "migration", created_at: new Date(0) }],
    attemptSeq: 0,
  };
}

/** PostgreSQL's unique violation, as isUniqueViolation() recognizes it. */
function uniqueViolation(key: string): Error {
  return Object.assign(new Error(`duplicate key value violates unique constraint (${key})`), { code: "23505" });
}

/** INSERT into a table whose `key` is unique. */
function insert<T>(rows: T[], row: T, key: keyof T): void {
  if (rows.some((r) => r[key] === row[key])) throw uniqueViolation(String(key));
  rows.push(row);
}

/** UPDATE ... SET field = now() WHERE <match> AND field IS NULL RETURNING *: a copy of the row it changed. */
function stamp<T extends object>(rows: T[], match: (r: T) => boolean, field: keyof T, at: Date): T | undefined {
  const row = rows.find((r) => match(r) && r[field] === null);
  if (row) row[field] = at as T[keyof T];
  return clone(row);
}

const clone = <T>(v: T): T => structuredClone(v);
/** A copy of a row without a column the adapter does not select. */
function without<T extends object, K extends keyof T>(row: T, key: K): Omit<T, K> {
  const out = clone(row);
  delete out[key];
  return out;
}
const plainUser = (u: State["users"][number]): UserRow => without(u, "password_hash");

/** The auth store over the current state; `now` is the database's clock (now()). */
export function fakeAuthStore(st: () => State, now: () => Date): AuthStore {
  const userOf = (id: string) => st().users.find((u) => u.id === id)!;
  return {
    async createUser(u) {
      const row = { id: randomUUID(), username: u.username, plan: u.plan, is_admin: u.isAdmin, created_at: now(), password_hash: u.passwordHash ?? null };
      insert(st().users, row, "username");
      return plainUser(row);
    },
    async userByUsername(username) {
      const u = st().users.find((r) => r.username === username);
      return u && plainUser(u);
    },
    async usersByIds(ids) { return st().users.filter((u) => ids.includes(u.id)).map(plainUser); },
    async usersByUsernames(names) { return st().users.filter((u) => names.includes(u.username)).map(plainUser); },
    async insertToken(t) {
      const row: TokenRow = {
        id: randomUUID(), token_hash: t.tokenHash, user_id: t.userId, scopes: [...t.scopes], client_id: t.clientId, expires_at: t.expiresAt,
        revoked_at: null, audience: "", grant_id: null,
      };
      insert(st().tokens, row, "token_hash");
      return clone(row);
    },
    async tokenWithUser(tokenHash) {
      const row = st().tokens.find((t) => t.token_hash === tokenHash);
      return row && { ...clone(row), user: plainUser(userOf(row.user_id)) };
    },
    async revokeToken(tokenHash) { return Boolean(stamp(st().tokens, (t) => t.token_hash === tokenHash, "revoked_at", now())); },
    async setPasswordHash(username, hash) {
      const u = st().users.find((r) => r.username === username);
      if (u) u.password_hash = hash;
      return Boolean(u);
    },
    async userWithPassword(username) {
      const u = st().users.find((r) => r.username === username);
      return u && clone(u);
    },
    async recordSignInAttempt(keys, purgeBefore) {
      const s = st();
      s.attempts = s.attempts.filter((a) => a.at >= purgeBefore);
      return keys.map((key) => {
        const id = ++s.attemptSeq;
        s.attempts.push({ id, key, at: now() });
        return String(id);
      });
    },
    async signInAttempts(key, since, except) {
      return st().attempts.filter((a) => a.key === key && a.at > since && !except.includes(String(a.id))).map((a) => a.at);
    },
    async forgetSignInAttempts(ids) { st().attempts = st().attempts.filter((a) => !ids.includes(String(a.id))); },
    async clearSignInAttempts(key) { st().attempts = st().attempts.filter((a) => a.key !== key); },
    async insertWebSession(w) {
      const row = { id: randomUUID(), token_hash: w.tokenHash, user_id: w.userId, expires_at: w.expiresAt, revoked_at: null };
      insert(st().webSessions, row, "token_hash");
      return without(row, "token_hash");
    },
    async webSessionWithUser(tokenHash) {
      const row = st().webSessions.find((w) => w.token_hash === tokenHash);
      return row && { ...without(row, "token_hash"), user: plainUser(userOf(row.user_id)) };
    },
    async revokeWebSession(tokenHash) { return Boolean(stamp(st().webSessions, (w) => w.token_hash === tokenHash, "revoked_at", now())); },
    async insertApiKey(keyHash, label) { if (!st().apiKeys.has(keyHash)) st().apiKeys.set(keyHash, label); },
    async apiKeyExists(keyHash) { return st().apiKeys.has(keyHash); },
    async insertServiceCredential(name, credentialHash) {
      insert(st().serviceCredentials, { id: randomUUID(), name, credential_hash: credentialHash, revoked_at: null }, "credential_hash");
    },
    async serviceCredential(credentialHash) {
      const row = st().serviceCredentials.find((c) => c.credential_hash === credentialHash);
      return row && { id: row.id, name: row.name, revoked_at: row.revoked_at };
    },
  };
}

/** The OAuth store over the current state; `now` is the database's clock. */
export function fakeOAuthStore(st: () => State, now: () => Date): OAuthStore {
  return {
    async insertClient(c) {
      const row: ClientRow = { ...clone(c), created_at: now() };
      insert(st().clients, row, "client_id");
      return clone(row);
    },
    async client(clientId) { return clone(st().clients.find((c) => c.client_id === clientId)); },
    async consent(userId, clientId) { return clone(st().consents.find((c) => c.user_id === userId && c.client_id === clientId)?.scopes); },
    async addConsent(userId, clientId, scopes) {
      const row = st().consents.find((c) => c.user_id === userId && c.client_id === clientId);
      if (row) row.scopes = [...new Set([...row.scopes, ...scopes])];
      else st().consents.push({ user_id: userId, client_id: clientId, scopes: [...new Set(scopes)] });
    },
    async insertCode(c) { insert(st().codes, { ...clone(c), used_at: null, grant_id: null }, "code_hash"); },
    async takeCode(codeHash) { return stamp(st().codes, (c) => c.code_hash === codeHash, "used_at", now()); },
    async code(codeHash) { return clone(st().codes.find((c) => c.code_hash === codeHash)); },
    async setCodeGrant(codeHash, grantId) {
      const row = st().codes.find((c) => c.code_hash === codeHash);
      if (row) row.grant_id = grantId;
    },
    async insertGrant(g) {
      const row = { id: randomUUID(), user_id: g.userId, client_id: g.clientId, scopes: [...g.scopes], audience: g.audience, revoked_at: null, revoked_reason: null };
      st().grants.push(row);
      return without(row, "revoked_reason");
    },
    async grant(id) {
      const row = st().grants.find((g) => g.id === id);
      return row && without(row, "revoked_reason");
    },
    async revokeGrants(ids, reason) {
      const at = now();
      for (const g of st().grants) if (ids.includes(g.id) && g.revoked_at === null) Object.assign(g, { revoked_at: at, revoked_reason: reason });
      return revokeTokens((t) => t.grant_id !== null && ids.includes(t.grant_id), at);
    },
    async revokeMcpTokens(userId, currentTokenId) {
      return revokeTokens((t) => t.user_id === userId && (t.client_id.startsWith("mcp") || t.id === currentTokenId), now());
    },
    async liveGrantsOf(userId, match) {
      return st().grants
        .filter((g) => g.user_id === userId && g.revoked_at === null && (match.audiences.includes(g.audience) || match.clientIds.includes(g.client_id)))
        .map((g) => g.id);
    },
    async insertRefreshToken(r) { insert(st().refreshTokens, { token_hash: r.tokenHash, grant_id: r.grantId, expires_at: r.expiresAt, used_at: null }, "token_hash"); },
    async takeRefreshToken(tokenHash) { return stamp(st().refreshTokens, (r) => r.token_hash === tokenHash, "used_at", now()); },
    async refreshToken(tokenHash) { return clone(st().refreshTokens.find((r) => r.token_hash === tokenHash)); },
    async insertAccessToken(t) {
      const row: TokenRow = {
        id: randomUUID(), token_hash: t.tokenHash, user_id: t.userId, scopes: [...t.scopes], client_id: t.clientId, expires_at: t.expiresAt,
        revoked_at: null, audience: t.audience, grant_id: t.grantId,
      };
      insert(st().tokens, row, "token_hash");
    },
    async purgeCodes(before) { st().codes = st().codes.filter((c) => c.expires_at >= before); },
  };

  /** Revokes the live tokens that match; their hashes. */
  function revokeTokens(match: (t: TokenRow) => boolean, at: Date): string[] {
    const rows = st().tokens.filter((t) => t.revoked_at === null && match(t));
    for (const t of rows) t.revoked_at = at;
    return rows.map((t) => t.token_hash);
  }
}

/** Cheap scrypt parameters (the lowest parseHash accepts): the same code paths, milliseconds per hash. */
export const FAST_SCRYPT: ScryptParams = { ln: 10, r: 8, p: 1 };

export const RESOURCES: Resources = { mcp: "https://mcp.test/mcp", api: "https://api.test/functions/v1/thirdparty-v1" };

export interface Harness {
  auth: ReturnType<typeof createAuth>;
  sessions: ReturnType<typeof createWebSessions>;
  oauth: ReturnType<typeof createOAuth>;
  /** The committed state. */
  state: () => State;
  clock: { now: Date };
  /** Moves the clock on. */
  advance(ms: number): void;
  /** Token hashes announced as revoked, in order. */
  announced: string[];
}

/** The three use-case objects over the fakes, wired as module.ts wires them. */
export function harness(opts: { throttle?: ThrottlePolicy } = {}): Harness {
  let state = emptyState();
  const clock = { now: new Date("2026-06-01T12:00:00Z") };
  const now = () => new Date(clock.now);
  // Units run one at a time (as transactions on the same rows would), each on a copy of the state.
  const insideUnit = new AsyncLocalStorage<true>();
  let open = false;
  let queue: Promise<unknown> = Promise.resolve();
  const uow: UnitOfWork<OAuthStore> = (work) => {
    if (insideUnit.getStore()) throw new Error("nested unit of work");
    const run = queue.then(() => insideUnit.run(true, async () => {
      const draft = clone(state);
      const events: EventWriter = { async emit() { throw new Error("the auth service writes no outbox events"); } };
      open = true;
      try {
        const out = await work(fakeOAuthStore(() => draft, now), events);
        state = draft;
        return out;
      } finally {
        open = false;
      }
    }));
    queue = run.catch(() => {});
    return run;
  };
  // A write outside a unit while one is open would be lost when the unit commits its copy.
  const outsideUnits = <S extends object>(store: S): S => new Proxy(store, {
    get: (target, k: string) => {
      const method = (target as Record<string, unknown>)[k] as (...args: unknown[]) => unknown;
      if (!/^(insert|create|set|revoke|record|forget|clear|add|take|purge)/.test(k)) return method;
      return (...args: unknown[]) => {
        if (open) throw new Error(`${k} outside the open unit of work: the fake cannot keep both`);
        return method(...args);
      };
    },
  });
  const store = outsideUnits(fakeAuthStore(() => state, now));
  const sessions = createWebSessions(store, { now, scrypt: FAST_SCRYPT, throttle: opts.throttle });
  const announced: string[] = [];
  const oauth = createOAuth({
    store: outsideUnits(fakeOAuthStore(() => state, now)), uow, sessions, resources: () => RESOURCES, revoked: (hashes) => { announced.push(...hashes); }, now,
  });
  return {
    auth: createAuth(store, { now, scrypt: FAST_SCRYPT }), sessions, oauth, state: () => state, clock, announced,
    advance(ms) { clock.now = new Date(clock.now.getTime() + ms); },
  };
}
