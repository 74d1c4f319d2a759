/**
 * Shared pieces of the benchmarks: a closed-loop HTTP load driver (C concurrent keep-alive
 * clients, a warm-up, then a fixed measuring window), latency statistics and table output.
 *
 * The driver runs in a child process (bench/load-client.ts) so that the load generator does
 * not share an event loop with the system under test, which usually runs in the bench process.
 * Every loop is bounded both in time (the window) and in count (maxRequests).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { spawn } from "node:child_process";
import fs from "node:fs";
import { fileURLToPath } from "node:url";

/** The vocabulary the collections and search scenarios seed their names, descriptions and tags from. */
export const WORDS = ("alpine amber autumn beach berlin birds bridges cabin canyon castle cats cedar city coast coffee " +
  "concert desert design dogs dunes forest garden glacier harbor hiking island jazz kyoto lakes lisbon market " +
  "meadow montreal mountain museum night ocean orchard paris portrait prague rain recipes river roads rome ruins " +
  "sailing sketches snow spring street summer sunset temple tokyo trains travel valley vienna vintage winter " +
  "wedding wildlife").split(" ");

export interface LoadSpec {
  /** Row name in the result table. */
  name: string;
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  connections: number;
  warmupMs: number;
  durationMs: number;
  /** Hard cap on requests per phase, so a loop can never run away. */
  maxRequests?: number;
  /** Per-request timeout. */
  timeoutMs?: number;
}

export interface LoadResult {
  name: string;
  requests: number;
  errors: number;
  /** Count of responses by HTTP status (measuring window only). */
  statuses: Record<string, number>;
  seconds: number;
  throughput: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface BenchOptions {
  seconds: number;
  connections: number;
  warmupSeconds: number;
  /** The warm-up of each row of a freshly started system's first round of alternated rows (`alternate`). */
  firstWarmupSeconds: number;
}

/** A benchmark scenario: a module in bench/ exporting one of these, registered in run.ts. */
export interface Scenario {
  name: string;
  description: string;
  run(opts: BenchOptions): Promise<ScenarioReport>;
}

export interface ScenarioReport {
  scenario: string;
  results: LoadResult[];
  /** Derived figures (ratios, goals) for the JSON summary. */
  summary: Record<string, unknown>;
  /** Extra lines printed under the table. */
  lines: string[];
}

export function benchOptions(env: Record<string, string | undefined> = process.env): BenchOptions {
  const num = (name: string, def: number, min: number, max: number) => {
    const raw = env[name];
    if (raw === undefined || raw === "") return def;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || n > max) throw new Error(`${name} must be a number in ${min}..${max}, got "${raw}"`);
    return n;
  };
  return {
    seconds: num("BENCH_SECONDS", 5, 0.5, 600),
    connections: Math.round(num("BENCH_CONNECTIONS", 32, 1, 1024)),
    warmupSeconds: num("BENCH_WARMUP_SECONDS", 1, 0, 60),
    firstWarmupSeconds: num("BENCH_FIRST_WARMUP_SECONDS", 5, 0, 120),
  };
}

/** The p-th percentile (0..100) of sorted values, nearest-rank. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (!sorted.length) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

interface PhaseOutcome { requests: number; errors: number; statuses: Record<string, number>; latencies: Float64Array; seconds: number }

/** One closed-loop phase in this process: `connections` clients, each waiting for its answer. */
async function phase(spec: LoadSpec, agent: http.Agent, durationMs: number): Promise<PhaseOutcome> {
  const maxRequests = spec.maxRequests ?? 5_000_000;
  const latencies = new Float64Array(maxRequests);
  const statuses: Record<string, number> = {};
  let requests = 0;
  let errors = 0;
  const url = new URL(spec.url);
  const body = spec.body === undefined ? undefined : Buffer.from(spec.body);
  const headers: Record<string, string | number> = { ...spec.headers };
  if (body) headers["content-length"] = body.length;
  const start = performance.now();
  const deadline = start + durationMs;

  const once = () => new Promise<number>((resolve) => {
    const req = http.request({
      agent, host: url.hostname, port: url.port, path: url.pathname + url.search,
      method: spec.method ?? (body ? "POST" : "GET"), headers, timeout: spec.timeoutMs ?? 10_000,
    }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", () => resolve(-1));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", () => resolve(-1));
    req.end(body);
  });

  const client = async () => {
    while (performance.now() < deadline && requests + errors < maxRequests) {
      const t0 = performance.now();
      const status = await once();
      const t1 = performance.now();
      if (t1 > deadline) break; // answered after the window closed: not counted
      if (status < 0) { errors++; continue; }
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (requests < maxRequests) latencies[requests] = t1 - t0;
      requests++;
    }
  };
  await Promise.all(Array.from({ length: spec.connections }, client));
  const seconds = Math.min(performance.now(), deadline) - start;
  return { requests, errors, statuses, latencies: latencies.subarray(0, requests), seconds: seconds / 1000 };
}

