/**
 * The run's database template (test/run-tests.ts) is what a start from nothing makes: a database
 * migrated by migrateSystem has the same schemas, tables, columns, indexes, constraints,
 * functions, triggers, extensions and applied migrations as one a whole system started on, so
 * that test systems started from copies of it test the system a deployment runs.
 */
import test from "ava";
import pg from "pg";
import { loadConfig, migrateSystem } from "@cms/platform";
import { MODULES, startSystem } from "@cms/server";
import { freshDatabase, isolatedEnv } from "./system.ts";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

const OWN = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'";

/** The database's definitions, one line each, sorted (no data but the applied migrations). */
async function catalogOf(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ line: string }>(`
      SELECT concat_ws(' | ', 'relation', n.nspname, c.relname, c.relkind, c.relpersistence) AS line
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE ${OWN}
      UNION ALL SELECT concat_ws(' | ', 'column', n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                                 a.attnotnull, a.attgenerated, pg_get_expr(d.adbin, d.adrelid))
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE ${OWN} AND a.attnum > 0 AND NOT a.attisdropped
      UNION ALL SELECT concat_ws(' | ', 'index', n.nspname, i.relname, pg_get_indexdef(i.oid))
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_namespace n ON n.oid = i.relnamespace WHERE ${OWN}
      UNION ALL SELECT concat_ws(' | ', 'constraint', n.nspname, c.conname, pg_get_constraintdef(c.oid))
        FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE ${OWN}
      UNION ALL SELECT concat_ws(' | ', 'function', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid), md5(pg_get_functiondef(p.oid)))
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE ${OWN} AND p.prokind IN ('f', 'p')
      UNION ALL SELECT concat_ws(' | ', 'trigger', n.nspname, pg_get_triggerdef(t.oid))
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE ${OWN} AND NOT t.tgisinternal
      UNION ALL SELECT concat_ws(' | ', 'extension', e.extname, e.extversion, n.nspname)
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
      ORDER BY 1`);
    const lines = rows.map((r) => r.line);
    const { rows: schemas } = await client.query<{ nspname: string }>(
      "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'knex_migrations' ORDER BY 1",
    );
    for (const { nspname } of schemas) {
      const { rows: applied } = await client.query<{ name: string }>(`SELECT name FROM ${pg.escapeIdentifier(nspname)}.knex_migrations ORDER BY name`);
      lines.push(...applied.map((m) => `migration | ${nspname} | ${m.name}`));
    }
    return lines;
  } finally {
    await client.end();
  }
}

test("a database migrated by migrateSystem has every definition a whole system's start makes", async (t) => {
  const started = await freshDatabase(adminUrl);
  const migrated = await freshDatabase(adminUrl);
  const { env, cleanup } = await isolatedEnv({ DATABASE_URL: started.url });
  try {
    const system = await startSystem(loadConfig(env, ["--target=all"]));
    await system.stop();
    await migrateSystem(migrated.url, MODULES);
    const fromStart = await catalogOf(started.url);
    const fromTemplate = await catalogOf(migrated.url);
    t.true(fromStart.some((l) => l.startsWith("migration | collections | ")), "the start applied the collections schema's migrations");
    t.true(fromStart.some((l) => l.startsWith("extension | pg_trgm ")), "and made its extensions");
    t.deepEqual(fromTemplate, fromStart);
  } finally {
    await cleanup();
    await started.drop();
    await migrated.drop();
  }
});
