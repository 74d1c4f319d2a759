/**
 * Soak: mixed traffic for a long time (10 minutes by default; `npm run bench -- soak --minutes=2`
 * or SOAK_MINUTES for a shorter run) against the all-in-one system on embedded defaults, started
 * as its own process (`main.ts --target=all`) so that its resident memory and file descriptors
 * are its own. SOAK_CONCURRENCY (default 8) closed-loop workers, each doing in a weighted random
 * mix: reads (collections.list/get, media.list/get), writes (collections.update, text notes),
 * uploads (media.upload, and chunked begin/chunk/finish), deletes (media, and whole collections
 * with their media), and updates of published collections whose webhooks deliver to a local
 * https receiver (a 1 s coalescing window).
 *
 * Every minute: the machine's load average (other work on a shared machine shows here), requests, errors, p50/p99 latency, the server's RSS (/proc/<pid>/status), open
 * file descriptors (/proc/<pid>/fd), database connections (pg_stat_activity) and webhook
 * deliveries received. The verdict compares the later half of the minutes with the earlier half
 * (the first minute is warm-up when there are three or more): latencies by their medians, RSS,
 * fds and connections by their peaks; each figure flat, or FAIL.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync, chmodSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { median, percentile, round, telemetryEnv, type BenchOptions, type Scenario, type ScenarioReport } from "./lib.js";
import { startReceiver } from "../test/helpers/webhook-receiver.js";
import { admin, startTarget } from "../test/helpers/split.js";

const API_KEY = "soak-key";

function minutesArg(): number {
  const arg = process.argv.find((a) => a.startsWith("--minutes="));
  const raw = arg ? arg.slice("--minutes=".length) : process.env.SOAK_MINUTES ?? "10";
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 1 || n > 240) throw new Error(`--minutes must be 1..240, got ${raw}`);
  return Math.round(n);
}

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

function fdsOf(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

interface Minute { minute: number; load: number; requests: number; errors: number; p50: number; p99: number; rssMiB: number; fds: number; dbConnections: number; deliveries: number }

/**
 * The later half against the earlier half: flat when within the allowance. Latencies compare
 * medians; resources compare high-water marks ("max"), since a garbage-collected heap's RSS is a
 * sawtooth whose troughs say nothing: a leak shows as peaks that keep rising.
 */
function flat(rows: Minute[], pick: (m: Minute) => number, allow: (before: number) => number, by: "median" | "max" = "median"): { before: number; after: number; ok: boolean } {
  const use = rows.length >= 3 ? rows.slice(1) : rows;
  const half = Math.floor(use.length / 2) || 1;
  const of = (xs: number[]) => (by === "max" ? Math.max(...xs) : median(xs));
  const before = of(use.slice(0, half).map(pick));
  const after = of(use.slice(-half).map(pick));
  return { before, after, ok: after <= before + allow(before) };
}

