/**
 * The OAuth tables of the auth schema: clients, consents, authorization codes, grants (a refresh
 * token family and the access tokens it issued) and refresh tokens, all secrets stored hashed.
 * The adapter works on the pool or on a unit of work's transaction.
 */
import type { Migration, Queryable } from "@cms/platform";

export const oauthMigrations: Array<[string, Migration]> = [
  ["20261125000200_oauth", {
    async up(knex) {
      await knex.schema.createTable("oauth_clients", (t) => {
        t.text("client_id").primary();
        t.text("name").notNullable();
        t.specificType("redirect_uris", "text[]").notNullable();
        // Null for a public client (PKCE only); a confidential one also authenticates.
        t.text("secret_hash");
        // The bundled MCP client: any loopback redirect URI (conventions.md, RFC 8252).
        t.boolean("any_loopback").notNullable().defaultTo(false);
        // Scopes asked for when a request names none; null: every scope.
        t.specificType("scopes", "text[]");
        // migration | cli | dynamic
        t.text("registered_by").notNullable();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex("oauth_clients").insert({ client_id: "mcp", name: "MCP client", redirect_uris: [], any_loopback: true, registered_by: "migration" });
      await knex.schema.createTable("oauth_consents", (t) => {
        t.uuid("user_id").notNullable().references("id").inTable("users").onDelete("CASCADE");
        t.text("client_id").notNullable().references("client_id").inTable("oauth_clients").onDelete("CASCADE");
        t.specificType("scopes", "text[]").notNullable();
        t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.primary(["user_id", "client_id"]);
      });
      // A grant: what one authorization gave one client, the family of its refresh tokens.
      await knex.schema.createTable("oauth_grants", (t) => {
        t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
        t.uuid("user_id").notNullable().references("id").inTable("users").onDelete("CASCADE");
        t.text("client_id").notNullable().references("client_id").inTable("oauth_clients").onDelete("CASCADE");
        t.specificType("scopes", "text[]").notNullable();
        t.text("audience").notNullable().defaultTo("");
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("revoked_at", { useTz: true });
        t.text("revoked_reason");
        t.index(["user_id"]);
      });
      await knex.schema.createTable("oauth_codes", (t) => {
        t.text("code_hash").primary();
        t.text("client_id").notNullable().references("client_id").inTable("oauth_clients").onDelete("CASCADE");
        t.uuid("user_id").notNullable().references("id").inTable("users").onDelete("CASCADE");
        t.text("redirect_uri").notNullable();
        t.text("code_challenge").notNullable();
        t.specificType("scopes", "text[]").notNullable();
        t.text("audience").notNullable().defaultTo("");
        t.timestamp("expires_at", { useTz: true }).notNullable();
        t.timestamp("used_at", { useTz: true });
        // The grant the code was exchanged for: revoked when the code is presented again.
        t.uuid("grant_id").references("id").inTable("oauth_grants").onDelete("SET NULL");
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(["expires_at"]);
      });
      await knex.schema.createTable("oauth_refresh_tokens", (t) => {
        t.text("token_hash").primary();
        t.uuid("grant_id").notNullable().references("id").inTable("oauth_grants").onDelete("CASCADE");
        t.timestamp("expires_at", { useTz: true }).notNullable();
        t.timestamp("used_at", { useTz: true });
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(["grant_id"]);
      });
      // Access tokens remember their grant (revoked with it) and their audience (RFC 8707).
      await knex.schema.alterTable("tokens", (t) => {
        t.text("audience").notNullable().defaultTo("");
        t.uuid("grant_id").references("id").inTable("oauth_grants").onDelete("CASCADE");
        t.index(["grant_id"]);
      });
    },
  }],
];

export interface ClientRow {
  client_id: string;
  name: string;
  redirect_uris: string[];
  secret_hash: string | null;
  any_loopback: boolean;
  scopes: string[] | null;
  registered_by: string;
  created_at: Date;
}

export interface CodeRow {
  code_hash: string;
  client_id: string;
  user_id: string;
  redirect_uri: string;
  code_challenge: string;
  scopes: string[];
  audience: string;
  expires_at: Date;
  used_at: Date | null;
  grant_id: string | null;
}

export interface GrantRow {
  id: string;
  user_id: string;
  client_id: string;
  scopes: string[];
  audience: string;
  revoked_at: Date | null;
}

export interface RefreshRow {
  token_hash: string;
  grant_id: string;
  expires_at: Date;
  used_at: Date | null;
}

export interface OAuthStore {
  insertClient(c: Omit<ClientRow, "created_at">): Promise<ClientRow>;
  client(clientId: string): Promise<ClientRow | undefined>;
  consent(userId: string, clientId: string): Promise<string[] | undefined>;
  /** Records consent to these scopes (added to what was consented before). */
  addConsent(userId: string, clientId: string, scopes: string[]): Promise<void>;
  insertCode(c: Omit<CodeRow, "used_at" | "grant_id">): Promise<void>;
  /** Marks a code used and returns it, if it was unused; else undefined (locks the row). */
  takeCode(codeHash: string): Promise<CodeRow | undefined>;
  code(codeHash: string): Promise<CodeRow | undefined>;
  setCodeGrant(codeHash: string, grantId: string): Promise<void>;
  insertGrant(g: { userId: string; clientId: string; scopes: string[]; audience: string }): Promise<GrantRow>;
  grant(id: string): Promise<GrantRow | undefined>;
  /** Revokes grants and every access token they issued; the revoked tokens' hashes. */
  revokeGrants(ids: string[], reason: string): Promise<string[]>;
  /** Revokes the user's live tokens issued to MCP clients (client id mcp*) plus the given one; their hashes. */
  revokeMcpTokens(userId: string, currentTokenId: string): Promise<string[]>;
  /** The user's live grants whose audience is one of these, or whose client is one of these. */
  liveGrantsOf(userId: string, match: { audiences: string[]; clientIds: string[] }): Promise<string[]>;
  insertRefreshToken(r: { tokenHash: string; grantId: string; expiresAt: Date }): Promise<void>;
  /** Marks a refresh token used and returns it, if it was unused; else undefined. */
  takeRefreshToken(tokenHash: string): Promise<RefreshRow | undefined>;
  refreshToken(tokenHash: string): Promise<RefreshRow | undefined>;
  insertAccessToken(t: { tokenHash: string; userId: string; scopes: string[]; clientId: string; expiresAt: Date; audience: string; grantId: string }): Promise<void>;
  /** Drops codes past their lifetime (and a grace day, to recognise a late replay). */
  purgeCodes(before: Date): Promise<void>;
}

export function createOAuthStore(db: Queryable): OAuthStore {
  return {
    async insertClient(c) {
      const [row] = await db("oauth_clients").insert(c).returning("*");
      return row as ClientRow;
    },
    async client(clientId) {
      return db("oauth_clients").where({ client_id: clientId }).first();
    },
    async consent(userId, clientId) {
      return (await db("oauth_consents").select("scopes").where({ user_id: userId, client_id: clientId }).first())?.scopes;
    },
    async addConsent(userId, clientId, scopes) {
      await db.raw(
        `INSERT INTO oauth_consents (user_id, client_id, scopes) VALUES (?, ?, ?::text[])
         ON CONFLICT (user_id, client_id) DO UPDATE
         SET scopes = ARRAY(SELECT DISTINCT unnest(oauth_consents.scopes || EXCLUDED.scopes)), updated_at = now()`,
        [userId, clientId, scopes],
      );
    },
    async insertCode(c) {
      await db("oauth_codes").insert(c);
    },
    async takeCode(codeHash) {
      const [row] = await db("oauth_codes").where({ code_hash: codeHash }).whereNull("used_at").update({ used_at: db.fn.now() }).returning("*");
      return row as CodeRow | undefined;
    },
    async code(codeHash) {
      return db("oauth_codes").where({ code_hash: codeHash }).first();
    },
    async setCodeGrant(codeHash, grantId) {
      await db("oauth_codes").where({ code_hash: codeHash }).update({ grant_id: grantId });
    },
    async insertGrant(g) {
      const [row] = await db("oauth_grants").insert({ user_id: g.userId, client_id: g.clientId, scopes: g.scopes, audience: g.audience }).returning("*");
      return row as GrantRow;
    },
    async grant(id) {
      return db("oauth_grants").where({ id }).first();
    },
    async revokeGrants(ids, reason) {
      if (!ids.length) return [];
      await db("oauth_grants").whereIn("id", ids).whereNull("revoked_at").update({ revoked_at: db.fn.now(), revoked_reason: reason });
      const rows = await db("tokens").whereIn("grant_id", ids).whereNull("revoked_at").update({ revoked_at: db.fn.now() }).returning("token_hash");
      return rows.map((r: { token_hash: string }) => r.token_hash);
    },
    async revokeMcpTokens(userId, currentTokenId) {
      const rows = await db("tokens")
        .where({ user_id: userId })
        .whereNull("revoked_at")
        .andWhere((q) => q.where("client_id", "like", "mcp%").orWhere("id", currentTokenId))
        .update({ revoked_at: db.fn.now() })
        .returning("token_hash");
      return rows.map((r: { token_hash: string }) => r.token_hash);
    },
    async liveGrantsOf(userId, match) {
      const rows = await db("oauth_grants").select("id").where({ user_id: userId }).whereNull("revoked_at")
        .andWhere((q) => q.whereIn("audience", match.audiences.length ? match.audiences : ["\u0000"]).orWhereIn("client_id", match.clientIds.length ? match.clientIds : ["\u0000"]));
      return rows.map((r: { id: string }) => r.id);
    },
    async insertRefreshToken(r) {
      await db("oauth_refresh_tokens").insert({ token_hash: r.tokenHash, grant_id: r.grantId, expires_at: r.expiresAt });
    },
    async takeRefreshToken(tokenHash) {
      const [row] = await db("oauth_refresh_tokens").where({ token_hash: tokenHash }).whereNull("used_at").update({ used_at: db.fn.now() }).returning("*");
      return row as RefreshRow | undefined;
    },
    async refreshToken(tokenHash) {
      return db("oauth_refresh_tokens").where({ token_hash: tokenHash }).first();
    },
    async insertAccessToken(t) {
      await db("tokens").insert({
        token_hash: t.tokenHash, user_id: t.userId, scopes: t.scopes, client_id: t.clientId, expires_at: t.expiresAt, audience: t.audience, grant_id: t.grantId,
      });
    },
    async purgeCodes(before) {
      await db("oauth_codes").where("expires_at", "<", before).delete();
    },
  };
}