/** Runs warm-up plus measuring window in the current process. */
export async function driveInProcess(spec: LoadSpec): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: spec.connections });
  try {
    if (spec.warmupMs > 0) await phase(spec, agent, spec.warmupMs);
    const m = await phase(spec, agent, spec.durationMs);
    const sorted = Float64Array.from(m.latencies).sort();
    const ok = Object.entries(m.statuses).filter(([s]) => s.startsWith("2")).reduce((a, [, n]) => a + n, 0);
    return {
      name: spec.name,
      requests: m.requests,
      errors: m.errors + (m.requests - ok),
      statuses: m.statuses,
      seconds: round(m.seconds, 3),
      throughput: round(m.requests / m.seconds, 1),
      p50Ms: round(percentile(sorted, 50), 3),
      p95Ms: round(percentile(sorted, 95), 3),
      p99Ms: round(percentile(sorted, 99), 3),
      maxMs: round(sorted.length ? sorted[sorted.length - 1]! : NaN, 3),
    };
  } finally {
    agent.destroy();
  }
}

/**
 * Runs a client script of bench/ in a child process (its own event loop and RSS): `input` as
 * JSON on its stdin, its last stdout line parsed as the result; killed after `limitMs`.
 */
function runClient<T>(script: string, input: unknown, limitMs: number, what: string): Promise<T> {
  const entry = fileURLToPath(new URL(script, import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", entry], { stdio: ["pipe", "pipe", "inherit"] });
    let out = "";
    const timer = setTimeout(() => { child.kill("SIGKILL"); reject(new Error(`${what} ran over ${limitMs} ms`)); }, limitMs);
    child.stdout.on("data", (d: Buffer) => { out += d.toString("utf8"); });
    child.on("error", (err) => { clearTimeout(timer); reject(err); });
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (code !== 0) { reject(new Error(`${what} exited with ${code}`)); return; }
      try { resolve(JSON.parse(out.trim().split("\n").pop()!)); } catch { reject(new Error(`${what} printed no result: ${out}`)); }
    });
    child.stdin.end(JSON.stringify(input));
  });
}

/** Runs the load in a child process (bench/load-client.ts) and returns its result. */
export function drive(spec: LoadSpec): Promise<LoadResult> {
  return runClient("./load-client.ts", spec, spec.warmupMs + spec.durationMs + 60_000, `load client for ${spec.name}`);
}

/** Runs one job of bench/transfer-client.ts in a child process; its JSON result. */
export function transferClient<T>(job: Record<string, unknown>): Promise<T> {
  return runClient("./transfer-client.ts", job, 600_000, `transfer client (${String(job.kind)})`);
}

