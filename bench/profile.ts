/**
 * CPU profile of the all-in-one system under one operation's load:
 * `node --max-semi-space-size=32 --import tsx bench/profile.ts <case> [seconds] [--flame]` (the heap flag
 * as production starts node, see package.json), cases below. Starts the system in this
 * process (embedded defaults), seeds what the case needs, drives 32 connections from a child
 * process (bench/lib.ts drive) and profiles this process during the measuring window only
 * (node:inspector), then writes the .cpuprofile (open it in Chrome DevTools or speedscope) and
 * prints the top frames by self time and the top by total time; with --flame, also a flame graph
 * of it as a PNG beside it (bench/flame-graph.ts). PostgreSQL's own CPU is not in it.
 */
import { Session } from "node:inspector/promises";
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { finalizer, thumbnailSource, thumbnailTargets } from "./media.js";
import { seedSearchMedia } from "./search.js";
import { startBenchSystem, drive, transferClient, type BenchSystem } from "./lib.js";
import { summarize, type CpuProfile } from "./cpu-profile.js";
import { renderFlameGraphs } from "./flame-graph.js";

/** One bench/transfer-client.ts job; its result as a JSON line. */
const transferLine = async (job: Record<string, unknown>) => JSON.stringify(await transferClient(job));

/**
 * A case seeds what its operation needs and returns the op body driven at 32 connections, or
 * runs its own workload (`work`, profiled whole instead of the load).
 */
interface Case { seed(b: BenchSystem): Promise<Record<string, unknown>>; work?(b: BenchSystem, body: Record<string, unknown>): Promise<string> }

const seedCollections = async (b: BenchSystem, n: number) => {
  await b.system.dbOf("collections")!.raw(
    `INSERT INTO collections (user_id, name, description, tags, position)
     SELECT ?, 'Collection ' || i || CASE WHEN i % 100 = 37 THEN ' zephyr' ELSE '' END, 'Photos of summer ' || i, ARRAY['travel'], i FROM generate_series(0, ? - 1) i`,
    [b.userId, n],
  );
  await b.system.dbOf("collections")!.raw("VACUUM ANALYZE collections");
  return Number((await b.system.dbOf("collections")!.raw("SELECT min(id) AS id FROM collections WHERE user_id = ?", [b.userId])).rows[0].id);
};

