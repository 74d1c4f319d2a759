/**
 * What a Connect hop costs in split mode: the same operations through an all-in-one process and
 * through a split system (every service its own process, Connect over HTTP/2 between them,
 * caller assertions signed and verified on every hop), on the same PostgreSQL server and NATS,
 * measured in one run at one connection (latency, no queueing), after an untimed pass of every
 * op on both, alternating the two systems twice so that drift of the machine falls on both. The added p50 per hop is
 * (split p50 - all-in-one p50) / hops, with the hops each op makes:
 * - ping: none (the gateway answers; the gap here is what differs besides hops);
 * - collections.get: gateway -> collections (the token's introspection is cached);
 * - ui.state.get: gateway -> social;
 * - media.list: gateway -> media -> collections (CheckAccess).
 * Goal: added p50 per hop <= 1 ms. Needs PostgreSQL and NATS JetStream (DATABASE_URL, NATS_URL;
 * default the local ones).
 *
 * Latency on a shared machine is mostly waiting for a CPU, and a split hop wakes one more
 * process: each run also reads the CPU time per request of the system's own processes from
 * /proc (PostgreSQL and NATS, shared with whatever else runs, are not counted), so that the
 * work a hop adds is known apart from the wait: (split CPU - all-in-one CPU) / hops.
 */
import { startSplitSystem, mustCall, type SplitSystem } from "../test/helpers/split.js";
import { drive, formatTable, processCpuUs, round, telemetryEnv, type BenchOptions, type LoadResult, type Scenario, type ScenarioReport } from "./lib.js";
import { API_KEY } from "../test/helpers/system.js";
import { measureHopFloor } from "./hop-floor.js";

const FLOOR_NAMES = {
  http2: "node:http2",
  connect: "Connect (connect-node, binary, no interceptors)",
  unary: "Connect (the services' unary transport and fast path, no interceptors)",
} as const;

/** How long each op runs on each system before the first round (when warm-ups are on). */
const PRE_WARM_MS = 3_000;

/** The ops measured, with the Connect hops each makes (bench/profile-split.ts profiles them too). */
export const OPS: Array<{ name: string; hops: number; body: (ids: { collection: number }) => Record<string, unknown> }> = [
  { name: "ping", hops: 0, body: () => ({ op: "ping" }) },
  { name: "collections.get", hops: 1, body: ({ collection }) => ({ op: "collections.get", collection_id: collection }) },
  { name: "ui.state.get", hops: 1, body: () => ({ op: "ui.state.get" }) },
  { name: "media.list", hops: 2, body: ({ collection }) => ({ op: "media.list", collection_id: collection, limit: 20 }) },
];

/** A user with a collection of 20 notes on the system; what the ops need. */
export async function seed(sys: SplitSystem): Promise<{ token: string; collection: number }> {
  const u = await sys.user("bench");
  const must = mustCall(sys, sys.gateways[0]!, u.token);
  const { collection } = await must({ op: "collections.create", name: "Hops" });
  for (let i = 0; i < 20; i++) await must({ op: "media.text_note.add", collection_id: collection.id, name: `n${i}`, text: "x" });
  return { token: u.token, collection: collection.id };
}

/** The JSON endpoint's request of `op` on `sys`, as the seeded user. */
function opRequest(sys: SplitSystem, ids: { token: string; collection: number }, op: (typeof OPS)[number]) {
  return {
    url: `${sys.gateways[0]}/functions/v1/thirdparty-v1`,
    headers: { "content-type": "application/json", apikey: API_KEY, authorization: `Bearer ${ids.token}` },
    body: JSON.stringify(op.body({ collection: ids.collection })),
  };
}

