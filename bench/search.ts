/**
 * Search against a table scan: collections.search (own scope) and media.search through the
 * gateway, each against a bare node:http server running a naive `ILIKE '%word%'` over the name,
 * description and tags of the same rows with plain pg, at four sizes in one embedded database:
 * - 2,000 collections of one user;
 * - 20,000 collections of one user;
 * - 100,000 collections over 1,000 users (100 each; the searcher is one of them);
 * - 50,000 media items of one user (in 200 collections).
 * The probe word is in 1% of each user's rows (in the name, the description or a tag, a third
 * each). Two naive baselines run beside the service, in alternation (naive with total, service,
 * naive first page; BENCH_ROUNDS rounds, default 2), all at 32 connections: the goal's baseline
 * answers what the search answers, a page and the number of matches, so it reads all of the
 * user's rows; the "first page only" one stops at the page's last match (a LIMIT without a
 * total). p95 is read at 8 connections, for the probe and for a common word (about 10%).
 * Goals: the service at least as fast as the naive scan with total and p95 < 50 ms at 8
 * connections, at every size. Prints the EXPLAIN (ANALYZE, BUFFERS) of the service's queries.
 */
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import type { System } from "@cms/platform";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { COLLECTION_COLUMNS, PREPARED_SEARCH_MAX_OWNER_ROWS, searchPlanSql } from "@cms/collections/store/collections-store";
import { MEDIA_COLUMNS, mediaSearchPlanSql } from "@cms/media/store/media-store";
import {
  WORDS, alternate, drive, formatTable, ratioRange, roundRatios, startBareQueryServer, startBenchSystem,
  type BenchOptions, type LoadResult, type Scenario, type ScenarioReport,
} from "./lib.js";

/** In 1% of every user's rows: i % 300 = 37 in the name, 137 in the description, 237 in the tags. */
const PROBE = "zephyr";
/** A vocabulary word: in roughly one row in ten (ranking over many candidates). */
const COMMON = "summer";

/** Rows of `users` (uuid[]) × `perUser`, each user's row i built from i and the user's ordinal. */
const SEED_COLLECTIONS = `
  INSERT INTO collections (user_id, name, description, tags, position)
  SELECT u.uid,
         w[1 + (i * 7 + u.n) % cardinality(w)] || ' ' || w[1 + (i * 13 + u.n * 3) % cardinality(w)] || ' ' || i
           || CASE WHEN i % 300 = 37 THEN ' ${PROBE}' ELSE '' END,
         'Photos of ' || w[1 + (i * 17 + u.n) % cardinality(w)] || ' and ' || w[1 + (i * 29 + u.n) % cardinality(w)] || ' in ' || w[1 + (i * 31) % cardinality(w)]
           || CASE WHEN i % 300 = 137 THEN ' with ${PROBE}' ELSE '' END,
         ARRAY[w[1 + (i * 11) % cardinality(w)], w[1 + (i * 19 + u.n) % cardinality(w)]]
           || CASE WHEN i % 300 = 237 THEN ARRAY['${PROBE}'] ELSE '{}'::text[] END,
         i
  FROM unnest(?::uuid[]) WITH ORDINALITY AS u(uid, n), generate_series(0, ? - 1) AS i, (SELECT ?::text[] AS w) words`;

const SEED_MEDIA = `
  INSERT INTO media (collection_id, owner_user_id, created_by, name, description, tags, main_url, viewer, position)
  SELECT (?::bigint[])[1 + i % 200], ?, ?,
         w[1 + (i * 7) % cardinality(w)] || ' ' || w[1 + (i * 13) % cardinality(w)] || ' ' || i
           || CASE WHEN i % 300 = 37 THEN ' ${PROBE}' ELSE '' END,
         'About ' || w[1 + (i * 17) % cardinality(w)] || ' and ' || w[1 + (i * 29) % cardinality(w)]
           || CASE WHEN i % 300 = 137 THEN ' with ${PROBE}' ELSE '' END,
         ARRAY[w[1 + (i * 11) % cardinality(w)]] || CASE WHEN i % 300 = 237 THEN ARRAY['${PROBE}'] ELSE '{}'::text[] END,
         'inline://text-note', 'text', i / 200
  FROM generate_series(0, ? - 1) i, (SELECT ?::text[] AS w) words`;

/**
 * EXPLAIN (ANALYZE, BUFFERS) of a statement as a named prepared statement runs it: executed six
 * times on one connection first (PostgreSQL plans the first five for their values), then explained.
 */
