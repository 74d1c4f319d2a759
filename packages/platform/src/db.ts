/**
 * PostgreSQL access: one knex instance per service, confined to that service's schema through
 * the search path, with the service's own migrations run at start.
 */
import { createRequire } from "node:module";
import knexFactory, { type Knex } from "knex";
import pg from "pg";

export type { Knex };

// Return int8 (bigint, count(*)) as JS numbers: ids stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));
// numeric as number as well (similarity scores, sums).
pg.types.setTypeParser(1700, (v) => Number(v));

/** pg's own timestamptz parser: the fallback of parseTimestamptz, and what its tests compare with. */
export const pgParseTimestamptz = pg.types.getTypeParser(1184) as (text: string) => Date | number;
const digit = (text: string, i: number) => text.charCodeAt(i) - 48;
/** The number two digits at `i` write; NaN when either is not a digit. */
function twoDigits(text: string, i: number): number {
  const a = digit(text, i);
  const b = digit(text, i + 1);
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : NaN;
}

/**
 * A timestamptz as PostgreSQL writes it in the ISO DateStyle ("2026-11-24 18:30:08.705123+00",
 * offsets "+05:30" or "-08:00:30") read without regular expressions: lists read two per row, and
 * pg's own parser was ~6% of a media.list (bench/notes/overhead.md). The same Date as pg's parser
 * (sub-millisecond digits dropped); anything else (infinity, BC, years past 9999, other styles)
 * goes to pg's parser.
 */
export function parseTimestamptz(text: string): Date {
  const n = text.length;
  if (n < 22 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 32 || text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58) {
    return pgParseTimestamptz(text) as Date;
  }
  let i = 19;
  let millis = 0;
  if (text.charCodeAt(i) === 46 /* . */) {
    i++;
    for (let scale = 100; i < n; i++, scale /= 10) {
      const d = digit(text, i);
      if (d < 0 || d > 9) break;
      millis += d * scale;
    }
  }
  const sign = text.charCodeAt(i) === 43 /* + */ ? 1 : text.charCodeAt(i) === 45 /* - */ ? -1 : 0;
  let offsetSeconds = twoDigits(text, i + 1) * 3600;
  i += 3;
  if (text.charCodeAt(i) === 58) { offsetSeconds += twoDigits(text, i + 1) * 60; i += 3; }
  if (text.charCodeAt(i) === 58) { offsetSeconds += twoDigits(text, i + 1); i += 3; }
  const year = twoDigits(text, 0) * 100 + twoDigits(text, 2);
  const utc = Date.UTC(year, twoDigits(text, 5) - 1, twoDigits(text, 8), twoDigits(text, 11), twoDigits(text, 14), twoDigits(text, 17), millis);
  // Any character out of place (a sign missing, a letter for a digit, something left over), or a
  // year Date.UTC would read as 19xx.
  if (sign === 0 || i !== n || !(year >= 1000) || Number.isNaN(utc) || Number.isNaN(offsetSeconds)) return pgParseTimestamptz(text) as Date;
  return new Date(utc - sign * offsetSeconds * 1000);
}
pg.types.setTypeParser(1184, parseTimestamptz);

export interface Migration {
  up(knex: Knex): Promise<void>;
  down?(knex: Knex): Promise<void>;
}

/**
 * One page of a filtered query and the total it is a page of, in one statement: `page` adds the
 * columns, order, limit and offset, and the total comes from a count subquery of the same filter
 * that runs once (a window count would read every matching row for each page). A page past the
 * end has no row to carry the total, so it is then counted on its own. The page is a prepared
 * statement: its text takes one form per combination of the list's filters.
 */
