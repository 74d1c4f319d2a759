/**
 * Media catalogue at scale, through the gateway on the all-in-one embedded system:
 * media.list (limit 100) p95 on a collection of 10,000 items, media.search p95 across a user's
 * 200 collections and 50,000 items, and thumbnail generation throughput (media.thumbnail_finalize
 * of a 2000x1500 JPEG: read, two WebP sizes, store, update) against sharp called directly on
 * the same image in the same run, with the pipeline's store work alone (no database) beside
 * them as its floor. Goals: list p95 < 20 ms, search p95 < 50 ms, thumbnail pipeline >= 80% of
 * bare sharp.
 */
import sharp from "sharp";
import { createContextValues } from "@connectrpc/connect";
import { actAsKey, mediaThumbnails, readObject } from "@cms/platform";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { startBenchSystem, startBareQueryServer, type BenchSystem, cpuMeter, drive, formatTable, ratioRange, round, type BenchOptions, type LoadResult, type Scenario, type ScenarioReport } from "./lib.js";

// A vocabulary of 20 common words plus 1,200 rarer ones (syllable pairs), so that one query is
// common (about 5% of items) and one is selective (a fraction of a percent), as in real catalogues.
const COMMON = "alpha beta gamma delta report invoice holiday beach summer winter recipe pasta guitar lesson budget draft sketch poster logo photo".split(" ");
const SYLLABLES = "ka lo mi ru ten vas pol dre sin ura bex fon gil hup jor kel mun nax oti pre qua ris sul tov".split(" ");
const RARE = SYLLABLES.flatMap((a) => SYLLABLES.flatMap((b) => SYLLABLES.slice(0, 2).map((c) => `${a}${b}${c}`)));
const WORDS = [...COMMON, ...RARE];

/** The thumbnails' source: a 2000x1500 JPEG (bench/profile.ts thumbnail_finalize uses it too). */
export function thumbnailSource(): Promise<Buffer> {
  return sharp({ create: { width: 2000, height: 1500, channels: 3, background: "#4477aa" } })
    .composite([{ input: Buffer.from(`<svg width="2000" height="1500"><circle cx="1000" cy="750" r="600" fill="#ffcc00"/></svg>`) }]).jpeg({ quality: 90 }).toBuffer();
}

/**
 * MediaService.FinalizeThumbnail as the bench user, over the in-process Connect transport (access
 * check through the collections service, store read, sharp, two WebP writes, row update, outbox,
 * cleanup of the replaced objects): one job per item of `mediaIds` at a time, each finalizing its
 * own item (jobs on one item would measure their wait for each other's writes of its row, not
 * the pipeline), take the stored `sources` until `end` (or until none is left); resolves with
 * the number finalized.
 */
export function finalizer(bench: BenchSystem, mediaIds: number[]): (sources: string[], end: number) => Promise<number> {
  const media = bench.system.clients.get(MediaService);
  const asUser = createContextValues().set(actAsKey, { userId: bench.userId, username: bench.username, plan: "paid", isAdmin: false, scopes: ["media:write"], tokenId: "bench" });
  return async (sources, end) => {
    let n = 0;
    await Promise.all(mediaIds.map(async (mediaId) => {
      while (Date.now() < end && sources.length) {
        await media.finalizeThumbnail({ mediaId: BigInt(mediaId), thumbnailUrl: sources.pop()! }, { contextValues: asUser });
        n++;
      }
    }));
    return n;
  };
}

/** `count` text notes in a new collection, the items the thumbnail jobs finalize. */
export async function thumbnailTargets(bench: BenchSystem, count: number): Promise<{ collectionId: number; mediaIds: number[] }> {
  const collectionId = (await bench.call({ op: "collections.create", name: "thumbnails" })).collection.id as number;
  const mediaIds: number[] = [];
  for (let i = 0; i < count; i++) mediaIds.push((await bench.call({ op: "media.text_note.add", collection_id: collectionId, name: `thumb target ${i}` })).media.id as number);
  return { collectionId, mediaIds };
}