async function run(_opts: BenchOptions): Promise<ScenarioReport> {
  const minutes = minutesArg();
  const concurrency = Number(process.env.SOAK_CONCURRENCY ?? 8);
  const receiver = await startReceiver();
  const dataDir = mkdtempSync(join(tmpdir(), "cms-soak-"));
  chmodSync(dataDir, 0o755);
  const env: Record<string, string> = {
    DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "warn", ...telemetryEnv(), GATEWAY_API_KEYS: API_KEY,
    RATE_LIMIT_PER_MINUTE: "100000000", OUTBOUND_ALLOWED_HOSTS: "localhost", WEBHOOK_COALESCE_MS: "1000",
  };
  // The inherited environment, then the soak's own settings; the admin CLI runs with the same.
  const childEnv = { ...process.env, ...env } as Record<string, string>;
  const server = startTarget("all", "all", childEnv);
  const url = (await server.ready.catch((err: Error) => { throw new Error(`${err.message}\n${server.output.slice(-40).join("\n")}`); })).slice("listening on ".length);
  const pid = server.child.pid!;
  const owner = JSON.parse(readFileSync(join(dataDir, "postgres.owner.json"), "utf8")) as { port: number };
  const db = new pg.Client({ connectionString: `postgres://postgres:postgres@127.0.0.1:${owner.port}/cms` });
  await db.connect();
  try {
    const users: string[] = [];
    for (let i = 0; i < concurrency; i++) {
      const name = `soak${i}${randomBytes(2).toString("hex")}`;
      await admin(childEnv, ["user", "create", name, "--plan", "paid"]);
      users.push((await admin(childEnv, ["token", "mint", name])).access_token as string);
    }
    const endpoint = `${url}/functions/v1/thirdparty-v1`;
    let samples: number[] = [];
    let requests = 0;
    let errors = 0;
    const errorCodes: Record<string, number> = {};
    const call = async (token: string, body: Record<string, unknown>): Promise<Record<string, any> | undefined> => {
      const started = performance.now();
      const res = await fetch(endpoint, { method: "POST", headers: { "content-type": "application/json", apikey: API_KEY, authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
      const json = await res.json() as Record<string, any>;
      samples.push(performance.now() - started);
      requests++;
      if (res.status !== 200) {
        errors++;
        const key = `${String(body.op)} ${res.status} ${json.error}`;
        errorCodes[key] = (errorCodes[key] ?? 0) + 1;
        return undefined;
      }
      return json;
    };

    const end = Date.now() + minutes * 60_000;
    const worker = async (token: string, w: number) => {
      const collections: number[] = [];
      // Media ids with their collection, so that removing a collection forgets only its own.
      const media: Array<{ id: number; cid: number }> = [];
      const hooked: number[] = [];
      const newCollection = async (publish: boolean) => {
        const c = await call(token, { op: "collections.create", name: `soak ${w} ${Date.now()}` });
        if (!c) return;
        const id = c.collection.id as number;
        if (publish) {
          await call(token, { op: "collections.publish", collection_id: id, slug: `soak-${id}` });
          await call(token, { op: "collections.webhook_set", collection_id: id, url: receiver.url });
          hooked.push(id);
        } else {
          collections.push(id);
        }
      };
      await newCollection(true);
      await newCollection(false);
      let n = 0;
      while (Date.now() < end) {
        n++;
        const r = Math.random();
        const cid = collections[n % collections.length]!;
        if (r < 0.4) {
          const which = n % 4;
          if (which === 0) await call(token, { op: "collections.list", limit: 50 });
          else if (which === 1) await call(token, { op: "collections.get", collection_id: cid });
          else if (which === 2) await call(token, { op: "media.list", collection_id: cid, limit: 50 });
          else if (media.length) await call(token, { op: "media.get", media_id: media[n % media.length]!.id });
        } else if (r < 0.6) {
          if (n % 2) await call(token, { op: "collections.update", collection_id: cid, description: `v${n}` });
          else {
            const note = await call(token, { op: "media.text_note.add", collection_id: cid, name: `note ${n}`, text: `text ${n}`.repeat(20) });
            if (note) media.push({ id: note.media.id, cid });
          }
        } else if (r < 0.72) {
          const bytes = randomBytes(8 * 1024);
          const up = await call(token, { op: "media.upload", collection_id: cid, filename: `f${n}.bin`, name: `file ${n}`, content_base64: bytes.toString("base64"), content_length: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") });
          if (up) media.push({ id: up.media.id, cid });
        } else if (r < 0.76) {
          const bytes = randomBytes(48 * 1024);
          const begun = await call(token, { op: "media.upload_begin", collection_id: cid, filename: `c${n}.bin`, content_type: "application/octet-stream", content_length: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") });
          if (begun) {
            const size = begun.chunk_bytes as number;
            for (let i = 0; i * size < bytes.length; i++) {
              const part = bytes.subarray(i * size, (i + 1) * size);
              await call(token, { op: "media.upload_chunk", upload_id: begun.upload_id, index: i, content_base64: part.toString("base64"), content_length: part.length });
            }
            const done = await call(token, { op: "media.upload_finish", upload_id: begun.upload_id, content_length: bytes.length });
            if (done?.media) media.push({ id: done.media.id, cid });
          }
        } else if (r < 0.88) {
          if (media.length > 30) await call(token, { op: "media.delete", media_ids: media.splice(0, 5).map((m) => m.id), confirm: true });
          else await call(token, { op: "media.list", collection_id: cid, limit: 10 });
        } else if (r < 0.9) {
          // A collection made and removed with whatever it holds.
          await newCollection(false);
          if (collections.length > 3) {
            const gone = collections.shift()!;
            await call(token, { op: "collections.delete", collection_id: gone, mode: "hard", cascade_media: true, confirm: true });
            for (let i = media.length - 1; i >= 0; i--) if (media[i]!.cid === gone) media.splice(i, 1);
          }
        } else {
          await call(token, { op: "collections.update", collection_id: hooked[0], description: `hooked ${n}` });
        }
      }
    };

    const rows: Minute[] = [];
    const started = Date.now();
    let delivered = 0;
    const sampler = setInterval(async () => {
      const s = Float64Array.from(samples).sort();
      const conns = Number((await db.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'cms' AND pid <> pg_backend_pid()")).rows[0].n);
      const row: Minute = {
        minute: rows.length + 1, load: round(loadavg()[0]!, 1), requests, errors, p50: round(percentile(s, 50), 1), p99: round(percentile(s, 99), 1),
        rssMiB: round(rssOf(pid) / 2 ** 20, 1), fds: fdsOf(pid), dbConnections: conns, deliveries: receiver.received.length - delivered,
      };
      delivered = receiver.received.length;
      samples = [];
      requests = 0;
      errors = 0;
      rows.push(row);
      console.log(`  minute ${row.minute} (machine load ${row.load}): ${row.requests} requests (${row.errors} errors), p50 ${row.p50} ms, p99 ${row.p99} ms, RSS ${row.rssMiB} MiB, fds ${row.fds}, db connections ${row.dbConnections}, webhook deliveries ${row.deliveries}`);
    }, 60_000);
    await Promise.all(users.map((token, w) => worker(token, w)));
    clearInterval(sampler);
    // A last partial minute is left out; the sampler's rows are whole minutes.
    while (rows.length < minutes && Date.now() - started < (minutes + 1) * 60_000) await new Promise((r) => setTimeout(r, 500));

    const checks = {
      p50: flat(rows, (m) => m.p50, (b) => Math.max(2, b * 0.5)),
      p99: flat(rows, (m) => m.p99, (b) => Math.max(10, b * 1.0)),
      rss: flat(rows, (m) => m.rssMiB, (b) => Math.max(32, b * 0.1), "max"),
      fds: flat(rows, (m) => m.fds, () => 10, "max"),
      db_connections: flat(rows, (m) => m.dbConnections, () => 2, "max"),
    };
    const table = [
      "| minute | machine load (1 min) | requests | errors | p50 ms | p99 ms | RSS MiB | fds | db conns | webhook deliveries |",
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
      ...rows.map((m) => `| ${m.minute} | ${m.load} | ${m.requests} | ${m.errors} | ${m.p50} | ${m.p99} | ${m.rssMiB} | ${m.fds} | ${m.dbConnections} | ${m.deliveries} |`),
    ];
    const verdict = Object.entries(checks).map(([k, c]) => `${k} flat (${c.before} -> ${c.after}): ${c.ok ? "PASS" : "FAIL"}`);
    const totalErrors = rows.reduce((a, m) => a + m.errors, 0);
    return {
      scenario: "soak",
      results: [],
      summary: { minutes, concurrency, rows, checks, error_codes: errorCodes, deliveries: receiver.received.length },
      lines: [
        `${minutes} minutes, ${concurrency} workers of mixed traffic against pid ${pid}`,
        ...table,
        `errors: ${totalErrors} (${JSON.stringify(errorCodes)})`,
        `webhook deliveries received: ${receiver.received.length}`,
        ...verdict,
      ],
    };
  } finally {
    await db.end().catch(() => {});
    server.child.kill("SIGTERM");
    await server.exited;
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export const soakScenario: Scenario = {
  name: "soak",
  description: "10 minutes (--minutes=N) of mixed reads, writes, uploads, deletes and webhook deliveries: p50/p99, RSS, fds, db connections per minute, flat or not",
  run,
};