export function round(n: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export function formatTable(results: MeteredResult[], baseline?: LoadResult): string {
  const metered = results.some((r) => r.nodeCpuUsPerReq !== undefined);
  const head = ["name", "requests", "errors", "req/s", "p50 ms", "p95 ms", "p99 ms", ...(metered ? ["node µs/req", "pg µs/req"] : []), ...(baseline ? ["vs " + baseline.name] : [])];
  const rows = results.map((r) => [
    r.name, String(r.requests), String(r.errors), r.throughput.toFixed(1), r.p50Ms.toFixed(2), (r.p95Ms ?? 0).toFixed(2), r.p99Ms.toFixed(2),
    ...(metered ? [r.nodeCpuUsPerReq?.toFixed(0) ?? "", r.pgCpuUsPerReq?.toFixed(0) ?? ""] : []),
    ...(baseline ? [`${((r.throughput / baseline.throughput) * 100).toFixed(1)}%`] : []),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(head), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** The all-in-one system of a scenario: embedded defaults on a temporary DATA_DIR, one paid user. */
export interface BenchSystem {
  system: import("@cms/platform").System;
  /** The temporary DATA_DIR (the embedded PostgreSQL is under dataDir/postgres). */
  dataDir: string;
  userId: string;
  username: string;
  /** Headers of an authenticated op call (API key and bearer token). */
  headers: Record<string, string>;
  /** The op endpoint's URL. */
  endpoint: string;
  /** An op call that must answer 200; its JSON body. */
  call(body: Record<string, unknown>): Promise<Record<string, any>>;
  stop(): Promise<void>;
}

export const BENCH_API_KEY = "bench-key";

/**
 * The telemetry settings of every system a bench starts: the bench's own OTEL_* variables (e.g.
 * OTEL_SDK_DISABLED=true, or an exporter's endpoint), else the service's default (the SDK on, no
 * exporter). The SDK reads process.env, the service's config the env it is given: both get the
 * same values.
 */
export function telemetryEnv(): Record<string, string> {
  const own = Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith("OTEL_") && e[1] !== undefined);
  return { OTEL_SDK_DISABLED: "false", ...Object.fromEntries(own) };
}

export async function startBenchSystem(extraEnv: Record<string, string> = {}): Promise<BenchSystem> {
  const { chmodSync, mkdtempSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const { loadConfig } = await import("@cms/platform");
  const { startSystem } = await import("@cms/server");
  const { AuthService } = await import("@cms/contracts/auth/v1/auth_pb");
  const dataDir = mkdtempSync(join(tmpdir(), "cms-bench-"));
  // As root the embedded PostgreSQL runs as the postgres OS user, which must enter DATA_DIR.
  chmodSync(dataDir, 0o755);
  const env = {
    DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "warn", ...telemetryEnv(),
    RATE_LIMIT_PER_MINUTE: "100000000", GATEWAY_API_KEYS: BENCH_API_KEY, ...extraEnv,
  };
  const system = await startSystem(loadConfig(env, ["--target=all"]));
  const auth = system.clients.get(AuthService);
  const username = `b${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const { userId } = await auth.createUser({ username, plan: "paid", isAdmin: false });
  const { accessToken } = await auth.mintToken({ username, scopes: [] });
  const headers = { "content-type": "application/json", apikey: BENCH_API_KEY, authorization: `Bearer ${accessToken}` };
  const endpoint = `${system.url}/functions/v1/thirdparty-v1`;
  return {
    system, dataDir, userId, username, headers, endpoint,
    async call(body) {
      const res = await fetch(endpoint, { method: "POST", headers, body: JSON.stringify(body) });
      const json = await res.json() as Record<string, any>;
      if (res.status !== 200) throw new Error(`${String(body.op)}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    },
    async stop() {
      await system.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A bare baseline: a node:http server that answers each POST with the JSON of one plain `pg`
 * query (no gateway, no validation, no RPC), built from the request body by `query`.
 */
export async function startBareQueryServer(databaseUrl: string, query: (body: Record<string, unknown>) => [string, unknown[]], wrap: (rows: unknown[]) => unknown): Promise<{ url: string; close(): Promise<void> }> {
  const pg = (await import("pg")).default;
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 8 });
  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const [sql, params] = query(JSON.parse(Buffer.concat(chunks).toString()));
      pool.query(sql, params).then(({ rows }) => {
        const body = JSON.stringify(wrap(rows));
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
        res.end(body);
      }, (err) => { res.writeHead(500); res.end(String(err)); });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: async () => { await new Promise<void>((r) => { server.close(() => r()); server.closeAllConnections(); }); await pool.end(); },
  };
}

/**
 * CPU time spent by this process (the system under test and the bare servers: the load clients
 * are child processes) and by the embedded PostgreSQL's processes, read from /proc. Per request
 * it is far less disturbed by other work on a shared machine than throughput is: a run that
 * waits for the CPU does less work, not more per request.
 */
export interface CpuMeter { read(): { nodeUs: number; pgUs: number } }

/** Microseconds per clock tick of /proc/<pid>/stat (USER_HZ is 100 on Linux). */
const TICK_US = 1e6 / 100;

/**
 * The fields of /proc/<pid>/stat after the command name, or undefined once the process is gone:
 * f[1] ppid, f[11] utime, f[12] stime, f[13] cutime, f[14] cstime in ticks (fields 4, 14-17 of proc(5)).
 */
function procStat(pid: number | string): string[] | undefined {
  let stat: string;
  try { stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8"); } catch { return undefined; }
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

export function cpuMeter(dataDir?: string): CpuMeter {
  let postmaster: number | undefined;
  try { postmaster = dataDir ? Number(fs.readFileSync(`${dataDir}/postgres/postmaster.pid`, "utf8").split("\n")[0]) : undefined; } catch { postmaster = undefined; }
  const pgUs = () => {
    if (!postmaster) return 0;
    let sum = 0;
    for (const pid of fs.readdirSync("/proc")) {
      if (!/^\d+$/.test(pid)) continue;
      const f = procStat(pid);
      if (!f) continue;
      // The postmaster's children that exited count in its cutime and cstime.
      if (Number(pid) === postmaster) sum += (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICK_US;
      else if (Number(f[1]) === postmaster) sum += (Number(f[11]) + Number(f[12])) * TICK_US;
    }
    return sum;
  };
  return { read: () => { const u = process.cpuUsage(); return { nodeUs: u.user + u.system, pgUs: pgUs() }; } };
}

/** The median of unsorted figures (percentile 50: the lower middle of an even count); 0 of none. */
export function median(xs: number[]): number {
  return xs.length ? percentile([...xs].sort((a, b) => a - b), 50) : 0;
}

/** CPU time (user + system, µs) the processes have used so far, read from /proc; gone ones count 0. */
export function processCpuUs(pids: number[]): number {
  let sum = 0;
  for (const pid of pids) {
    const f = procStat(pid);
    if (f) sum += (Number(f[11]) + Number(f[12])) * TICK_US;
  }
  return sum;
}

/** A load result with the CPU per request the run cost (see cpuMeter). */
export type MeteredResult = LoadResult & { nodeCpuUsPerReq?: number; pgCpuUsPerReq?: number };

/**
 * The warm-up of a spec in round `r` of `alternate`: the first round's is at least
 * `firstWarmupMs`. A system started just before its first round runs its path unoptimized for a
 * while: on a slow machine V8 had not optimized collections.get's after the usual 1 s (the first
 * round's service at 1,352 µs of node's CPU a request against 417-874 in the others; at 401-451 in
 * every round after 5 s, bench/notes/overhead.md, stop 43), and a round measured that warm-up.
 */
export function warmupOf(spec: Pick<LoadSpec, "warmupMs">, r: number, firstWarmupMs: number): number {
  return r === 0 ? Math.max(spec.warmupMs, firstWarmupMs) : spec.warmupMs;
}

/**
 * Runs the specs one after the other (A,B,C,A,B,C...), `rounds` times, so that drift of a shared
 * machine falls on every side; results[i][r] is spec i in round r. Compare within a round. With
 * a meter, each result also carries its CPU per request (warm-up included in neither). Each
 * spec's warm-up in the first round is at least `firstWarmupMs` (warmupOf).
 */
export async function alternate(specs: LoadSpec[], rounds = 2, meter?: CpuMeter, firstWarmupMs = 0): Promise<MeteredResult[][]> {
  const out: MeteredResult[][] = specs.map(() => []);
  for (let r = 0; r < rounds; r++) {
    for (const [i, specOfRounds] of specs.entries()) {
      const spec = { ...specOfRounds, warmupMs: warmupOf(specOfRounds, r, firstWarmupMs) };
      const name = `${spec.name} #${r + 1}`;
      if (!meter) { out[i]!.push(await drive({ ...spec, name })); continue; }
      if (spec.warmupMs > 0) await drive({ ...spec, name, durationMs: spec.warmupMs, warmupMs: 0 });
      const before = meter.read();
      const res: MeteredResult = await drive({ ...spec, name, warmupMs: 0 });
      const after = meter.read();
      const n = Math.max(1, res.requests);
      res.nodeCpuUsPerReq = round((after.nodeUs - before.nodeUs) / n, 1);
      res.pgCpuUsPerReq = round((after.pgUs - before.pgUs) / n, 1);
      out[i]!.push(res);
    }
  }
  return out;
}

/** Per round, the CPU per request (this process + PostgreSQL) of `baseline` over that of `subject`: 1 means as cheap. */
export function cpuRatios(subject: MeteredResult[], baseline: MeteredResult[]): number[] {
  const cost = (r: MeteredResult) => (r.nodeCpuUsPerReq ?? NaN) + (r.pgCpuUsPerReq ?? NaN);
  return subject.map((s, r) => round(cost(baseline[r]!) / cost(s), 4));
}

/** Per round, the throughput of `subject` over that of `baseline` (same round). */
export function roundRatios(subject: LoadResult[], baseline: LoadResult[]): number[] {
  return subject.map((s, r) => round(s.throughput / baseline[r]!.throughput, 4));
}

/** "0.41-0.47" from ratios (the range, never one best value). */
export function ratioRange(ratios: number[]): string {
  const lo = Math.min(...ratios);
  const hi = Math.max(...ratios);
  return lo === hi ? lo.toFixed(2) : `${lo.toFixed(2)}-${hi.toFixed(2)}`;
}
