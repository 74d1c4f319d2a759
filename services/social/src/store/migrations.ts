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
  ["20261124100000_bookmarks", {
    async up(knex) {
      await knex.schema.createTable("bookmarks", (t) => {
        t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
        t.uuid("user_id").notNullable();
        t.text("title").notNullable();
        t.text("collection_ids").notNullable();
        t.text("source").notNullable();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(["user_id", "created_at"]);
      });
    },
  }],
  ["20261124100100_tag_vocabulary", {
    async up(knex) {
      // The curated vocabulary (tags.vocabulary.get); entries are retired with active = false,
      // never deleted, so tags already given keep their meaning.
      await knex.schema.createTable("tag_vocabulary", (t) => {
        t.text("slug").primary();
        t.text("label").notNullable();
        t.text("category").notNullable();
        t.integer("sort_order").notNullable();
        t.boolean("active").notNullable().defaultTo(true);
        t.index(["active", "sort_order"]);
      });
      await knex.raw(`ALTER TABLE tag_vocabulary ADD CONSTRAINT tag_vocabulary_slug_check CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,49}$')`);
      await knex("tag_vocabulary").insert([
        { slug: "travel", label: "Travel", category: "subject", sort_order: 10 },
        { slug: "nature", label: "Nature", category: "subject", sort_order: 20 },
        { slug: "animals", label: "Animals", category: "subject", sort_order: 30 },
        { slug: "food", label: "Food", category: "subject", sort_order: 40 },
        { slug: "architecture", label: "Architecture", category: "subject", sort_order: 50 },
        { slug: "people", label: "People", category: "subject", sort_order: 60 },
        { slug: "city", label: "City", category: "subject", sort_order: 70 },
        { slug: "sports", label: "Sports", category: "subject", sort_order: 80 },
        { slug: "music", label: "Music", category: "subject", sort_order: 90 },
        { slug: "art", label: "Art", category: "subject", sort_order: 100 },
        { slug: "science", label: "Science", category: "subject", sort_order: 110 },
        { slug: "technology", label: "Technology", category: "subject", sort_order: 120 },
        { slug: "history", label: "History", category: "subject", sort_order: 130 },
        { slug: "family", label: "Family", category: "subject", sort_order: 140 },
        { slug: "fashion", label: "Fashion", category: "subject", sort_order: 150 },
        { slug: "photo", label: "Photo", category: "format", sort_order: 160 },
        { slug: "video", label: "Video", category: "format", sort_order: 170 },
        { slug: "audio", label: "Audio", category: "format", sort_order: 180 },
        { slug: "document", label: "Document", category: "format", sort_order: 190 },
        { slug: "slideshow", label: "Slideshow", category: "format", sort_order: 200 },
        { slug: "tutorial", label: "Tutorial", category: "format", sort_order: 210 },
        { slug: "notes", label: "Notes", category: "format", sort_order: 220 },
        { slug: "calm", label: "Calm", category: "mood", sort_order: 230 },
        { slug: "joyful", label: "Joyful", category: "mood", sort_order: 240 },
        { slug: "dramatic", label: "Dramatic", category: "mood", sort_order: 250 },
        { slug: "nostalgic", label: "Nostalgic", category: "mood", sort_order: 260 },
        { slug: "inspiring", label: "Inspiring", category: "mood", sort_order: 270 },
        { slug: "funny", label: "Funny", category: "mood", sort_order: 280 },
        { slug: "work", label: "Work", category: "purpose", sort_order: 290 },
        { slug: "study", label: "Study", category: "purpose", sort_order: 300 },
        { slug: "reference", label: "Reference", category: "purpose", sort_order: 310 },
        { slug: "inspiration", label: "Inspiration", category: "purpose", sort_order: 320 },
        { slug: "portfolio", label: "Portfolio", category: "purpose", sort_order: 330 },
        { slug: "archive", label: "Archive", category: "purpose", sort_order: 340 },
        { slug: "spring", label: "Spring", category: "season", sort_order: 350 },
        { slug: "summer", label: "Summer", category: "season", sort_order: 360 },
        { slug: "autumn", label: "Autumn", category: "season", sort_order: 370 },
        { slug: "winter", label: "Winter", category: "season", sort_order: 380 },
      ]);
    },
  }],
  ["20261124100200_bug_reports", {
    async up(knex) {
      await knex.schema.createTable("bug_reports", (t) => {
        t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
        t.uuid("reporter_user_id").notNullable();
        t.text("category").notNullable();
        t.text("related_op").notNullable();
        t.text("title").notNullable();
        t.text("expected");
        t.text("actual");
        t.text("error_code");
        t.text("severity");
        t.jsonb("repro");
        t.text("notes");
        t.text("status").notNullable().defaultTo("new");
        t.uuid("duplicate_of");
        t.integer("report_count").notNullable().defaultTo(1);
        // sha256 of (related_op, category, error_code, loose title): see domain/bug-reports.ts.
        t.text("duplicate_key").notNullable();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("last_reported_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw(`ALTER TABLE bug_reports ADD CONSTRAINT bug_reports_status_check CHECK (status IN ('new','triaged','duplicate','rejected','promoted'))`);
      // One open report per duplicate key: a repeat counts on it (INSERT ... ON CONFLICT).
      await knex.raw(`CREATE UNIQUE INDEX bug_reports_open_key ON bug_reports (duplicate_key) WHERE status IN ('new','triaged')`);
      await knex.raw(`CREATE INDEX bug_reports_triage ON bug_reports (status, report_count DESC, last_reported_at DESC)`);
    },
  }],
  ["20261124110000_ui_state", {
    async up(knex) {
      // Each user's synchronized player UI state; version increases with every ui.state.set.
      await knex.schema.createTable("ui_states", (t) => {
        t.uuid("user_id").primary();
        t.bigInteger("collection_id");
        t.bigInteger("media_id");
        t.text("view_mode");
        t.text("source");
        t.specificType("browse_results", "bigint[]").notNullable().defaultTo(knex.raw("'{}'::bigint[]"));
        t.text("browse_title");
        t.text("browse_source");
        t.bigInteger("version").notNullable();
        t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      // Open player sessions, as each gateway reports them (SyncPlayerSessions); a session a
      // gateway stopped reporting ages out.
      await knex.schema.createTable("player_sessions", (t) => {
        t.uuid("session_id").primary();
        t.text("gateway_id").notNullable();
        t.uuid("user_id").notNullable();
        t.timestamp("seen_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(["user_id", "seen_at"]);
        t.index(["gateway_id"]);
      });
    },
  }],
];
