/** The social schema's migrations, in apply order (run by the launcher at start). */
import type { MigrationList } from "@cms/platform";

export const migrations: MigrationList = [
  ["20261201000000_aliases", {
    async up(knex) {
      await knex.schema.createTable("aliases", (t) => {
        t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
        t.uuid("user_id").notNullable();
        t.text("handle").notNullable().unique();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(["user_id", "created_at"]);
      });
      await knex.raw(`ALTER TABLE aliases ADD CONSTRAINT aliases_handle_check CHECK (handle ~ '^[a-z0-9_-]{1,63}$')`);
    },
    async down(knex) {
      await knex.schema.dropTable("aliases");
    },
  }],
  ["20261201000100_follows", {
    async up(knex) {
      await knex.schema.createTable("follows", (t) => {
        t.uuid("follower_user_id").notNullable();
        // The alias id, or the owner's user id when the followed handle is a primary username.
        t.uuid("alias_id").notNullable();
        t.uuid("owner_user_id").notNullable();
        t.boolean("is_primary").notNullable();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.primary(["follower_user_id", "alias_id"]);
        t.index(["owner_user_id"]);
        t.index(["alias_id"]);
      });
    },
    async down(knex) {
      await knex.schema.dropTable("follows");
    },
  }],
  ["20261201000200_profiles", {
    async up(knex) {
      await knex.schema.createTable("profiles", (t) => {
        t.uuid("user_id").primary();
        t.text("display_name");
        t.text("bio");
        t.specificType("available_tags", "text[]").notNullable().defaultTo(knex.raw("'{}'::text[]"));
        t.uuid("default_alias_id").references("id").inTable("aliases").onDelete("SET NULL");
        t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
    },
    async down(knex) {
      await knex.schema.dropTable("profiles");
    },
  }],
];