async function explainPrepared(db: Knex, sql: string, bindings: Record<string, unknown>): Promise<Array<Record<string, string>>> {
  const native = db.raw(sql, bindings).toSQL().toNative();
  const values = native.bindings as Array<string | number>;
  const conn = await db.client.acquireConnection();
  try {
    const name = `bench_explain_${randomUUID().slice(0, 8)}`;
    await conn.query(`PREPARE ${name} AS ${native.sql}`);
    const literals = values.map((v) => (typeof v === "number" ? String(v) : conn.escapeLiteral(String(v)))).join(", ");
    for (let i = 0; i < 6; i++) await conn.query(`EXECUTE ${name}(${literals})`);
    const { rows } = await conn.query(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE ${name}(${literals})`);
    await conn.query(`DEALLOCATE ${name}`);
    return rows;
  } finally {
    await db.client.releaseConnection(conn);
  }
}

/**
 * The media size of this scenario: 50,000 items of one user in 200 collections, "zephyr" in 1% of
 * them (name, description or tags), vacuumed. bench/profile.ts media.search profiles the same.
 */
export async function seedSearchMedia(system: System, userId: string): Promise<void> {
  const collections: number[] = (await system.dbOf("collections")!.raw(
    `INSERT INTO collections (user_id, name, position) SELECT ?, 'Media bench ' || i, i FROM generate_series(0, 199) i RETURNING id`, [userId],
  )).rows.map((r: { id: number }) => Number(r.id));
  const mdb = system.dbOf("media")!;
  await mdb.raw(SEED_MEDIA, [collections, userId, userId, 50000, WORDS]);
  await mdb.raw("VACUUM ANALYZE media");
}

interface Size { name: string; kind: "collections" | "media"; token: string; userId: string; rows: number }

async function run(opts: BenchOptions): Promise<ScenarioReport> {
  const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 2));
  const bench = await startBenchSystem({ DB_POOL_MAX: "16" });
  const { system, endpoint } = bench;
  const bareServers: Array<{ close(): Promise<void> }> = [];
  try {
    const auth = system.clients.get(AuthService);
    const stamp = Date.now().toString(36);
    const newUser = async (name: string) => {
      const { userId } = await auth.createUser({ username: `s${stamp}${name}`, plan: "paid", isAdmin: false });
      const { accessToken } = await auth.mintToken({ username: `s${stamp}${name}`, scopes: [] });
      return { userId, token: accessToken };
    };
    const u2k = await newUser("a");
    const u20k = await newUser("b");
    const uMany = await newUser("c");
    const uMedia = await newUser("d");
    const cdb = system.dbOf("collections")!;
    const mdb = system.dbOf("media")!;
    const seedStart = Date.now();
    await cdb.raw(SEED_COLLECTIONS, [[u2k.userId], 2000, WORDS]);
    await cdb.raw(SEED_COLLECTIONS, [[u20k.userId], 20000, WORDS]);
    // The other 999 users need no account: only their rows share the table and its indexes.
    await cdb.raw(SEED_COLLECTIONS, [[uMany.userId, ...Array.from({ length: 999 }, () => randomUUID())], 100, WORDS]);
    await seedSearchMedia(system, uMedia.userId);
    await cdb.raw("VACUUM ANALYZE collections");
    const seedMs = Date.now() - seedStart;

    const sizes: Size[] = [
      { name: "collections 2k of one user", kind: "collections", ...u2k, rows: 2000 },
      { name: "collections 20k of one user", kind: "collections", ...u20k, rows: 20000 },
      { name: "collections 100k over 1k users", kind: "collections", ...uMany, rows: 100 },
      { name: "media 50k of one user", kind: "media", ...uMedia, rows: 50000 },
    ];

    // The naive scans: the user's rows by their owner index, each row's fields through ILIKE. The
    // goal's baseline answers what the search answers, a page and the number of matches (so it
    // reads all of the user's rows); the "first page" one stops at the page's last match.
    const naive = (table: string, owner: string, cols: string[], limit: number, withTotal: boolean) => (b: Record<string, unknown>): [string, unknown[]] => [
      `SELECT ${cols.join(", ")}${withTotal ? ", count(*) OVER () AS total" : ""} FROM ${table}
       WHERE ${owner} = $1 AND NOT is_deleted AND NOT is_archived${table.endsWith("collections") ? " AND parent_id IS NULL" : ""}
         AND (name ILIKE $2 OR description ILIKE $2 OR array_to_string(tags, ' ') ILIKE $2) LIMIT ${limit}`,
      [b.user_id, `%${String(b.word)}%`],
    ];
    const bare = {
      collections: {
        total: await startBareQueryServer(system.databaseUrl, naive("collections.collections", "user_id", COLLECTION_COLUMNS, 20, true), (rows) => ({ collections: rows })),
        page: await startBareQueryServer(system.databaseUrl, naive("collections.collections", "user_id", COLLECTION_COLUMNS, 20, false), (rows) => ({ collections: rows })),
      },
      media: {
        total: await startBareQueryServer(system.databaseUrl, naive("media.media", "owner_user_id", MEDIA_COLUMNS, 50, true), (rows) => ({ media: rows })),
        page: await startBareQueryServer(system.databaseUrl, naive("media.media", "owner_user_id", MEDIA_COLUMNS, 50, false), (rows) => ({ media: rows })),
      },
    };
    bareServers.push(bare.collections.total, bare.collections.page, bare.media.total, bare.media.page);

    const common = { warmupMs: opts.warmupSeconds * 1000, durationMs: opts.seconds * 1000 };
    const results: LoadResult[] = [];
    const figures: Array<Record<string, unknown>> = [];
    const lines: string[] = [];
    const plans: string[] = [];
    // BENCH_SEARCH_SIZES: run only the sizes whose name contains one of these (comma-separated).
    const only = (process.env.BENCH_SEARCH_SIZES ?? "").split(",").filter(Boolean);
    for (const size of sizes.filter((s) => !only.length || only.some((o) => s.name.includes(o)))) {
      const headers = { ...bench.headers, authorization: `Bearer ${size.token}` };
      const opBody = (word: string) => JSON.stringify(size.kind === "collections"
        ? { op: "collections.search", query: word, limit: 20 }
        : { op: "media.search", query: word, limit: 50 });
      const check = await fetch(endpoint, { method: "POST", headers, body: opBody(PROBE) });
      const checked = await check.json() as Record<string, any>;
      if (check.status !== 200) throw new Error(`${size.name}: ${check.status} ${JSON.stringify(checked)}`);
      const hits = checked.pagination?.total as number;
      const servers = bare[size.kind];
      const naiveBody = JSON.stringify({ user_id: size.userId, word: PROBE });
      const [naiveTotal, service, naivePage] = await alternate([
        { ...common, connections: 32, name: `${size.name}: naive ILIKE, page + total (32 conn)`, url: servers.total.url, body: naiveBody },
        { ...common, connections: 32, name: `${size.name}: ${size.kind}.search (32 conn)`, url: endpoint, headers, body: opBody(PROBE) },
        { ...common, connections: 32, name: `${size.name}: naive ILIKE, first page only (32 conn)`, url: servers.page.url, body: naiveBody },
      ], rounds) as [LoadResult[], LoadResult[], LoadResult[]];
      const at8 = await drive({ ...common, connections: 8, name: `${size.name}: ${size.kind}.search (8 conn)`, url: endpoint, headers, body: opBody(PROBE) });
      const common8 = await drive({ ...common, connections: 8, name: `${size.name}: "${COMMON}" (8 conn)`, url: endpoint, headers, body: opBody(COMMON) });
      for (let r = 0; r < rounds; r++) results.push(naiveTotal[r]!, service[r]!, naivePage[r]!);
      results.push(at8, common8);
      const ratios = roundRatios(service, naiveTotal);
      const pageRatios = roundRatios(service, naivePage);
      const met = Math.min(...ratios) >= 1 && at8.p95Ms < 50;
      figures.push({ size: size.name, hits, ratios, first_page_ratios: pageRatios, p95_8conn_ms: at8.p95Ms, common_p95_8conn_ms: common8.p95Ms, met });
      lines.push(`${size.name}: "${PROBE}" ${hits} hits; service / naive ILIKE (page + total) ${ratioRange(ratios)} (goal >= 1), / naive first page ${ratioRange(pageRatios)}; p95 at 8 conn ${at8.p95Ms.toFixed(1)} ms (goal < 50); "${COMMON}" p95 at 8 conn ${common8.p95Ms.toFixed(1)} ms: ${met ? "PASS" : "FAIL"}`);

      const db = size.kind === "collections" ? cdb : mdb;
      // A collections search is a prepared statement (a small owner's, gated by its count, or a
      // large owner's own): its plan is the generic one, shown as PostgreSQL runs it after the
      // first executions of the statement on a connection.
      const prepared = size.kind === "collections";
      const statement = size.rows <= PREPARED_SEARCH_MAX_OWNER_ROWS ? "gated" : "owner";
      const label = prepared ? ` (prepared, ${statement === "owner" ? "the owner's own statement" : "gated"}, generic plan)` : "";
      for (const word of [PROBE, COMMON]) {
        const [sql, bindings]: [string, any] = prepared ? searchPlanSql(word, size.userId, 20, statement) : mediaSearchPlanSql(word, size.userId, 50);
        const plan = prepared ? await explainPrepared(db, sql, bindings) : (await db.raw(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, bindings)).rows as Array<Record<string, string>>;
        plans.push(`-- ${size.name}, "${word}"${label}:`, ...plan.map((r) => `    ${r["QUERY PLAN"]}`), "");
      }
    }
    return {
      scenario: "search",
      results,
      summary: { seed_ms: seedMs, rounds, sizes: figures, goals: { all_sizes_met: figures.every((f) => f.met) } },
      lines: [`seeded in ${(seedMs / 1000).toFixed(1)} s`, formatTable(results), "", ...lines, "", "EXPLAIN (ANALYZE, BUFFERS) of the service's queries:", ...plans],
    };
  } finally {
    for (const s of bareServers) await s.close();
    await bench.stop();
  }
}

export const searchScenario: Scenario = {
  name: "search",
  description: "collections.search and media.search vs a naive ILIKE scan at 2k, 20k, 100k/1k-user collections and 50k media",
  run,
};
