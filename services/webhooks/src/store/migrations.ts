/** The webhooks schema's migrations, in apply order (run by the launcher at start). */
import type { MigrationList } from "@cms/platform";

export const migrations: MigrationList = [
  ["20261124200000_webhooks", {
    async up(knex) {
      // One live webhook per collection; a removed one keeps its row (removed_at) for the
      // delivery log's 30 days.
      await knex.schema.createTable("webhooks", (t) => {
        t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
        t.bigInteger("collection_id").notNullable();
        t.uuid("owner_user_id").notNullable();
        t.text("url").notNullable();
        t.specificType("events", "text[]").notNullable();
        t.text("secret").notNullable();
        t.boolean("enabled").notNullable().defaultTo(true);
        t.text("disabled_reason");
        t.integer("failure_count").notNullable().defaultTo(0);
        t.integer("last_status");
        t.text("last_error");
        t.timestamp("last_delivery_at", { useTz: true });
        // The collection's published state, from the collections service's events (and its
        // CheckAccess at webhook_set): deliveries go out only while it is published.
        t.boolean("collection_published").notNullable().defaultTo(false);
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("removed_at", { useTz: true });
      });
      await knex.raw("CREATE UNIQUE INDEX webhooks_live ON webhooks (collection_id) WHERE removed_at IS NULL");
      await knex.raw("CREATE INDEX webhooks_removed ON webhooks (removed_at) WHERE removed_at IS NOT NULL");

      // Changes waiting for their coalescing window to close; the event id makes redelivery harmless.
      await knex.schema.createTable("pending_changes", (t) => {
        t.uuid("event_id").primary();
        t.uuid("webhook_id").notNullable();
        t.text("kind").notNullable();
        t.timestamp("at", { useTz: true }).notNullable();
        t.index(["webhook_id", "at"]);
      });
      // One open window per webhook: it closes at closes_at, whatever arrives meanwhile.
      await knex.schema.createTable("windows", (t) => {
        t.uuid("webhook_id").primary();
        t.timestamp("opened_at", { useTz: true }).notNullable();
        t.timestamp("closes_at", { useTz: true }).notNullable();
        t.index(["closes_at"]);
      });
      // A delivery: one body, up to four attempts. The schedule lives here (next_attempt_at), so a
      // delivery due while no webhooks process runs goes out when one comes back; a sender claims
      // rows with FOR UPDATE SKIP LOCKED, so two replicas never send the same attempt.
      await knex.schema.createTable("deliveries", (t) => {
        t.uuid("id").primary();
        t.uuid("webhook_id").notNullable();
        t.bigInteger("collection_id").notNullable();
        t.text("event").notNullable();
        t.text("body").notNullable();
        t.text("state").notNullable().defaultTo("pending");
        t.integer("attempts").notNullable().defaultTo(0);
        t.timestamp("next_attempt_at", { useTz: true }).notNullable();
        // While an attempt is in flight: when its claim lapses (the sender died), it is due again.
        t.timestamp("claimed_until", { useTz: true });
        t.timestamp("window_closed_at", { useTz: true }).notNullable();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("finished_at", { useTz: true });
        t.text("last_error");
      });
      await knex.raw(`ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check CHECK (state IN ('pending','delivered','failed','discarded'))`);
      await knex.raw("CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending'");
      await knex.raw("CREATE INDEX deliveries_webhook ON deliveries (webhook_id, created_at)");
      await knex.schema.createTable("attempts", (t) => {
        t.bigIncrements("id");
        t.uuid("delivery_id").notNullable();
        t.uuid("webhook_id").notNullable();
        t.text("event").notNullable();
        t.integer("attempt").notNullable();
        t.integer("status");
        t.integer("duration_ms").notNullable();
        t.text("error");
        t.timestamp("at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(["webhook_id", "at"]);
      });
    },
  }],
  ["20261124210000_trace_links", {
    async up(knex) {
      // The trace of each change (the event's consumer span), so that a delivery coalescing
      // several changes links to every trace that caused it.
      await knex.schema.alterTable("pending_changes", (t) => { t.text("traceparent"); });
      await knex.schema.alterTable("deliveries", (t) => { t.jsonb("trace_links").notNullable().defaultTo("[]"); });
    },
  }],
];