async function run(opts: BenchOptions): Promise<ScenarioReport> {
  const bench = await startBenchSystem({ DB_POOL_MAX: "16" });
  const { system, userId, headers, endpoint, call } = bench;
  try {

    // Thumbnails first, on the fresh system: after the seed below, PostgreSQL's autovacuum and
    // checkpointer work through 50,000 new rows for a while, on the same two cores.
    // The same 2000x1500 JPEG, through the pipeline and through bare sharp, alternated.
    const jpeg = await thumbnailSource();
    const thumbSeconds = Math.max(3, opts.seconds);
    const THUMB_ROUNDS = 3;
    // Both sides run the same number of concurrent jobs; 4 keeps the two cores busy while a
    // pipeline job waits on the store or the database.
    const THUMB_WORKERS = 4;
    const { collectionId: thumbCollection, mediaIds: noteIds } = await thumbnailTargets(bench, THUMB_WORKERS);
    const key = `store://${userId}/${thumbCollection}/bench_src`;
    const meter = cpuMeter(bench.dataDir);
    /** Images a second over the window, and CPU (this process and PostgreSQL) per image. */
    const metered = async (work: (end: number) => Promise<number>) => {
      const c0 = meter.read();
      const started = Date.now();
      const n = await work(started + thumbSeconds * 1000);
      const c1 = meter.read();
      return { rate: n / ((Date.now() - started) / 1000), cpuMsPerImage: (c1.nodeUs - c0.nodeUs + c1.pgUs - c0.pgUs) / n / 1000 };
    };
    const bareSharp = () => metered(async (end) => {
      let n = 0;
      const worker = async () => { while (Date.now() < end) { await mediaThumbnails(Buffer.from(jpeg)); n++; } };
      await Promise.all(Array.from({ length: THUMB_WORKERS }, () => worker()));
      return n;
    });
    // The server's own pipeline, without the HTTP client and the source upload of the loop below:
    // MediaService.FinalizeThumbnail over the in-process Connect transport (access check through
    // the collections service, store read, sharp, two WebP writes, row update, outbox, cleanup of
    // the replaced objects), on sources stored before the window.
    const finalize = finalizer(bench, noteIds);
    let sourceSeq = 0;
    /** `count` fresh copies of the source in the store (finalizing consumes its source). */
    const storedSources = async (count: number) => {
      const sources = Array.from({ length: count }, () => `${key}.svc.${sourceSeq++}.jpg`);
      for (const src of sources) await system.store.put(src, jpeg, { contentType: "image/jpeg" });
      return sources;
    };
    // A round's sources at 48 images a second: a faster pipeline ends its round early, and its rate
    // is taken over the time it ran.
    const servicePipeline = async () => {
      const sources = await storedSources(THUMB_WORKERS * 60);
      return metered((end) => finalize(sources, end));
    };
    // The pipeline's floor without the database: what it does with the store besides sharp (the
    // source read, the two WebP objects written and synced, the source and the pair it replaces
    // removed). The pipeline's distance from it is the database's part (the item, the access
    // check, the unit of work, the outbox's relay and consumers); its distance from bare sharp is
    // the store's.
    const storeShare = async () => {
      const sources = await storedSources(THUMB_WORKERS * 60);
      return metered(async (end) => {
        let n = 0;
        await Promise.all(Array.from({ length: THUMB_WORKERS }, async () => {
          let replaced: string[] = [];
          while (Date.now() < end && sources.length) {
            const src = sources.pop()!;
            const { thumbnail, background } = await mediaThumbnails((await readObject(system.store, src))!);
            const pair = [`${src}.thumb.webp`, `${src}.bg.webp`];
            await Promise.all([
              system.store.put(pair[0]!, thumbnail, { contentType: "image/webp", contentLength: thumbnail.length }),
              system.store.put(pair[1]!, background, { contentType: "image/webp", contentLength: background.length }),
            ]);
            await system.store.delete([src, ...replaced]);
            replaced = pair;
            n++;
          }
        }));
        return n;
      });
    };
    // End to end: finalizing consumes the uploaded source (it is replaced by the WebP pair), so
    // each round stores a fresh source first; that write counts against the pipeline.
    const pipeline = async () => {
      const end = Date.now() + thumbSeconds * 1000;
      let n = 0;
      const worker = async (w: number) => {
        for (let i = 0; Date.now() < end; i++) {
          const src = `${key}.${w}.${i}.jpg`;
          await system.store.put(src, jpeg, { contentType: "image/jpeg" });
          await call({ op: "media.thumbnail_finalize", media_id: noteIds[w], thumbnail_url: src });
          n++;
        }
      };
      await Promise.all(Array.from({ length: THUMB_WORKERS }, (_, w) => worker(w)));
      return n / thumbSeconds;
    };
    // Both sides warmed before the rounds. The pipeline's JavaScript (the store, knex and pg, the
    // Connect transport, the outbox and its consumers) runs a few times an image, so V8 optimizes
    // it only after some hundreds of images: measured from the first image, the rounds counted the
    // JIT's warm-up as the pipeline's cost (V8's own share of the CPU samples during the rounds, by
    // perf: 12.6% after one image, 7.6% after 30 s of images; bench/notes/transfers.md, stop 31).
    // One image each first (what loads and compiles the code); BENCH_THUMB_WARMUP_SECONDS=0
    // stops there, as the scenario did before.
    const warmSeconds = Number(process.env.BENCH_THUMB_WARMUP_SECONDS ?? 20);
    await mediaThumbnails(jpeg);
    await finalize(await storedSources(1), Infinity);
    if (warmSeconds > 0) {
      await finalize(await storedSources(Math.ceil(warmSeconds * 12 * THUMB_WORKERS)), Date.now() + warmSeconds * 1000);
      await bareSharp();
    }
    type Metered = Awaited<ReturnType<typeof metered>>;
    const thumbRounds: Array<{ bare: Metered; store: Metered; service: Metered }> = [];
    for (let r = 0; r < THUMB_ROUNDS; r++) thumbRounds.push({ bare: await bareSharp(), store: await storeShare(), service: await servicePipeline() });
    const pipeRate = await pipeline();
    const thumbRatios = thumbRounds.map((x) => round(x.service.rate / x.bare.rate, 4));
    const storeShareRatios = thumbRounds.map((x) => round(x.store.rate / x.bare.rate, 4));
    const thumbCpuRatios = thumbRounds.map((x) => round(x.bare.cpuMsPerImage / x.service.cpuMsPerImage, 4));
    const bareRate = thumbRounds.reduce((a, x) => a + x.bare.rate, 0) / THUMB_ROUNDS;
    const serviceRate = thumbRounds.reduce((a, x) => a + x.service.rate, 0) / THUMB_ROUNDS;

    // 200 collections; the first holds 10,000 items, the other 199 share 40,000.
    const seedStart = Date.now();
    const cdb = system.dbOf("collections")!;
    const ids: number[] = (await cdb.raw(
      `INSERT INTO collections (user_id, name, position) SELECT ?, 'Bench collection ' || i, i FROM generate_series(0, 199) i RETURNING id`, [userId],
    )).rows.map((r: { id: number }) => Number(r.id));
    const mdb = system.dbOf("media")!;
    await mdb.raw(
      `INSERT INTO media (collection_id, owner_user_id, created_by, name, description, tags, main_url, viewer, position)
       SELECT CASE WHEN i < 10000 THEN (?::bigint[])[1] ELSE (?::bigint[])[2 + (i % 199)] END, ?, ?,
              w[1 + i % 20] || ' ' || w[21 + (i * 7) % (cardinality(w) - 20)] || ' ' || i,
              'About ' || w[21 + (i * 13) % (cardinality(w) - 20)] || ' and ' || w[1 + (i * 3) % 20],
              ARRAY[w[1 + (i * 5) % 20]],
              'inline://text-note', 'text',
              CASE WHEN i < 10000 THEN i ELSE (i - 10000) / 199 END
       FROM generate_series(0, 49999) i, (SELECT ?::text[] AS w) words`,
      [ids, ids, userId, userId, WORDS],
    );
    // Vacuumed as well, as the overhead and search scenarios are: a long-lived table is kept
    // vacuumed by autovacuum, and media.list's total is an index-only count only on pages the
    // visibility map knows all-visible (right after a bulk insert every row is a heap fetch).
    await mdb.raw("VACUUM ANALYZE media");
    const seedMs = Date.now() - seedStart;

    const common = { headers, warmupMs: opts.warmupSeconds * 1000, durationMs: opts.seconds * 1000 };
    const results: LoadResult[] = [];
    const listBody = JSON.stringify({ op: "media.list", collection_id: ids[0], limit: 100, offset: 5000 });
    const searchBody = JSON.stringify({ op: "media.search", query: RARE[37], limit: 50 });
    const commonSearchBody = JSON.stringify({ op: "media.search", query: "holiday", limit: 50 });
    results.push(await drive({ ...common, connections: 1, name: "media.list 10k, first page (1 conn)", url: endpoint, body: JSON.stringify({ op: "media.list", collection_id: ids[0], limit: 100 }) }));
    results.push(await drive({ ...common, connections: 1, name: "media.list 10k, offset 5000 (1 conn)", url: endpoint, body: listBody }));
    results.push(await drive({ ...common, connections: 1, name: "media.search 50k items (1 conn)", url: endpoint, body: searchBody }));
    results.push(await drive({ ...common, connections: 1, name: "media.search common word (1 conn)", url: endpoint, body: commonSearchBody }));
    results.push(await drive({ ...common, connections: 8, name: "media.list (8 conn)", url: endpoint, body: listBody }));
    results.push(await drive({ ...common, connections: 8, name: "media.search (8 conn)", url: endpoint, body: searchBody }));
    // Throughput of the first page of 100 against a bare pg query of the same page, 32 connections.
    const barePage = await startBareQueryServer(system.databaseUrl, (b) => [
      "SELECT * FROM media.media WHERE collection_id = $1 AND NOT is_deleted AND NOT is_archived ORDER BY position, id LIMIT 100", [b.collection_id],
    ], (rows) => ({ media: rows }));
    let barePageRun: LoadResult, gwList: LoadResult;
    try {
      barePageRun = await drive({ ...common, connections: 32, name: "bare pg page of 100 (32 conn)", url: barePage.url, body: JSON.stringify({ collection_id: ids[0] }) });
      gwList = await drive({ ...common, connections: 32, name: "media.list limit 100 (32 conn)", url: endpoint, body: JSON.stringify({ op: "media.list", collection_id: ids[0], limit: 100 }) });
    } finally {
      await barePage.close();
    }
    results.push(barePageRun, gwList);
    const listRatio = gwList.throughput / barePageRun.throughput;

    const explain = async (sql: string, bindings: Array<string | number>) =>
      ((await mdb.raw(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) ${sql}`, bindings)).rows as Array<Record<string, string>>).map((r) => `    ${r["QUERY PLAN"]}`);
    const listPlan = await explain(`SELECT * FROM media WHERE collection_id = ? AND is_deleted = false AND is_archived = false ORDER BY position, id LIMIT 100 OFFSET 5000`, [ids[0]!]);
    const searchPlan = await explain(`SELECT * FROM media WHERE is_deleted = false AND is_archived = false AND owner_user_id = ? AND viewer <> 'collection'
      AND (search_text LIKE ? OR tags && ARRAY[?]) ORDER BY updated_at DESC, id DESC LIMIT 50`, [userId, `%${RARE[37]}%`, RARE[37]!]);

    const [list, deepList, search] = results as [LoadResult, LoadResult, LoadResult];
    const thumbRatio = Math.min(...thumbRatios);
    const endToEndRatio = pipeRate / bareRate;
    const goals = { list_p95_under_20ms: list.p95Ms < 20, search_p95_under_50ms: search.p95Ms < 50, thumbnails_at_least_80pct_of_bare: thumbRatio >= 0.8 };
    return {
      scenario: "media",
      results,
      summary: { items: 50000, collections: 200, seed_ms: seedMs, list_p95_ms: list.p95Ms, list_offset_5000_p95_ms: deepList.p95Ms, search_p95_ms: search.p95Ms, thumbnails_per_s: round(serviceRate, 2), thumbnails_end_to_end_per_s: round(pipeRate, 2), bare_sharp_per_s: round(bareRate, 2), thumbnails_vs_bare: thumbRatios, store_share_vs_bare: storeShareRatios, thumbnails_warmup_s: warmSeconds, thumbnails_cpu_bare_over_service: thumbCpuRatios, list_vs_bare_page: round(listRatio, 4), goals },
      lines: [
        `seeded 50000 media across 200 collections (10000 in one) in ${(seedMs / 1000).toFixed(1)} s`,
        formatTable(results),
        "",
        `thumbnails (2000x1500 JPEG, ${THUMB_WORKERS} concurrent jobs each, ${THUMB_ROUNDS} alternated rounds of ${thumbSeconds} s after a ${warmSeconds} s warm-up of both sides, before the seed):`,
        ...thumbRounds.map((x, i) => `  round ${i + 1}: bare sharp ${x.bare.rate.toFixed(2)}/s (${x.bare.cpuMsPerImage.toFixed(1)} ms CPU an image), the store's share alone ${x.store.rate.toFixed(2)}/s (${x.store.cpuMsPerImage.toFixed(1)} ms), media service pipeline ${x.service.rate.toFixed(2)}/s (${x.service.cpuMsPerImage.toFixed(1)} ms CPU with PostgreSQL's): ${thumbRatios[i]!.toFixed(3)}`,
        ),
        `  the store's share alone (source read, sharp, two synced WebP writes, the source and the replaced pair removed; no database) / bare sharp: ${ratioRange(storeShareRatios)}`,
        `  pipeline / bare sharp: ${ratioRange(thumbRatios)} (goal >= 0.8 in every round): ${goals.thumbnails_at_least_80pct_of_bare ? "PASS" : "FAIL"}; CPU an image, bare / pipeline: ${ratioRange(thumbCpuRatios)}`,
        `  end to end (source PUT into the store + media.thumbnail_finalize over HTTP from this process): ${pipeRate.toFixed(2)}/s = ${(endToEndRatio * 100).toFixed(1)}% of bare sharp`,
        `media.list p95 at 1 client, first page ${list.p95Ms.toFixed(2)} ms (goal < 20): ${goals.list_p95_under_20ms ? "PASS" : "FAIL"}; at offset 5000 ${deepList.p95Ms.toFixed(2)} ms`,
        `media.search p95 at 1 client ${search.p95Ms.toFixed(2)} ms (goal < 50): ${goals.search_p95_under_50ms ? "PASS" : "FAIL"}`,
        `media.list limit 100 / bare pg page of 100 at 32 connections: ${(listRatio * 100).toFixed(1)}%`,
        "", "EXPLAIN list:", ...listPlan, "", "EXPLAIN search:", ...searchPlan,
      ],
    };
  } finally {
    await bench.stop();
  }
}

export const mediaScenario: Scenario = {
  name: "media",
  description: "media.list/search p95 at 10k/50k items and thumbnail pipeline vs bare sharp",
  run,
};
