/**
 * Collections at scale: 100,000 collections across 1,000 users in the embedded PostgreSQL
 * (seeded with SQL), then through the gateway: collections.search (own scope) p95,
 * collections.list (limit 100) p95, and collections.get throughput at 32 connections against a
 * bare node:http server answering the same row from a plain pg query, in the same run.
 * Goals: search p95 < 50 ms, list p95 < 20 ms, get >= 30% of the bare query's throughput.
 * Also prints the EXPLAIN ANALYZE of the search and list queries.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "@cms/platform";
import { startSystem } from "@cms/server";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { WORDS, drive, formatTable, round, startBareQueryServer, telemetryEnv, type BenchOptions, type LoadResult, type Scenario, type ScenarioReport } from "./lib.js";

const API_KEY = "bench-key";
const OP_PATH = "/functions/v1/thirdparty-v1";
const USERS = Number(process.env.BENCH_USERS ?? 1000);
const PER_USER = Number(process.env.BENCH_COLLECTIONS_PER_USER ?? 100);

async function run(opts: BenchOptions): Promise<ScenarioReport> {
  const dataDir = mkdtempSync(join(tmpdir(), "cms-bench-"));
  chmodSync(dataDir, 0o755);
  const env = { DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "warn", ...telemetryEnv(), RATE_LIMIT_PER_MINUTE: "100000000", GATEWAY_API_KEYS: API_KEY, DB_POOL_MAX: "16" };
  const system = await startSystem(loadConfig(env, ["--target=all"]));
  let bare: Awaited<ReturnType<typeof startBareQueryServer>> | undefined;
  let barePage: Awaited<ReturnType<typeof startBareQueryServer>> | undefined;
  try {
    const auth = system.clients.get(AuthService);
    const userIds: string[] = [];
    const stamp = Date.now().toString(36);
    for (let i = 0; i < USERS; i++) userIds.push((await auth.createUser({ username: `b${stamp}_${i}`, plan: "paid", isAdmin: false })).userId);
    const benchUser = `b${stamp}_0`;
    const { accessToken } = await auth.mintToken({ username: benchUser, scopes: [] });
    const db = system.dbOf("collections")!;
    const seedStart = Date.now();
    await db.raw(
      `INSERT INTO collections (user_id, name, description, tags, position)
       SELECT u.uid,
              w[1 + (i * 7 + u.n) % cardinality(w)] || ' ' || w[1 + (i * 13 + u.n * 3) % cardinality(w)] || ' ' || i,
              'Photos of ' || w[1 + (i * 17 + u.n) % cardinality(w)] || ' and ' || w[1 + (i * 29 + u.n) % cardinality(w)] || ' in ' || w[1 + (i * 31) % cardinality(w)],
              ARRAY[w[1 + (i * 11) % cardinality(w)], w[1 + (i * 19 + u.n) % cardinality(w)]],
              i
       FROM unnest(?::uuid[]) WITH ORDINALITY AS u(uid, n), generate_series(0, ? - 1) AS i, (SELECT ?::text[] AS w) words`,
      [userIds, PER_USER, WORDS],
    );
    await db.raw("ANALYZE collections");
    const seedMs = Date.now() - seedStart;
    const owned = await db("collections").where({ user_id: userIds[0] }).orderBy("id").select("id");
    const someId = Number(owned[Math.floor(owned.length / 2)].id);

    const headers = { "content-type": "application/json", apikey: API_KEY, authorization: `Bearer ${accessToken}` };
    const endpoint = `${system.url}${OP_PATH}`;
    const check = await fetch(endpoint, { method: "POST", headers, body: JSON.stringify({ op: "collections.search", query: "montreal" }) });
    if (check.status !== 200) throw new Error(`search answered ${check.status}: ${await check.text()}`);
    bare = await startBareQueryServer(system.databaseUrl, (b) => ["SELECT * FROM collections.collections WHERE id = $1", [b.collection_id]], (rows) => ({ collection: rows[0] }));
    // The same page collections.list answers: the owner's top-level live collections in order.
    barePage = await startBareQueryServer(system.databaseUrl, (b) => [
      "SELECT * FROM collections.collections WHERE user_id = $1 AND parent_id IS NULL AND NOT is_deleted AND NOT is_archived ORDER BY position, id LIMIT 100", [b.user_id],
    ], (rows) => ({ collections: rows }));

    const common = { headers, warmupMs: opts.warmupSeconds * 1000, durationMs: opts.seconds * 1000 };
    const results: LoadResult[] = [];
    const searchBody = JSON.stringify({ op: "collections.search", query: "montreal summer", limit: 20 });
    const listBody = JSON.stringify({ op: "collections.list", limit: 100 });
    // Latency goals are read at one client (no queueing); the 8-client rows show it under load.
    results.push(await drive({ ...common, connections: 1, name: "search own (1 conn)", url: endpoint, body: searchBody }));
    results.push(await drive({ ...common, connections: 1, name: "list limit 100 (1 conn)", url: endpoint, body: listBody }));
    results.push(await drive({ ...common, connections: 8, name: "search own (8 conn)", url: endpoint, body: searchBody }));
    results.push(await drive({ ...common, connections: 8, name: "list limit 100 (8 conn)", url: endpoint, body: listBody }));
    const bareGet = await drive({ ...common, connections: 32, name: "bare pg row (32 conn)", url: bare.url, body: JSON.stringify({ collection_id: someId }) });
    const gwGet = await drive({ ...common, connections: 32, name: "collections.get (32 conn)", url: endpoint, body: JSON.stringify({ op: "collections.get", collection_id: someId }) });
    results.push(bareGet, gwGet);
    const barePageRun = await drive({ ...common, connections: 32, name: "bare pg page of 100 (32 conn)", url: barePage.url, body: JSON.stringify({ user_id: userIds[0] }) });
    const gwList = await drive({ ...common, connections: 32, name: "collections.list limit 100 (32 conn)", url: endpoint, body: listBody });
    results.push(barePageRun, gwList);

    const explain = async (sql: string, bindings: string[]) =>
      ((await db.raw(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) ${sql}`, bindings)).rows as Array<Record<string, string>>).map((r) => `    ${r["QUERY PLAN"]}`);
    const searchPlan = await explain(
      `SELECT c.id FROM collections c WHERE NOT c.is_deleted AND c.parent_id IS NULL AND c.user_id = ? AND NOT c.is_archived
       AND (c.search_text LIKE '%montreal summer%' OR word_similarity('montreal summer', c.search_text) >= 0.5 OR c.search_tsv @@ plainto_tsquery('simple', 'montreal summer'))`, [userIds[0]]);
    const listPlan = await explain(`SELECT * FROM collections WHERE is_deleted = false AND user_id = ? AND parent_id IS NULL AND is_archived = false ORDER BY position, id LIMIT 100`, [userIds[0]]);
    const publicPlan = await explain(
      `SELECT c.id FROM collections c WHERE NOT c.is_deleted AND c.parent_id IS NULL AND c.is_published AND c.share_access_level = 'public' AND NOT c.is_archived AND c.searchable
       AND (c.search_tsv @@ plainto_tsquery('simple', 'montreal') OR lower(immutable_unaccent(c.name)) LIKE '%montreal%')`, []);

    const [search, list] = results as [LoadResult, LoadResult];
    const getRatio = gwGet.throughput / bareGet.throughput;
    const listRatio = gwList.throughput / barePageRun.throughput;
    const goals = {
      search_p95_under_50ms: search.p95Ms < 50,
      list_p95_under_20ms: list.p95Ms < 20,
      get_at_least_30pct_of_bare: getRatio >= 0.3,
    };
    return {
      scenario: "collections",
      results,
      summary: { collections: USERS * PER_USER, users: USERS, seed_ms: seedMs, search_p95_ms: search.p95Ms, list_p95_ms: list.p95Ms, get_vs_bare: round(getRatio, 4), list_vs_bare_page: round(listRatio, 4), goals },
      lines: [
        `seeded ${USERS * PER_USER} collections across ${USERS} users in ${(seedMs / 1000).toFixed(1)} s`,
        formatTable(results),
        "",
        `search own p95 at 1 client ${search.p95Ms.toFixed(2)} ms (goal < 50): ${goals.search_p95_under_50ms ? "PASS" : "FAIL"}`,
        `list limit 100 p95 at 1 client ${list.p95Ms.toFixed(2)} ms (goal < 20): ${goals.list_p95_under_20ms ? "PASS" : "FAIL"}`,
        `collections.get / bare pg: ${(getRatio * 100).toFixed(1)}% (goal >= 30%): ${goals.get_at_least_30pct_of_bare ? "PASS" : "FAIL"}`,
        `collections.list limit 100 / bare pg page of 100: ${(listRatio * 100).toFixed(1)}%`,
        "", "EXPLAIN own-scope search:", ...searchPlan, "", "EXPLAIN list:", ...listPlan, "", "EXPLAIN public-scope search:", ...publicPlan,
      ],
    };
  } finally {
    await bare?.close();
    await barePage?.close();
    await system.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export const collectionsScenario: Scenario = {
  name: "collections",
  description: "search/list p95 and collections.get vs a bare pg query, 100k collections over 1k users",
  run,
};
