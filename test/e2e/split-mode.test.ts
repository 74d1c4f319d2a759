/**
 * Split mode end to end: every target in its own process (`--target=<t>`), Connect over HTTP/2
 * between them, PostgreSQL and NATS JetStream shared. Needs real backends (DATABASE_URL and
 * NATS_URL, as test/with-backends.ts sets them); skipped otherwise.
 *
 *   node --import tsx test/with-backends.ts ava test/e2e/split-mode.test.ts
 */
import test from "ava";
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { API_KEY, freshDatabase } from "../helpers/system.js";

const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const MAIN = "packages/server/src/main.ts";
const ADMIN = "packages/server/src/admin-cli.ts";
const SERVICES = ["auth", "collections", "media", "social", "webhooks"] as const;
const RATE_LIMIT = 6;
const READY_TIMEOUT_MS = 90_000;
const EXIT_TIMEOUT_MS = 20_000;

/** Configuration variables this test sets itself; inherited values of them are dropped. */
const CONFIG_VARS = [
  "TARGET", "HOST", "PORT", "DATA_DIR", "DATABASE_URL", "DB_POOL_MAX", "NATS_URL", "NATS_STREAM", "NATS_SUBJECT_PREFIX",
  "BASE_URL", "APP_URL", "MCP_URL", "GATEWAY_API_KEYS", "RATE_LIMIT_PER_MINUTE", "LOG_LEVEL", "SERVICE_PORT",
  "AUTH_URL", "COLLECTIONS_URL", "MEDIA_URL", "SOCIAL_URL", "WEBHOOKS_URL", "TOKEN_CACHE_MS", "MAX_BODY_BYTES", "GRANT_SECRET",
  "S3_ENDPOINT", "S3_BUCKET", "S3_REGION", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "S3_FORCE_PATH_STYLE", "S3_PUBLIC_ENDPOINT",
];

interface Proc {
  name: string;
  child: ChildProcess;
  output: string[];
  ready: Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  done: boolean;
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => resolvePort(typeof addr === "object" && addr ? addr.port : 0));
    });
  });
}

function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !CONFIG_VARS.includes(k)) env[k] = v;
  return env;
}

