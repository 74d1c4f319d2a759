/** The auth schema: users (with password hashes), hashed access tokens and hashed API keys. */
import type { Knex } from "knex";
import type { MigrationList } from "@cms/platform";
import type { Plan } from "../domain/tokens.js";
import { oauthMigrations } from "./oauth-store.js";

export const migrations: MigrationList = [
  ["20261122000000_users_tokens", {
    async up(knex) {
      await knex.schema.createTable("users", (t) => {
        t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
        t.text("username").notNullable().unique();
        t.text("plan").notNullable().defaultTo("free");
        t.boolean("is_admin").notNullable().defaultTo(false);
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw(`ALTER TABLE users ADD CONSTRAINT users_plan_check CHECK (plan IN ('free','paid','founding'))`);
      await knex.schema.createTable("tokens", (t) => {
        t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
        t.text("token_hash").notNullable().unique();
        t.uuid("user_id").notNullable().references("id").inTable("users").onDelete("CASCADE");
        t.specificType("scopes", "text[]").notNullable();
        t.text("client_id").notNullable().defaultTo("");
        t.timestamp("expires_at", { useTz: true }).notNullable();
        t.timestamp("revoked_at", { useTz: true });
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(["user_id"]);
      });
      await knex.schema.createTable("api_keys", (t) => {
        t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
        t.text("key_hash").notNullable().unique();
        t.text("label").notNullable().defaultTo("");
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
    },
  }],
  ["20261124000000_service_credentials", {
    async up(knex) {
      // Credentials of internal services outside this system that call service RPCs directly.
      await knex.schema.createTable("service_credentials", (t) => {
        t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
        t.text("name").notNullable();
        t.text("credential_hash").notNullable().unique();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("revoked_at", { useTz: true });
      });
    },
  }],
  ["20261125000000_passwords", {
    async up(knex) {
      // A PHC string (domain/passwords.ts); null: the user cannot sign in with a password.
      await knex.schema.alterTable("users", (t) => { t.text("password_hash"); });
    },
  }],
  ["20261125000100_web_sessions", {
    async up(knex) {
      // First-party sign-ins on the web pages; the cookie holds the token, this its hash.
      await knex.schema.createTable("web_sessions", (t) => {
        t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
        t.text("token_hash").notNullable().unique();
        t.uuid("user_id").notNullable().references("id").inTable("users").onDelete("CASCADE");
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("expires_at", { useTz: true }).notNullable();
        t.timestamp("revoked_at", { useTz: true });
        t.index(["user_id"]);
      });
      // Sign-in attempts not (yet) known to have succeeded, per account and per address key.
      await knex.schema.createTable("sign_in_attempts", (t) => {
        t.bigIncrements("id");
        t.text("key").notNullable();
        t.timestamp("at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(["key", "at"]);
        t.index(["at"]);
      });
    },
  }],
  ...oauthMigrations,
];

export interface ServiceCredentialRow {
  id: string;
  name: string;
  revoked_at: Date | null;
}

export interface UserRow {
  id: string;
  username: string;
  plan: Plan;
  is_admin: boolean;
  created_at: Date;
}

export interface TokenRow {
  id: string;
  token_hash: string;
  user_id: string;
  scopes: string[];
  client_id: string;
  expires_at: Date;
  revoked_at: Date | null;
  /** RFC 8707 audience; "" for none. */
  audience: string;
  /** The OAuth grant that issued it, if any. */
  grant_id: string | null;
}

export interface WebSessionRow {
  id: string;
  user_id: string;
  expires_at: Date;
  revoked_at: Date | null;
}

export interface AuthStore {
  createUser(u: { username: string; plan: Plan; isAdmin: boolean; passwordHash?: string }): Promise<UserRow>;
  userByUsername(username: string): Promise<UserRow | undefined>;
  usersByIds(ids: string[]): Promise<UserRow[]>;
  usersByUsernames(names: string[]): Promise<UserRow[]>;
  insertToken(t: { tokenHash: string; userId: string; scopes: string[]; clientId: string; expiresAt: Date }): Promise<TokenRow>;
  tokenWithUser(tokenHash: string): Promise<(TokenRow & { user: UserRow }) | undefined>;
  revokeToken(tokenHash: string): Promise<boolean>;
  /** Sets (or replaces) a user's password hash; false when there is no such user. */
  setPasswordHash(username: string, hash: string): Promise<boolean>;
  /** A user and the password hash stored for them (null when none is set). */
  userWithPassword(username: string): Promise<(UserRow & { password_hash: string | null }) | undefined>;
  /**
   * Counts a sign-in attempt under each key before its password is checked (concurrent attempts
   * see each other); attempts older than `purgeBefore` are dropped. Returns the new rows' ids.
   */
  recordSignInAttempt(keys: string[], purgeBefore: Date): Promise<string[]>;
  /** Times of the attempts under a key since `since`, except the given ones. */
  signInAttempts(key: string, since: Date, except: string[]): Promise<Date[]>;
  /** Forgets attempts by id (an attempt refused before it was tried, or one that succeeded). */
  forgetSignInAttempts(ids: string[]): Promise<void>;
  /** Forgets every attempt under a key (a successful sign-in clears its account's failures). */
  clearSignInAttempts(key: string): Promise<void>;
  insertWebSession(s: { tokenHash: string; userId: string; expiresAt: Date }): Promise<WebSessionRow>;
  webSessionWithUser(tokenHash: string): Promise<(WebSessionRow & { user: UserRow }) | undefined>;
  /** Revokes a live web session; false when there was none. */
  revokeWebSession(tokenHash: string): Promise<boolean>;
  insertApiKey(keyHash: string, label: string): Promise<void>;
  apiKeyExists(keyHash: string): Promise<boolean>;
  insertServiceCredential(name: string, credentialHash: string): Promise<void>;
  serviceCredential(credentialHash: string): Promise<ServiceCredentialRow | undefined>;
}

/** The columns of the user joined (as `u`) to a token or a session, and the UserRow they make. */
const JOINED_USER_COLS = ["u.username", "u.plan", "u.is_admin", "u.created_at as user_created_at"];
function joinedUser(row: { user_id: string; username: string; plan: Plan; is_admin: boolean; user_created_at: Date }): UserRow {
  return { id: row.user_id, username: row.username, plan: row.plan, is_admin: row.is_admin, created_at: row.user_created_at };
}

export function createAuthStore(db: Knex): AuthStore {
  const userCols = ["id", "username", "plan", "is_admin", "created_at"];
  return {
    async createUser(u) {
      const [row] = await db("users").insert({ username: u.username, plan: u.plan, is_admin: u.isAdmin, password_hash: u.passwordHash ?? null }).returning(userCols);
      return row as UserRow;
    },
    async userByUsername(username) {
      return db("users").select(userCols).where({ username }).first();
    },
    async usersByIds(ids) {
      return ids.length ? db("users").select(userCols).whereIn("id", ids) : [];
    },
    async usersByUsernames(names) {
      return names.length ? db("users").select(userCols).whereIn("username", names) : [];
    },
    async insertToken(t) {
      const [row] = await db("tokens").insert({
        token_hash: t.tokenHash, user_id: t.userId, scopes: t.scopes, client_id: t.clientId, expires_at: t.expiresAt,
      }).returning("*");
      return row as TokenRow;
    },
    async tokenWithUser(tokenHash) {
      const row = await db("tokens as t")
        .join("users as u", "u.id", "t.user_id")
        .select("t.*", ...JOINED_USER_COLS)
        .where("t.token_hash", tokenHash)
        .first();
      if (!row) return undefined;
      return {
        id: row.id, token_hash: row.token_hash, user_id: row.user_id, scopes: row.scopes, client_id: row.client_id,
        expires_at: row.expires_at, revoked_at: row.revoked_at, audience: row.audience, grant_id: row.grant_id, user: joinedUser(row),
      };
    },
    async revokeToken(tokenHash) {
      const n = await db("tokens").where({ token_hash: tokenHash }).whereNull("revoked_at").update({ revoked_at: db.fn.now() });
      return n > 0;
    },
    async setPasswordHash(username, hash) {
      return (await db("users").where({ username }).update({ password_hash: hash })) > 0;
    },
    async userWithPassword(username) {
      return db("users").select([...userCols, "password_hash"]).where({ username }).first();
    },
    async recordSignInAttempt(keys, purgeBefore) {
      await db("sign_in_attempts").where("at", "<", purgeBefore).delete();
      const rows = await db("sign_in_attempts").insert(keys.map((key) => ({ key }))).returning("id");
      return rows.map((r: { id: string | number }) => String(r.id));
    },
    async signInAttempts(key, since, except) {
      const rows = await db("sign_in_attempts").select("at").where({ key }).andWhere("at", ">", since).whereNotIn("id", except);
      return rows.map((r: { at: Date }) => r.at);
    },
    async forgetSignInAttempts(ids) {
      if (ids.length) await db("sign_in_attempts").whereIn("id", ids).delete();
    },
    async clearSignInAttempts(key) {
      await db("sign_in_attempts").where({ key }).delete();
    },
    async insertWebSession(s) {
      const [row] = await db("web_sessions").insert({ token_hash: s.tokenHash, user_id: s.userId, expires_at: s.expiresAt }).returning(["id", "user_id", "expires_at", "revoked_at"]);
      return row as WebSessionRow;
    },
    async webSessionWithUser(tokenHash) {
      const row = await db("web_sessions as s")
        .join("users as u", "u.id", "s.user_id")
        .select("s.id", "s.user_id", "s.expires_at", "s.revoked_at", ...JOINED_USER_COLS)
        .where("s.token_hash", tokenHash)
        .first();
      if (!row) return undefined;
      return {
        id: row.id, user_id: row.user_id, expires_at: row.expires_at, revoked_at: row.revoked_at, user: joinedUser(row),
      };
    },
    async revokeWebSession(tokenHash) {
      return (await db("web_sessions").where({ token_hash: tokenHash }).whereNull("revoked_at").update({ revoked_at: db.fn.now() })) > 0;
    },
    async insertApiKey(keyHash, label) {
      await db("api_keys").insert({ key_hash: keyHash, label }).onConflict("key_hash").ignore();
    },
    async apiKeyExists(keyHash) {
      return Boolean(await db("api_keys").select("id").where({ key_hash: keyHash }).first());
    },
    async insertServiceCredential(name, credentialHash) {
      await db("service_credentials").insert({ name, credential_hash: credentialHash });
    },
    async serviceCredential(credentialHash) {
      return db("service_credentials").select("id", "name", "revoked_at").where({ credential_hash: credentialHash }).first();
    },
  };
}
