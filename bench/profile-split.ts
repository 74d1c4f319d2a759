/**
 * CPU profiles of every process of a split system under one of bench/split.ts's operations, at
 * one connection as that scenario measures them:
 * `node --import tsx bench/profile-split.ts <op> [seconds] [--flame]` (op: ping, collections.get,
 * ui.state.get, media.list). Starts a split system on PostgreSQL and NATS (DATABASE_URL and
 * NATS_URL, default the local ones) with bench/profile-hook.mjs loaded into each process, seeds
 * it as the scenario does, warms it up for 15 s (a split system's code settles after a few
 * windows), then profiles every process over the window: SIGUSR2 to start, SIGUSR2 to stop and
 * write. Prints each process's busy CPU a request and top frames; with --flame, draws each
 * profile as a flame graph PNG beside it (bench/flame-graph.ts). The load client and PostgreSQL
 * are not profiled.
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startSplitSystem } from "../test/helpers/split.js";
import { API_KEY } from "../test/helpers/system.js";
import { busyMicros, summarize, type CpuProfile } from "./cpu-profile.js";
import { renderFlameGraphs, type FlameGraph } from "./flame-graph.js";
import { drive, telemetryEnv } from "./lib.js";
import { OPS, seed } from "./split.js";

const HOOK = fileURLToPath(new URL("./profile-hook.mjs", import.meta.url));
const WARMUP_MS = 15_000;

const { values: flags, positionals } = parseArgs({ allowPositionals: true, options: { flame: { type: "boolean", default: false } } });
const op = OPS.find((o) => o.name === positionals[0]);
const seconds = Number(positionals[1] ?? 10);
if (!op) { console.error(`usage: bench/profile-split.ts <op> [seconds] [--flame]; ops: ${OPS.map((o) => o.name).join(", ")}`); process.exit(2); }
process.env.DATABASE_URL ??= "postgres://postgres@127.0.0.1:5432/postgres";
process.env.NATS_URL ??= "nats://127.0.0.1:4222";

const dir = mkdtempSync(join(tmpdir(), `cms-split-profile-${op.name}-`));
const sys = await startSplitSystem({
  env: { LOG_LEVEL: "info", RATE_LIMIT_PER_MINUTE: "100000000", DB_POOL_MAX: "8", ...telemetryEnv(), NODE_OPTIONS: `--import ${HOOK}`, CMS_PROFILE_DIR: dir },
});
try {
  const ids = await seed(sys);
  const load = {
    name: op.name, url: `${sys.gateways[0]}/functions/v1/thirdparty-v1`, connections: 1, warmupMs: 0,
    headers: { "content-type": "application/json", apikey: API_KEY, authorization: `Bearer ${ids.token}` },
    body: JSON.stringify(op.body({ collection: ids.collection })),
  };
  await drive({ ...load, durationMs: WARMUP_MS });
  const procs = sys.procs.filter((p) => !p.done);
  for (const p of procs) p.child.kill("SIGUSR2");
  const result = await drive({ ...load, durationMs: seconds * 1000 });
  for (const p of procs) p.child.kill("SIGUSR2");
  const files = procs.map((p) => join(dir, `${p.child.pid}.cpuprofile`));
  for (let waited = 0; !files.every((f) => existsSync(f)); waited += 100) {
    if (waited > 30_000) throw new Error(`profiles missing after 30 s: ${files.filter((f) => !existsSync(f)).join(", ")}`);
    await sleep(100);
  }
  console.log(`${op.name} (${op.hops} hops), split, 1 connection: ${result.requests} requests, ${result.throughput} req/s, p50 ${result.p50Ms} ms; profiles in ${dir}`);
  const graphs: FlameGraph[] = [];
  for (const [i, file] of files.entries()) {
    const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
    const perRequest = Math.round(busyMicros(profile) / Math.max(1, result.requests));
    console.log(`\n== ${procs[i]!.name}: busy ${perRequest} µs a request (${file})`);
    console.log(summarize(profile, 15, 0).join("\n"));
    graphs.push({ profile, out: join(dir, `${procs[i]!.name}.png`), name: `${op.name}, split: ${procs[i]!.name}, ${perRequest} µs a request` });
  }
  if (flags.flame) {
    await renderFlameGraphs(graphs);
    console.log(`\nflame graphs: ${graphs.map((g) => g.out).join(", ")}`);
  }
} finally {
  await sys.stop();
}