export async function pageWithTotal<T extends object>(filtered: Knex.QueryBuilder, page: (qb: Knex.QueryBuilder) => Knex.QueryBuilder, kept?: Knex.QueryBuilder): Promise<{ rows: T[]; total: number }> {
  // `kept`: a one-value query of a total the database maintains (a per-collection count), read
  // instead of counting; a page without a row, or a total it does not have, is counted.
  const rows = (await prepared(page(filtered.clone()).select((kept ?? filtered.clone().count("*")).as("total")))) as Array<T & { total?: unknown }>;
  const total = rows.length && rows[0]!.total != null ? Number(rows[0]!.total) : Number((await filtered.clone().count<Array<{ total: number }>>("* as total"))[0]!.total);
  for (const r of rows) delete r.total;
  return { rows, total };
}

/**
 * The total of a page whose rows carry it (a window count, `count(*) OVER ()`, on every row). A
 * page past the end has no row to carry it: at offset 0 there is nothing to count, further on
 * `count` asks, so the total stays true at any offset.
 */
export async function windowTotal(rows: ReadonlyArray<{ total?: unknown }>, offset: number, count: () => Promise<number>): Promise<number> {
  if (rows.length) return Number(rows[0]!.total);
  return offset === 0 ? 0 : count();
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

/** The option `prepared()` sets on a statement; the client turns it into the statement's name. */
const PREPARED = Object.freeze({ cmsPrepared: true });

/**
 * Marks a statement to run as a named prepared statement: each pooled connection parses it once,
 * and once PostgreSQL settles on a generic plan (after five executions, when that plan costs no
 * more than the custom ones) it is not planned again either. Planning was a third of the
 * database's CPU of a list page (bench/notes/overhead.md). For the hot reads whose SQL text
 * takes a few forms only (a row by id, a list page): every distinct text stays prepared on each
 * connection for the connection's life. Not for statements whose text grows with the input (IN
 * lists, batch inserts) or whose best plan depends on the values (the trigram searches).
 * Behind PgBouncer in transaction mode this needs PgBouncer 1.21+ with max_prepared_statements.
 */
export function prepared<Q extends { options(options: Readonly<Record<string, unknown>>): Q }>(statement: Q): Q {
  return statement.options(PREPARED);
}

/** The name of a prepared statement by its SQL text: one name per distinct text in the process. */
const statementNames = new Map<string, string>();
export function preparedStatementName(sql: string): string {
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `cms_${statementNames.size}`;
    statementNames.set(sql, name);
  }
  return name;
}

/** A statement with named bindings in PostgreSQL's positional form, its name, and the names in parameter order. */
interface PositionalStatement { text: string; name: string; names: string[] }
/** By the named text, then by the names bound (a name left out stays in the text as it is). */
const positionalStatements = new Map<string, Map<string, PositionalStatement>>();

