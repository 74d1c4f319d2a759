/**
 * Per-request overhead: the cheapest reads through the whole system (gateway admission, schema,
 * Connect dispatch, the service, its query, the answer's JSON) against bare node:http servers
 * answering the same rows from one plain pg query (`SELECT *`, as the collections and media
 * scenarios have always measured), at 32 connections, alternated bare, service, bare, service
 * (BENCH_ROUNDS rounds, default 3; each row warmed for BENCH_WARMUP_SECONDS before it, the first
 * round's for BENCH_FIRST_WARMUP_SECONDS, default 5: the system is fresh then):
 * - collections.get vs the row by id;
 * - collections.list (limit 100) vs the same page of 100 of the user's 200 collections;
 * - media.list (limit 100) vs the same page of 100 of a collection of 1,000 items.
 * Goals: get >= 0.35 of its baseline, both lists >= 0.6, in every round. Each run also reports
 * its CPU per request (this process and the embedded PostgreSQL, bench/lib.ts cpuMeter): the
 * ratio of those is the same comparison, far less disturbed by other work on the machine.
 */
import {
  alternate, cpuMeter, cpuRatios, formatTable, ratioRange, roundRatios, startBareQueryServer, startBenchSystem,
  type BenchOptions, type LoadResult, type Scenario, type ScenarioReport,
} from "./lib.js";

async function run(opts: BenchOptions): Promise<ScenarioReport> {
  const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
  const bench = await startBenchSystem({ DB_POOL_MAX: "16" });
  const { system, userId, headers, endpoint } = bench;
  const servers: Array<{ close(): Promise<void> }> = [];
  try {
    const cdb = system.dbOf("collections")!;
    const ids: number[] = (await cdb.raw(
      `INSERT INTO collections (user_id, name, description, tags, position)
       SELECT ?, 'Collection ' || i, 'Photos of the summer of ' || i, ARRAY['travel', 'summer'], i FROM generate_series(0, 199) i RETURNING id`, [userId],
    )).rows.map((r: { id: number }) => Number(r.id));
    await system.dbOf("media")!.raw(
      `INSERT INTO media (collection_id, owner_user_id, created_by, name, description, tags, main_url, viewer, position)
       SELECT ?, ?, ?, 'Note ' || i, 'About the note ' || i, ARRAY['notes'], 'inline://text-note', 'text', i FROM generate_series(0, 999) i`,
      [ids[0], userId, userId],
    );
    await cdb.raw("VACUUM ANALYZE collections");
    await system.dbOf("media")!.raw("VACUUM ANALYZE media");
    const rowId = ids[100]!;

    const bareRow = await startBareQueryServer(system.databaseUrl, (b) => ["SELECT * FROM collections.collections WHERE id = $1", [b.id]], (rows) => ({ collection: rows[0] }));
    const barePage = await startBareQueryServer(system.databaseUrl, (b) => [
      "SELECT * FROM collections.collections WHERE user_id = $1 AND parent_id IS NULL AND NOT is_deleted AND NOT is_archived ORDER BY position, id LIMIT 100", [b.user_id],
    ], (rows) => ({ collections: rows }));
    const bareMedia = await startBareQueryServer(system.databaseUrl, (b) => [
      "SELECT * FROM media.media WHERE collection_id = $1 AND NOT is_deleted AND NOT is_archived ORDER BY position, id LIMIT 100", [b.id],
    ], (rows) => ({ media: rows }));
    servers.push(bareRow, barePage, bareMedia);

    const common = { connections: 32, warmupMs: opts.warmupSeconds * 1000, durationMs: opts.seconds * 1000 };
    const pairs = [
      { key: "get", goal: 0.35, bare: { ...common, name: "bare pg row by id", url: bareRow.url, body: JSON.stringify({ id: rowId }) }, op: { op: "collections.get", collection_id: rowId } },
      { key: "list", goal: 0.6, bare: { ...common, name: "bare pg page of 100 collections", url: barePage.url, body: JSON.stringify({ user_id: userId }) }, op: { op: "collections.list", limit: 100 } },
      { key: "media_list", goal: 0.6, bare: { ...common, name: "bare pg page of 100 media", url: bareMedia.url, body: JSON.stringify({ id: ids[0] }) }, op: { op: "media.list", collection_id: ids[0], limit: 100 } },
    ];
    const meter = cpuMeter(bench.dataDir);
    const results: LoadResult[] = [];
    const summary: Record<string, unknown> = {};
    const lines: string[] = [];
    let allMet = true;
    for (const p of pairs) {
      await bench.call(p.op);
      const [bare, svc] = await alternate([p.bare, { ...common, name: `${p.op.op}${"limit" in p.op ? " limit 100" : ""}`, url: endpoint, headers, body: JSON.stringify(p.op) }], rounds, meter, opts.firstWarmupSeconds * 1000) as [LoadResult[], LoadResult[]];
      for (let r = 0; r < rounds; r++) results.push(bare[r]!, svc[r]!);
      const ratios = roundRatios(svc, bare);
      const cpu = cpuRatios(svc, bare);
      const met = Math.min(...ratios) >= p.goal;
      allMet &&= met;
      summary[p.key] = { ratios, cpu_ratios: cpu, goal: p.goal, met };
      lines.push(`${p.op.op} / ${p.bare.name}: throughput ${ratioRange(ratios)} over ${rounds} rounds (goal >= ${p.goal}): ${met ? "PASS" : "FAIL"}; CPU per request (node + pg), bare / service: ${ratioRange(cpu)}`);
    }
    return { scenario: "overhead", results, summary: { rounds, ...summary, goals: { all_met: allMet } }, lines: [formatTable(results), "", ...lines] };
  } finally {
    for (const s of servers) await s.close();
    await bench.stop();
  }
}

export const overheadScenario: Scenario = {
  name: "overhead",
  description: "collections.get, collections.list and media.list vs bare pg queries of the same rows, alternated",
  run,
};
