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
import { createDb, migrate, type MigrationList } from "../src/db.ts";

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