async function run(opts: BenchOptions): Promise<ScenarioReport> {
  process.env.DATABASE_URL ??= "postgres://postgres@127.0.0.1:5432/postgres";
  process.env.NATS_URL ??= "nats://127.0.0.1:4222";
  const common = { warmupMs: opts.warmupSeconds * 1000, durationMs: opts.seconds * 1000, connections: 1 };
  // The floor of a hop on this machine, measured in the same run before the systems start (their
  // idle timers would count in it): what a hop of the service costs beyond the Connect floor is
  // the service's own work per hop.
  const floors = [await measureHopFloor("http2"), await measureHopFloor("connect"), await measureHopFloor("unary")];
  const systems: Array<{ label: string; sys: SplitSystem; ids: { token: string; collection: number } }> = [];
  try {
    for (const [label, allInOne] of [["all-in-one", true], ["split", false]] as const) {
      const sys = await startSplitSystem({ allInOne, env: { LOG_LEVEL: "info", RATE_LIMIT_PER_MINUTE: "100000000", DB_POOL_MAX: "8", ...telemetryEnv() } });
      systems.push({ label, sys, ids: await seed(sys) });
    }
    // Every op on both systems, untimed, before the first round: a process runs its first
    // requests in code V8 has not optimised yet, and the first op measured on the split system
    // paid for its gateway's and its service's (collections.get, the first: split p50 5.86 ms in
    // round 1 against 2.47 in round 2, one run of stop 50's).
    if (common.warmupMs) {
      for (const { sys, ids } of systems) {
        for (const op of OPS) {
          await drive({ ...common, durationMs: PRE_WARM_MS, warmupMs: 0, name: "pre-warm", ...opRequest(sys, ids, op) });
        }
      }
    }
    const results: LoadResult[] = [];
    const p50s = new Map<string, number[]>();
    const cpus = new Map<string, number[]>();
    for (let rnd = 0; rnd < 2; rnd++) {
      for (const { label, sys, ids } of systems) {
        for (const op of OPS) {
          const pids = sys.procs.filter((p) => !p.done).map((p) => p.child.pid!);
          if (common.warmupMs) await drive({ ...common, durationMs: common.warmupMs, warmupMs: 0, name: "warm-up", ...opRequest(sys, ids, op) });
          const cpu0 = processCpuUs(pids);
          const measured = await drive({
            ...common, name: `${op.name} ${label} (round ${rnd + 1})`, ...opRequest(sys, ids, op), warmupMs: 0,
          });
          const r = { ...measured, cpuUsPerReq: round((processCpuUs(pids) - cpu0) / Math.max(1, measured.requests), 1) };
          results.push(r);
          const key = `${op.name}|${label}`;
          p50s.set(key, [...(p50s.get(key) ?? []), r.p50Ms]);
          cpus.set(key, [...(cpus.get(key) ?? []), r.cpuUsPerReq]);
        }
      }
    }
    const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
    const rows = OPS.map((op) => {
      const all = mean(p50s.get(`${op.name}|all-in-one`)!);
      const split = mean(p50s.get(`${op.name}|split`)!);
      const allCpu = mean(cpus.get(`${op.name}|all-in-one`)!);
      const splitCpu = mean(cpus.get(`${op.name}|split`)!);
      return {
        op: op.name, hops: op.hops, all_p50_ms: round(all, 3), split_p50_ms: round(split, 3), added_ms: round(split - all, 3), per_hop_ms: op.hops ? round((split - all) / op.hops, 3) : null,
        all_cpu_us: round(allCpu, 0), split_cpu_us: round(splitCpu, 0), cpu_per_hop_us: op.hops ? round((splitCpu - allCpu) / op.hops, 0) : null,
      };
    });
    const perHop = rows.filter((r) => r.per_hop_ms !== null).map((r) => r.per_hop_ms!);
    const worst = Math.max(...perHop);
    const goals = { added_p50_per_hop_at_most_1ms: worst <= 1 };
    return {
      scenario: "split",
      results,
      summary: { hops: rows, worst_per_hop_ms: worst, hop_floor: floors, goals },
      lines: [
        formatTable(results),
        "",
        "op               hops  all-in-one p50  split p50  added   per hop   CPU µs/req all-in-one  split  per hop",
        ...rows.map((r) => `${r.op.padEnd(16)} ${String(r.hops).padStart(4)}  ${r.all_p50_ms.toFixed(3).padStart(14)}  ${r.split_p50_ms.toFixed(3).padStart(9)}  ${r.added_ms.toFixed(3).padStart(6)}  ${r.per_hop_ms === null ? "     -" : r.per_hop_ms.toFixed(3).padStart(7)}   ${String(r.all_cpu_us).padStart(21)}  ${String(r.split_cpu_us).padStart(5)}  ${r.cpu_per_hop_us === null ? "      -" : String(r.cpu_per_hop_us).padStart(7)}`),
        "",
        ...floors.map((f) => `floor of one hop, bare ${FLOOR_NAMES[f.kind]}: p50 ${f.p50Ms.toFixed(3)} ms, CPU ${f.cpuUsPerCall} µs per call (both processes, ${f.calls} sequential calls)`),
        "",
        `added p50 per Connect hop, worst op: ${worst.toFixed(3)} ms (goal <= 1 ms): ${goals.added_p50_per_hop_at_most_1ms ? "PASS" : "FAIL"}`,
      ],
    };
  } finally {
    for (const { sys } of systems) await sys.stop();
  }
}

export const splitScenario: Scenario = {
  name: "split",
  description: "added p50 latency per Connect hop: the same ops all-in-one and split, same backends, one run",
  run,
};