/** Spawns one target; `ready` resolves with its ready line once main.ts logs it. */
function startTarget(name: string, target: string, env: Record<string, string>): Proc {
  const child = spawn(process.execPath, ["--import", "tsx", MAIN, `--target=${target}`], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  const output: string[] = [];
  const proc = { name, child, output, done: false } as Proc;
  proc.exited = new Promise((res) => child.once("exit", (code, signal) => { proc.done = true; res({ code, signal }); }));
  proc.ready = new Promise<string>((res, rej) => {
    const expected = target === "gateway" ? /^listening on / : new RegExp(`^serving ${target} on `);
    let buf = "";
    const onLine = (line: string) => {
      output.push(line);
      if (output.length > 400) output.shift();
      try {
        const msg = JSON.parse(line).msg;
        if (typeof msg === "string" && expected.test(msg)) res(msg);
      } catch { /* not a JSON log line */ }
    };
    child.stdout!.on("data", (d: Buffer) => {
      buf += d.toString("utf8");
      let i;
      while ((i = buf.indexOf("\n")) >= 0) { onLine(buf.slice(0, i)); buf = buf.slice(i + 1); }
    });
    child.stderr!.on("data", (d: Buffer) => { for (const l of d.toString("utf8").split("\n")) if (l) { output.push(`[stderr] ${l}`); if (output.length > 400) output.shift(); } });
    void proc.exited.then(({ code, signal }) => rej(new Error(`${name} exited before it was ready (code ${code}, signal ${signal})`)));
    setTimeout(() => rej(new Error(`${name} did not log its ready line within ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS).unref();
  });
  proc.ready.catch(() => {});
  return proc;
}

/** Runs the admin CLI and parses the JSON object it prints. */
function admin(env: Record<string, string>, args: string[]): Promise<Record<string, any>> {
  return new Promise((res, rej) => {
    execFile(process.execPath, ["--import", "tsx", ADMIN, ...args], { cwd: ROOT, env, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) { rej(new Error(`admin ${args.join(" ")} failed: ${err.message}\n${stderr}`)); return; }
      try { res(JSON.parse(stdout.trim().split("\n").pop()!)); } catch { rej(new Error(`admin ${args.join(" ")} printed no JSON: ${stdout}\n${stderr}`)); }
    });
  });
}

async function call(gatewayUrl: string, token: string | undefined, body: Record<string, unknown>) {
  const headers: Record<string, string> = { "content-type": "application/json", apikey: API_KEY };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${gatewayUrl}/functions/v1/thirdparty-v1`, { method: "POST", headers, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  let parsed: any;
  try { parsed = JSON.parse(text); } catch { parsed = { raw: text }; }
  return { status: res.status, body: parsed, headers: res.headers };
}

const enabled = Boolean(process.env.DATABASE_URL && process.env.NATS_URL);

if (!enabled) {
  test.skip("split mode end to end (skipped: needs DATABASE_URL and NATS_URL; run with test/with-backends.ts)", () => {});
} else {
  test("split mode: six processes over HTTP/2, shared PostgreSQL rate limit, clean SIGTERM", async (t) => {
    t.timeout(180_000);
    const id = randomBytes(4).toString("hex");
    const procs: Proc[] = [];
    const dataDir = mkdtempSync(join(tmpdir(), "cms-split-"));
    chmodSync(dataDir, 0o755);
    const db = await freshDatabase(process.env.DATABASE_URL!);
    const stream = `CMS_SPLIT_${id}`;
    t.teardown(async () => {
      for (const p of procs) if (!p.done) p.child.kill("SIGKILL");
      await Promise.all(procs.map((p) => Promise.race([p.exited, sleep(5000)])));
      await db.drop().catch((err) => t.log(`dropping the database failed: ${err}`));
      try {
        const { connect } = await import("@nats-io/transport-node");
        const { jetstreamManager } = await import("@nats-io/jetstream");
        const nc = await connect({ servers: process.env.NATS_URL, timeout: 5000 });
        const jsm = await jetstreamManager(nc);
        await jsm.streams.delete(stream).catch(() => {});
        await nc.close();
      } catch (err) {
        t.log(`deleting NATS stream ${stream} failed: ${err}`);
      }
      rmSync(dataDir, { recursive: true, force: true });
    });
    const diagnostics = () => procs.map((p) => `--- ${p.name} (exited: ${p.done}) ---\n${p.output.slice(-40).join("\n")}`).join("\n");

    const ports: Record<string, number> = {};
    for (const s of SERVICES) ports[s] = await freePort();
    const gatewayPorts = [await freePort(), await freePort()];
    const common: Record<string, string> = {
      ...baseEnv(),
      HOST: "127.0.0.1",
      DATABASE_URL: db.url,
      NATS_URL: process.env.NATS_URL!,
      NATS_STREAM: stream,
      NATS_SUBJECT_PREFIX: `cmssplit.${id}`,
      DATA_DIR: dataDir,
      GATEWAY_API_KEYS: API_KEY,
      // Grants signed by one process verify in another only with one shared secret.
      GRANT_SECRET: randomBytes(32).toString("base64url"),
      RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT),
      // main.ts logs its ready line at info; at warn there would be nothing to wait for.
      LOG_LEVEL: "info",
      OTEL_SDK_DISABLED: "true",
    };
    for (const s of SERVICES) common[`${s.toUpperCase()}_URL`] = `http://127.0.0.1:${ports[s]}`;
    if (process.env.S3_ENDPOINT) {
      for (const k of ["S3_ENDPOINT", "S3_REGION", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "S3_FORCE_PATH_STYLE"]) {
        if (process.env[k]) common[k] = process.env[k]!;
      }
      common.S3_BUCKET = `cms-split-${id}`;
    }

    // Services first, then the gateways one after the other (each migrates the gateway schema).
    try {
      for (const s of SERVICES) procs.push(startTarget(s, s, { ...common, SERVICE_PORT: String(ports[s]) }));
      await Promise.all(procs.map((p) => p.ready));
      const gwA = startTarget("gateway-a", "gateway", { ...common, PORT: String(gatewayPorts[0]) });
      procs.push(gwA);
      await gwA.ready;
      const gwB = startTarget("gateway-b", "gateway", { ...common, PORT: String(gatewayPorts[1]) });
      procs.push(gwB);
      await gwB.ready;
    } catch (err) {
      t.fail(`${(err as Error).message}\n${diagnostics()}`);
      return;
    }
    const [urlA, urlB] = gatewayPorts.map((p) => `http://127.0.0.1:${p}`) as [string, string];

    // Users and tokens through the admin CLI, on the same database.
    const cliEnv = { ...common, LOG_LEVEL: "warn" };
    const [alice, bob, carol, dave] = await Promise.all(["alice", "bob", "carol", "dave"].map((n) => admin(cliEnv, ["user", "create", `${n}_${id}`, "--plan", "paid"])));
    t.is(alice!.username, `alice_${id}`);
    const [aliceTok, readerTok, bobTok, carolTok, daveTok] = await Promise.all([
      admin(cliEnv, ["token", "mint", alice!.username]),
      admin(cliEnv, ["token", "mint", alice!.username, "--scopes", "media:read"]),
      admin(cliEnv, ["token", "mint", bob!.username]),
      admin(cliEnv, ["token", "mint", carol!.username]),
      admin(cliEnv, ["token", "mint", dave!.username]),
    ]);
    const token = aliceTok!.access_token as string;
    t.truthy(token);

    // Calls by alice stay under the limit (each op that passes the scope check counts).
    const ping = await call(urlA, token, { op: "ping" });
    t.is(ping.status, 200, JSON.stringify(ping.body));
    t.is(ping.body.user?.username, alice!.username);

    const ops = await call(urlA, token, { op: "operations.list" });
    t.is(ops.status, 200);
    t.true(ops.body.operations.some((o: { name: string }) => o.name === "bookmarks.list"));

    const denied = await call(urlB, readerTok!.access_token, { op: "collections.get", collection_id: 1 });
    t.is(denied.status, 403);
    t.is(denied.body.error, "insufficient_scope");
    t.is(denied.body.need, "collections:read");

    // bookmarks.list is served by the social service, which has no handler for it yet: Connect
    // "unimplemented" from the service process, over HTTP/2, gives 501 not_implemented. Once the
    // handler exists, a 200 with the list proves the same route.
    const viaService = await call(urlB, token, { op: "bookmarks.list" });
    if (viaService.status === 501) {
      t.is(viaService.body.error, "not_implemented");
    } else {
      t.is(viaService.status, 200, JSON.stringify(viaService.body));
      t.true(Array.isArray(viaService.body.bookmarks));
    }

    // Service-to-service calls over HTTP/2 (dave stays under the limit of 6):
    // collections.create; media.text_note.add (media asks collections' CheckAccess);
    // collections.export (collections asks media); collections.publish (collections asks social).
    const daveToken = daveTok!.access_token as string;
    const created = await call(urlA, daveToken, { op: "collections.create", name: "Split" });
    t.is(created.status, 200, JSON.stringify(created.body));
    const cid = created.body.collection.id;
    const noted = await call(urlB, daveToken, { op: "media.text_note.add", collection_id: cid, name: "across processes", text: "hi" });
    t.is(noted.status, 200, JSON.stringify(noted.body));
    const exported = await call(urlA, daveToken, { op: "collections.export", collection_id: cid });
    t.is(exported.status, 200, JSON.stringify(exported.body));
    t.deepEqual(exported.body.media.map((m: { name: string }) => m.name), ["across processes"]);
    // A stored file whose key has a cover's name: adopting it as a media source makes the media
    // service ask the collections service (CoverStoreKeys) whether it is a cover; it is not.
    // (Dave's six calls are the rate limit's budget for a minute.)
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    const uploaded = await call(urlA, daveToken, { op: "media.upload", collection_id: cid, filename: "cover.webp", content_base64: png, content_length: Buffer.from(png, "base64").length });
    t.is(uploaded.status, 200, JSON.stringify(uploaded.body));
    t.regex(uploaded.body.media.main_url, /_cover\.webp$/);
    const adopted = await call(urlB, daveToken, { op: "media.create", collection_id: cid, source_url: uploaded.body.media.main_url });
    t.is(adopted.status, 200, JSON.stringify(adopted.body));
    const published = await call(urlB, daveToken, { op: "collections.publish", collection_id: cid, slug: "split" });
    t.is(published.status, 200, JSON.stringify(published.body));
    t.is(published.body.collection.publish_handle, dave!.username);

    // The rate limit lives in PostgreSQL: calls through both gateways count against one budget.
    // Windows are fixed minutes; start a burst well inside one, and retry once with a fresh
    // user if the window still rolled over during it.
    let checked = false;
    for (const user of [bobTok!.access_token as string, carolTok!.access_token as string]) {
      const left = 60_000 - (Date.now() % 60_000);
      if (left < 15_000) await sleep(left + 250);
      const window = Math.floor(Date.now() / 60_000);
      const statuses: number[] = [];
      for (let i = 0; i < RATE_LIMIT; i++) statuses.push((await call(i % 2 ? urlB : urlA, user, { op: "ping" })).status);
      const overA = await call(urlA, user, { op: "ping" });
      const overB = await call(urlB, user, { op: "ping" });
      if (Math.floor(Date.now() / 60_000) !== window) { t.log("rate-limit window rolled over during the burst; retrying"); continue; }
      t.deepEqual(statuses, Array(RATE_LIMIT).fill(200));
      t.is(overA.status, 429);
      t.is(overA.body.error, "rate_limited");
      t.truthy(overA.headers.get("retry-after"));
      t.is(overB.status, 429);
      checked = true;
      break;
    }
    t.true(checked, "the shared rate limit was checked inside one window");

    // Orderly shutdown: every process exits 0 on SIGTERM.
    for (const p of procs) p.child.kill("SIGTERM");
    const exits = await Promise.all(procs.map((p) => Promise.race([p.exited, sleep(EXIT_TIMEOUT_MS).then(() => "timeout" as const)])));
    exits.forEach((e, i) => {
      const p = procs[i]!;
      if (e === "timeout") t.fail(`${p.name} did not exit within ${EXIT_TIMEOUT_MS} ms of SIGTERM\n${p.output.slice(-20).join("\n")}`);
      else t.is(e.code, 0, `${p.name} exited with code ${e.code} (signal ${e.signal})\n${p.output.slice(-20).join("\n")}`);
    });
  });
}
