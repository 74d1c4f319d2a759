/**
 * PostgreSQL access: one knex instance per service, confined to that service's schema through
 * the search path, with the service's own migrations run at start.
 */
import knexFactory, { type Knex } from "knex";
import pg from "pg";

export type { Knex };

// Return int8 (bigint, count(*)) as JS numbers: ids stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));
// numeric as number as well (similarity scores, sums).
pg.types.setTypeParser(1700, (v) => Number(v));

export interface Migration {
  up(knex: Knex): Promise<void>;
  down?(knex: Knex): Promise<void>;
}

/** Migrations in apply order: a name (timestamped) and its functions. */
export type MigrationList = ReadonlyArray<readonly [name: string, migration: Migration]>;

/**
 * Settings of every session of a service's pool (e.g. `pg_trgm.word_similarity_threshold`, which
 * an indexed trigram operator reads): sent as `-c name=value` in the startup packet, so they
 * cost no statement per connection and hold on every connection the pool opens.
 */
export type SessionSettings = Readonly<Record<string, string>>;

/** The pg `options` startup parameter: the URL's own options, then the settings. */
export function sessionOptions(databaseUrl: string, settings: SessionSettings): string | undefined {
  const own = (() => { try { return new URL(databaseUrl).searchParams.get("options") ?? ""; } catch { return ""; } })();
  const extra = Object.entries(settings).map(([name, value]) => {
    if (!/^[a-z_][a-z0-9_.]*$/i.test(name) || /[\s\\]/.test(value)) throw new Error(`invalid session setting ${name}=${value}`);
    return `-c ${name}=${value}`;
  });
  const all = [own, ...extra].filter(Boolean).join(" ");
  return all || undefined;
}

export function createDb(databaseUrl: string, schema: string, poolMax: number, settings: SessionSettings = {}): Knex {
  const options = Object.keys(settings).length ? sessionOptions(databaseUrl, settings) : undefined;
  return knexFactory({
    client: "pg",
    // Named after the service's schema, so that pg_stat_activity tells the pools apart.
    connection: { connectionString: databaseUrl, application_name: `cms-${schema}`, ...(options ? { options } : {}) },
    searchPath: [schema, "public"],
    pool: { min: 0, max: poolMax, idleTimeoutMillis: 30000 },
    acquireConnectionTimeout: 15000,
  });
}

/**
 * Creates the schema and applies pending migrations. Replicas starting together take turns: a
 * session-level advisory lock keyed by the schema name is held on one connection meanwhile.
 */
export async function migrate(knex: Knex, schema: string, migrations: MigrationList): Promise<void> {
  const conn = await knex.client.acquireConnection();
  try {
    await conn.query("SELECT pg_advisory_lock(hashtext($1))", [`cms-migrate:${schema}`]);
    try {
      await migrateLocked(knex, schema, migrations);
    } finally {
      await conn.query("SELECT pg_advisory_unlock(hashtext($1))", [`cms-migrate:${schema}`]);
    }
  } finally {
    await knex.client.releaseConnection(conn);
  }
}

async function migrateLocked(knex: Knex, schema: string, migrations: MigrationList): Promise<void> {
  await knex.raw(`CREATE SCHEMA IF NOT EXISTS ??`, [schema]);
  const list = [...migrations];
  await knex.migrate.latest({
    schemaName: schema,
    tableName: "knex_migrations",
    migrationSource: {
      getMigrations: async () => list.map(([name]) => name),
      getMigrationName: (name: string) => name,
      getMigration: async (name: string) => {
        const found = list.find(([n]) => n === name);
        if (!found) throw new Error(`unknown migration ${name}`);
        const m = found[1];
        return { up: m.up, down: m.down ?? (async () => {}) };
      },
    },
  });
}

/** Extensions live in `public` so that every schema's search path sees them. */
export async function ensureExtensions(knex: Knex, names: string[]): Promise<void> {
  await knex.transaction(async (trx) => {
    // Serialised across processes: CREATE EXTENSION IF NOT EXISTS races otherwise.
    await trx.raw("SELECT pg_advisory_xact_lock(hashtext('cms-extensions'))");
    for (const name of names) await trx.raw(`CREATE EXTENSION IF NOT EXISTS ${name} WITH SCHEMA public`);
  });
}

/**
 * Creates, in the migrating schema, immutable_unaccent(text): unaccent() is only STABLE, and
 * generated columns and index expressions need an IMMUTABLE function. Each service that
 * searches text creates its own copy in its own schema (no schema reaches into another).
 */
export async function createImmutableUnaccent(knex: Knex): Promise<void> {
  await knex.raw(`CREATE OR REPLACE FUNCTION immutable_unaccent(text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$ SELECT public.unaccent('public.unaccent'::regdictionary, $1) $$`);
}

/** True for a PostgreSQL unique-violation error (optionally on a given constraint). */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === "23505" && (constraint === undefined || e.constraint === constraint);
}