/** The connection a query of `q` runs on (the unit's, or one of the pool) and its release. */
interface ConnectionSource {
  acquireConnection(): Promise<{ query(config: { name?: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }> }>;
  releaseConnection(connection: unknown): Promise<void>;
}

/**
 * The rows of a read with named bindings (`:name`, as knex.raw takes them) run as a named
 * prepared statement on the connection knex would use (the unit's, or one of the pool), without
 * knex's builder and runner. The text is put in positional form by knex once per text and set of
 * names, not on every call: for a search's statement of 2.5 KB knex's conversion and runner cost
 * more of node's CPU per call than pg's own work (bench/notes/search.md). For the few hottest
 * reads; everything else goes through knex.
 */
export async function preparedRows<R>(q: Knex, sql: string, bindings: Readonly<Record<string, unknown>>): Promise<R[]> {
  return rowsWithoutKnex<R>(q, sql, bindings, true);
}

/**
 * preparedRows' way for a statement that must be planned for its values on every call (a
 * generic plan made for an unknown LIKE pattern could walk a whole index): sent unnamed.
 */
export async function plannedRows<R>(q: Knex, sql: string, bindings: Readonly<Record<string, unknown>>): Promise<R[]> {
  return rowsWithoutKnex<R>(q, sql, bindings, false);
}

async function rowsWithoutKnex<R>(q: Knex, sql: string, bindings: Readonly<Record<string, unknown>>, named: boolean): Promise<R[]> {
  const names = Object.keys(bindings);
  let forms = positionalStatements.get(sql);
  if (!forms) positionalStatements.set(sql, forms = new Map());
  let statement = forms.get(names.join(","));
  if (!statement) {
    // Each name stands for itself, so the bindings knex puts in order are the names.
    const native = q.raw(sql, Object.fromEntries(names.map((n) => [n, n]))).toSQL().toNative();
    statement = { text: native.sql, name: preparedStatementName(native.sql), names: native.bindings as string[] };
    forms.set(names.join(","), statement);
  }
  const values = statement.names.map((n) => bindings[n]);
  if (values.includes(undefined)) throw new Error(`Undefined binding(s) for [${[...new Set(statement.names.filter((n) => bindings[n] === undefined))].join(", ")}] in: ${sql}`);
  // knex refuses a query of a finished transaction, whose connection went back to the pool.
  if ("isCompleted" in q && (q as Knex.Transaction).isCompleted()) throw new Error(`Transaction already finished: ${sql}`);
  const source = q.client as ConnectionSource;
  const connection = await source.acquireConnection();
  try {
    return (await connection.query(named ? { name: statement.name, text: statement.text, values } : { text: statement.text, values })).rows as R[];
  } finally {
    await source.releaseConnection(connection);
  }
}

interface KnexQueryObject { sql: string; options?: Record<string, unknown> }
/** knex's PostgreSQL dialect (the class `client: "pg"` names); it ships no types of its own. */
const KnexPgClient = createRequire(import.meta.url)("knex/lib/dialects/postgres/index.js") as new (config: Knex.Config) => {
  _query(connection: unknown, query: KnexQueryObject): Promise<unknown>;
};

/**
 * knex's PostgreSQL client, naming the statements `prepared()` marked after their SQL text (pg
 * prepares a named statement on a connection the first time, then only binds and executes it).
 * A subclass rather than a patched instance: knex builds each transaction's client from the
 * class's prototype.
 */
class PreparingPgClient extends KnexPgClient {
  override _query(connection: unknown, query: KnexQueryObject): Promise<unknown> {
    if (query.options?.cmsPrepared) query.options = { name: preparedStatementName(query.sql) };
    return super._query(connection, query);
  }
}

export function createDb(databaseUrl: string, schema: string, poolMax: number, settings: SessionSettings = {}): Knex {
  const options = Object.keys(settings).length ? sessionOptions(databaseUrl, settings) : undefined;
  return knexFactory({
    client: PreparingPgClient as unknown as typeof Knex.Client,
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
 * Waiting for that turn is exempt from the pool's lock_timeout (a replica waits as long as the
 * one before it migrates); the migrations' own statements are not, so a migration that cannot
 * lock its table within it fails the start instead of queueing every query of that table behind it.
 */
export async function migrate(knex: Knex, schema: string, migrations: MigrationList): Promise<void> {
  const conn = await knex.client.acquireConnection();
  try {
    await conn.query("SET lock_timeout = 0");
    await conn.query("SELECT pg_advisory_lock(hashtext($1))", [`cms-migrate:${schema}`]);
    try {
      await migrateLocked(knex, schema, migrations);
    } finally {
      await conn.query("SELECT pg_advisory_unlock(hashtext($1))", [`cms-migrate:${schema}`]);
    }
  } finally {
    // Back to the session's own value (its startup options) before the pool has it again; a
    // connection that cannot take it is a broken one, which the pool drops.
    await conn.query("RESET lock_timeout").catch(() => {});
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
    // Serialised across processes: CREATE EXTENSION IF NOT EXISTS races otherwise. Each start
    // waits its turn however long (see migrate).
    await trx.raw("SET LOCAL lock_timeout = 0");
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
