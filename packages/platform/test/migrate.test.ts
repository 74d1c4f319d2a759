/**
 * Migrations run once per release however many replicas start together: each service migrates
 * its schema at start under a PostgreSQL advisory lock per schema (the leader lock the Kubernetes
 * manifests rely on instead of a migration Job). Three "replicas" migrating one schema at once
 * all start, and each migration ran exactly once.
 */
import test from "ava";
import { randomBytes } from "node:crypto";
import type { Knex } from "knex";
import { freshDatabase } from "../../../test/helpers/system.ts";
import pg from "pg";
import { createDb, ensureExtensions, migrate, type MigrationList } from "../src/db.ts";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

test("replicas starting together migrate a schema once", async (t) => {
  const database = await freshDatabase(adminUrl);
  const replicas: Knex[] = [];
  try {
    const schema = `mig_${randomBytes(4).toString("hex")}`;
    const migrations: MigrationList = [
      ["20260101000000_runs", { async up(knex) { await knex.schema.createTable("runs", (tb) => { tb.increments("id"); tb.text("name"); }); await knex("runs").insert({ name: "first" }); } }],
      // Slow enough that the replicas overlap while it runs.
      ["20260101000001_slow", { async up(knex) { await knex.raw("SELECT pg_sleep(0.3)"); await knex("runs").insert({ name: "slow" }); } }],
    ];
    for (let i = 0; i < 3; i++) replicas.push(createDb(database.url, schema, 3));
    await Promise.all(replicas.map((db) => migrate(db, schema, migrations)));
    const runs = await replicas[0]!("runs").orderBy("id").pluck("name");
    t.deepEqual(runs, ["first", "slow"]);
    const applied = await replicas[0]!("knex_migrations").pluck("name");
    t.deepEqual(applied.sort(), ["20260101000000_runs", "20260101000001_slow"]);
  } finally {
    for (const db of replicas) await db.destroy();
    await database.drop();
  }
});

test("sessions with a short lock_timeout still wait their turn to migrate and to create extensions; the pool's connections keep their timeout", async (t) => {
  const database = await freshDatabase(adminUrl);
  const holder = new pg.Client({ connectionString: database.url });
  const db = createDb(database.url, `mig_${randomBytes(4).toString("hex")}`, 2, { lock_timeout: "100" });
  try {
    const schema = db.client.config.searchPath[0] as string;
    await holder.connect();
    // Another replica migrating this schema, and another creating the extensions, for 600 ms:
    // six of the sessions' lock timeouts.
    await holder.query("SELECT pg_advisory_lock(hashtext($1)), pg_advisory_lock(hashtext('cms-extensions'))", [`cms-migrate:${schema}`]);
    const release = setTimeout(() => { void holder.query("SELECT pg_advisory_unlock_all()"); }, 600);
    const started = Date.now();
    await ensureExtensions(db, ["pg_trgm"]);
    await migrate(db, schema, [["20260101000000_runs", { async up(knex) { await knex.schema.createTable("runs", (tb) => { tb.increments("id"); }); } }]]);
    clearTimeout(release);
    t.true(Date.now() - started >= 500, "they waited for the other replica");
    t.deepEqual(await db("knex_migrations").pluck("name"), ["20260101000000_runs"]);
    // Every connection the pool hands out is back at the session's own timeout.
    const timeouts = await Promise.all([0, 1].map(() => db.raw("SELECT current_setting('lock_timeout') AS v, pg_sleep(0.05)")));
    t.deepEqual(timeouts.map((r) => r.rows[0].v), ["100ms", "100ms"]);
  } finally {
    await holder.end();
    await db.destroy();
    await database.drop();
  }
});
