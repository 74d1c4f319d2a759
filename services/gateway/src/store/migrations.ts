/** The gateway schema: shared rate-limit windows, idempotency records and MCP sessions. */
import type { MigrationList } from "@cms/platform";

export const gatewayMigrations: MigrationList = [
  ["20261122000000_rate_limits_idempotency", {
    async up(knex) {
      await knex.schema.createTable("rate_limits", (t) => {
        t.text("key").notNullable();
        t.timestamp("window_start", { useTz: true }).notNullable();
        t.integer("count").notNullable();
        t.primary(["key", "window_start"]);
      });
      await knex.schema.createTable("idempotency_keys", (t) => {
        t.text("user_id").notNullable();
        t.text("op").notNullable();
        t.text("key").notNullable();
        t.text("request_hash").notNullable();
        t.text("state").notNullable();
        t.integer("status");
        t.text("response");
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.primary(["user_id", "op", "key"]);
        t.index(["created_at"]);
      });
    },
  }],
  ["20261201000000_mcp_sessions", {
    async up(knex) {
      await knex.schema.createTable("mcp_sessions", (t) => {
        t.text("id").primary();
        t.text("user_id").notNullable();
        t.timestamp("created_at", { useTz: true }).notNullable();
        t.timestamp("last_used_at", { useTz: true }).notNullable();
        t.index(["user_id", "last_used_at"]);
        t.index(["last_used_at"]);
      });
    },
  }],
  // One upsert per request in split mode: a commit touching only an unlogged table does not
  // wait for its WAL to reach the disk (1-7 ms here, the whole of ping's split-mode gap). After
  // a crash the table comes back empty: every window restarts, which a rate limit can afford.
  ["20261210000000_rate_limits_unlogged", {
    async up(knex) {
      await knex.raw("ALTER TABLE rate_limits SET UNLOGGED");
    },
  }],
];