const CASES: Record<string, Case> = {
  ping: { seed: async () => ({ op: "ping" }) },
  "collections.get": { seed: async (b) => ({ op: "collections.get", collection_id: await seedCollections(b, 200) }) },
  "collections.list": { seed: async (b) => { await seedCollections(b, 200); return { op: "collections.list", limit: 100 }; } },
  "collections.search": { seed: async (b) => { await seedCollections(b, 2000); return { op: "collections.search", query: "zephyr", limit: 20 }; } },
  // An owner of 100 collections: the prepared statement of small owners.
  "collections.search.small": { seed: async (b) => { await seedCollections(b, 100); return { op: "collections.search", query: "zephyr", limit: 20 }; } },
  // A write: the unit of work (row lock, update, outbox), the relay's pass and the event's consumers.
  "collections.update": { seed: async (b) => ({ op: "collections.update", collection_id: await seedCollections(b, 200), description: "Updated by the profile" }) },
  // A 25MB chunked upload with 1 MiB chunks, one at a time (bench transfers).
  "upload_chunk": {
    seed: async (b) => ({ collection_id: await seedCollections(b, 1) }),
    work: async (b, body) => transferLine({ kind: "chunked", endpoint: b.endpoint, headers: b.headers, collectionId: body.collection_id, size: 25 * 1024 * 1024, chunkBytes: 1024 * 1024 }),
  },
  // A 25MB byte_upload_url PUT, three times.
  "put": {
    seed: async (b) => ({ collection_id: await seedCollections(b, 1) }),
    work: async (b, body) => {
      const out: string[] = [];
      for (let i = 0; i < 3; i++) {
        const u = await b.call({ op: "media.get_upload_url", collection_id: body.collection_id, filename: `p${i}.bin`, content_type: "application/octet-stream", content_length: 25 * 1024 * 1024 });
        out.push(await transferLine({ kind: "put", url: u.byte_upload_url, contentType: "application/octet-stream", size: 25 * 1024 * 1024 }));
      }
      return out.join(" ");
    },
  },
  // media.thumbnail_finalize of bench media's source image, four jobs at a time for 5 s, over the
  // in-process Connect transport as bench media's pipeline rounds run it.
  "thumbnail_finalize": {
    seed: async (b) => {
      const { collectionId, mediaIds } = await thumbnailTargets(b, 4);
      return { collection_id: collectionId, media_ids: mediaIds };
    },
    work: async (b, body) => {
      const jpeg = await thumbnailSource();
      const sources = Array.from({ length: 400 }, (_, i) => `store://${b.userId}/${String(body.collection_id)}/p${Date.now()}_${i}.jpg`);
      for (const s of sources) await b.system.store.put(s, jpeg, { contentType: "image/jpeg" });
      const n = await finalizer(b, body.media_ids as number[])(sources, Date.now() + 5000);
      return `${(n / 5).toFixed(1)} images/s`;
    },
  },
  // media.search of bench search's probe word over its media size (50,000 items of one user).
  "media.search": {
    seed: async (b) => {
      await seedSearchMedia(b.system, b.userId);
      return { op: "media.search", query: "zephyr", limit: 50 };
    },
  },
  "media.list": {
    seed: async (b) => {
      const id = await seedCollections(b, 1);
      await b.system.dbOf("media")!.raw(
        `INSERT INTO media (collection_id, owner_user_id, created_by, name, description, tags, main_url, viewer, position)
         SELECT ?, ?, ?, 'Note ' || i, 'About ' || i, ARRAY['x'], 'inline://text-note', 'text', i FROM generate_series(0, 999) i`, [id, b.userId, b.userId]);
      await b.system.dbOf("media")!.raw("VACUUM ANALYZE media");
      return { op: "media.list", collection_id: id, limit: 100 };
    },
  },
};

const { values: flags, positionals } = parseArgs({ allowPositionals: true, options: { flame: { type: "boolean", default: false } } });
const name = positionals[0] ?? "";
const seconds = Number(positionals[1] ?? 8);
const c = CASES[name];
if (!c) { console.error(`usage: bench/profile.ts <case> [seconds] [--flame]; cases: ${Object.keys(CASES).join(", ")}`); process.exit(2); }
const b = await startBenchSystem({ DB_POOL_MAX: "16" });
try {
  const seeded = await c.seed(b);
  const body = JSON.stringify(seeded);
  if (!c.work) await b.call(seeded);
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 200 });
  let said: string;
  let profile;
  if (c.work) {
    await c.work(b, seeded);
    await session.post("Profiler.start");
    said = await c.work(b, seeded);
    ({ profile } = await session.post("Profiler.stop"));
  } else {
    // Warm-up first, unprofiled.
    await drive({ name, url: b.endpoint, headers: b.headers, body, connections: 32, warmupMs: 0, durationMs: 2000 });
    await session.post("Profiler.start");
    const result = await drive({ name, url: b.endpoint, headers: b.headers, body, connections: 32, warmupMs: 0, durationMs: seconds * 1000 });
    ({ profile } = await session.post("Profiler.stop"));
    said = `${result.throughput} req/s, p50 ${result.p50Ms} ms`;
  }
  const file = `/tmp/${name}-${Date.now()}.cpuprofile`;
  writeFileSync(file, JSON.stringify(profile));
  console.log(`${name}: ${said}; profile ${file}`);
  const cpu = profile as unknown as CpuProfile;
  console.log(summarize(cpu).join("\n"));
  if (flags.flame) {
    const png = file.replace(/\.cpuprofile$/, ".png");
    await renderFlameGraphs([{ profile: cpu, out: png, name: `${name}: ${said}` }]);
    console.log(`flame graph (busy samples, speedscope's left-heavy view): ${png}`);
  }
} finally {
  await b.stop();
}
