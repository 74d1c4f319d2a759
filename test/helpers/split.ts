/**
 * A whole system in split mode for tests: every service target in its own process
 * (`--target=<t>`), gateways in front, Connect over HTTP/2 between them, one fresh PostgreSQL
 * database, NATS JetStream stream and S3 bucket (when the run has one), removed by stop().
 * Needs real backends (DATABASE_URL and NATS_URL, as test/with-backends.ts sets them).
 */
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { createDb, freePorts, generateCallerKeyPem, waitForConsumers, waitForOutbox } from "@cms/platform";
import { createAuth, createAuthStore } from "@cms/auth";
import { API_KEY, DATABASE_TEMPLATE_ENV, freshDatabase, withJetStream } from "./system.js";
import { nodeArgsOf, ROOT } from "./paths.js";

const MAIN = "packages/server/src/main.ts";
const ADMIN = "packages/server/src/admin-cli.ts";

/**
 * Node's arguments that run one of the project's TypeScript entry points: through tsx, or, with
 * TEST_RUN_DIST=1 (.ci/run sets it after `npm run build`), its emitted JavaScript in dist/, as
 * the image runs it. A split system is six processes, and tsx's module hooks double what each
 * spends loading the code (about 0.8 s of CPU a process): CI starts dozens of them.
 */
export function entryArgs(tsPath: string, distDir = join(ROOT, "dist")): string[] {
  if (process.env.TEST_RUN_DIST !== "1") return nodeArgsOf(tsPath);
  const built = join(distDir, tsPath.replace(/\.ts$/, ".js"));
  if (!existsSync(built)) throw new Error(`TEST_RUN_DIST=1 but ${built} is missing: run \`npm run build\` first`);
  return ["--enable-source-maps", built];
}

export const SERVICES = ["auth", "collections", "media", "social", "webhooks"] as const;
export type ServiceTarget = (typeof SERVICES)[number];
const READY_TIMEOUT_MS = 90_000;
export const EXIT_TIMEOUT_MS = 20_000;

export const splitEnabled = Boolean(process.env.DATABASE_URL && process.env.NATS_URL);

/** Configuration variables the split system sets itself; inherited values of them are dropped. */
const CONFIG_VARS = [
  "TARGET", "HOST", "PORT", "DATA_DIR", "DATABASE_URL", "DB_POOL_MAX", "DB_LOCK_TIMEOUT_MS", "NATS_URL", "NATS_STREAM", "NATS_SUBJECT_PREFIX",
  "BASE_URL", "APP_URL", "MCP_URL", "GATEWAY_API_KEYS", "RATE_LIMIT_PER_MINUTE", "LOG_LEVEL", "SERVICE_PORT",
  "AUTH_URL", "COLLECTIONS_URL", "MEDIA_URL", "SOCIAL_URL", "WEBHOOKS_URL", "TOKEN_CACHE_MS", "MAX_BODY_BYTES", "CLIENT_IDLE_MS", "GRANT_SECRET",
  "CALLER_SIGNING_KEY", "CALLER_VERIFY_KEYS",
  "S3_ENDPOINT", "S3_BUCKET", "S3_REGION", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "S3_FORCE_PATH_STYLE", "S3_PUBLIC_ENDPOINT",
];

export interface Proc {
  name: string;
  child: ChildProcess;
  output: string[];
  ready: Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Exited, and its output read to the end. */
  closed: Promise<void>;
  done: boolean;
}

function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !CONFIG_VARS.includes(k)) env[k] = v;
  return env;
}

/**
 * V8 heap flags of this process, passed on: `npm run bench` starts node as production does
 * (package.json), and the processes its scenarios spawn (split, soak) must start alike.
 */
const HEAP_FLAGS = process.execArgv.filter((a) => /^--max-(semi|old)-space-size=/.test(a));

/** Times a split system is started on fresh ports when a process finds its port taken. */
const PORT_ATTEMPTS = 3;

/** Whether a process died because its port was taken before it could bind it (its output read to the end). */
function lostItsPort(p: Proc): boolean {
  return p.output.some((line) => line.includes("EADDRINUSE"));
}

/** Spawns one target; `ready` resolves with its ready line once main.ts logs it. */
export function startTarget(name: string, target: string, env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [...HEAP_FLAGS, ...entryArgs(MAIN), `--target=${target}`], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  const output: string[] = [];
  const proc = { name, child, output, done: false } as Proc;
  proc.exited = new Promise((res) => child.once("exit", (code, signal) => { proc.done = true; res({ code, signal }); }));
  proc.closed = new Promise((res) => child.once("close", () => res()));
  proc.ready = new Promise<string>((res, rej) => {
    const expected = target === "gateway" || target === "all" ? /^listening on / : new RegExp(`^serving ${target} on `);
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
export function admin(env: Record<string, string>, args: string[]): Promise<Record<string, any>> {
  return new Promise((res, rej) => {
    execFile(process.execPath, [...entryArgs(ADMIN), ...args], { cwd: ROOT, env, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) { rej(new Error(`admin ${args.join(" ")} failed: ${err.message}\n${stderr}`)); return; }
      try { res(JSON.parse(stdout.trim().split("\n").pop()!)); } catch { rej(new Error(`admin ${args.join(" ")} printed no JSON: ${stdout}\n${stderr}`)); }
    });
  });
}

/** POSTs an op to a gateway's JSON endpoint; the raw answer, for bytes and byte-for-byte replays. */
export function postOp(gatewayUrl: string, token: string | undefined, body: Record<string, unknown>): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json", apikey: API_KEY };
  if (token) headers.authorization = `Bearer ${token}`;
  return fetch(`${gatewayUrl}/functions/v1/thirdparty-v1`, { method: "POST", headers, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
}

/** An op through a gateway: status, parsed body and headers. */
export async function call(gatewayUrl: string, token: string | undefined, body: Record<string, unknown>) {
  const res = await postOp(gatewayUrl, token, body);
  const text = await res.text();
  let parsed: any;
  try { parsed = JSON.parse(text); } catch { parsed = { raw: text }; }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** A call through `gateway` as `token` that must answer 200; its body (the system's diagnostics otherwise). */
export function mustCall(sys: SplitSystem, gateway: string, token: string) {
  return async (body: Record<string, unknown>): Promise<Record<string, any>> => {
    const res = await call(gateway, token, body);
    if (res.status !== 200) throw new Error(`${String(body.op)}: ${res.status} ${JSON.stringify(res.body)}\n${sys.diagnostics()}`);
    return res.body;
  };
}

/**
 * A published public collection with a webhook to `url`, made through `must` (a mustCall); its id.
 * With `settle` (a SplitSystem's settleEvents), the publish's own event has passed the webhooks
 * process before the webhook exists, so that it is not delivered.
 */
export async function hookedCollection(must: ReturnType<typeof mustCall>, url: string, opts: { settle?: () => Promise<void> } = {}): Promise<number> {
  const id = (await must({ op: "collections.create", name: "Hooked", share_access_level: "public" })).collection.id as number;
  await must({ op: "collections.publish", collection_id: id, slug: `hooked-${id}` });
  await opts.settle?.();
  await must({ op: "collections.webhook_set", collection_id: id, url });
  return id;
}

export interface SplitSystem {
  id: string;
  /** Environment every process shares (plus its own SERVICE_PORT or PORT). */
  env: Record<string, string>;
  /** Environment for the admin CLI. */
  cliEnv: Record<string, string>;
  gateways: string[];
  /** host:port of each service's Connect/gRPC port. */
  servicePorts: Record<ServiceTarget, number>;
  procs: Proc[];
  /** Last lines of every process's output, for failure messages. */
  diagnostics(): string;
  /** Resolves once the services' relays have published what their outboxes hold now and every consumer has processed it. */
  settleEvents(): Promise<void>;
  /** Starts a service target again (after it was stopped or killed); resolves once ready. */
  restart(service: ServiceTarget): Promise<void>;
  /** A paid user and an access token (all scopes unless given), made as the admin CLI makes them. */
  user(name: string, scopes?: string): Promise<{ userId: string; username: string; token: string }>;
  stop(): Promise<void>;
}

/**
 * With `allInOne`, the same backends serve one `--target=all` process instead (its gateway is
 * gateways[0] and no service has a port of its own): benches compare the two on equal terms.
 * The database is a copy of the run's migrated template when there is one (test/run-tests.ts),
 * unless `emptyDatabase`: then the processes migrate it from nothing together, as a first
 * deployment's replicas do. Its ports come from `choosePorts` (freePorts); when a process finds
 * its port taken, every process is started again on fresh ones (PORT_ATTEMPTS times in all).
 */
export async function startSplitSystem(opts: { gateways?: number; env?: Record<string, string>; allInOne?: boolean; emptyDatabase?: boolean; choosePorts?: (count: number) => Promise<number[]> } = {}): Promise<SplitSystem> {
  const id = randomBytes(4).toString("hex");
  const procs: Proc[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), "cms-split-"));
  chmodSync(dataDir, 0o755);
  const db = await freshDatabase(process.env.DATABASE_URL!, { template: opts.emptyDatabase ? undefined : process.env[DATABASE_TEMPLATE_ENV] });
  const stream = `CMS_SPLIT_${id}`;
  let servicePorts = {} as Record<ServiceTarget, number>;
  let gatewayPorts: number[] = [];
  const env: Record<string, string> = {
    ...baseEnv(),
    HOST: "127.0.0.1",
    DATABASE_URL: db.url,
    NATS_URL: process.env.NATS_URL!,
    NATS_STREAM: stream,
    NATS_SUBJECT_PREFIX: `cmssplit.${id}`,
    DATA_DIR: dataDir,
    GATEWAY_API_KEYS: API_KEY,
    // Grants and caller assertions signed by one process verify in another only with shared keys.
    GRANT_SECRET: randomBytes(32).toString("base64url"),
    CALLER_SIGNING_KEY: generateCallerKeyPem().privateKey,
    // main.ts logs its ready line at info; at warn there would be nothing to wait for.
    LOG_LEVEL: "info",
    OTEL_SDK_DISABLED: "true",
  };
  if (process.env.S3_ENDPOINT) {
    for (const k of ["S3_ENDPOINT", "S3_REGION", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "S3_FORCE_PATH_STYLE"]) {
      if (process.env[k]) env[k] = process.env[k]!;
    }
    env.S3_BUCKET = `cms-split-${id}`;
  }
  // The caller's settings win over everything above, the run's backends too (a test's own NATS or object store).
  Object.assign(env, opts.env);
  const cliEnv = { ...env, LOG_LEVEL: "warn" };
  const diagnostics = (of = procs) => of.map((p) => `--- ${p.name} (exited: ${p.done}) ---\n${p.output.slice(-40).join("\n")}`).join("\n");
  const startService = (s: ServiceTarget) => startTarget(s, s, { ...env, SERVICE_PORT: String(servicePorts[s]) });

  const stopProcs = async () => {
    for (const p of procs) if (!p.done) p.child.kill("SIGKILL");
    await Promise.all(procs.map((p) => Promise.race([p.closed, sleep(5000)])));
  };
  const stop = async () => {
    await stopProcs();
    await db.drop().catch(() => {});
    await withJetStream(process.env.NATS_URL!, async (jsm) => { await jsm.streams.delete(stream).catch(() => {}); })
      .catch(() => { /* the stream goes with the server's own retention otherwise */ });
    rmSync(dataDir, { recursive: true, force: true });
  };

  const start = async () => {
    const ports = await (opts.choosePorts ?? freePorts)(SERVICES.length + (opts.gateways ?? 1));
    servicePorts = Object.fromEntries(SERVICES.map((s, i) => [s, ports[i]!])) as Record<ServiceTarget, number>;
    gatewayPorts = ports.slice(SERVICES.length);
    for (const s of SERVICES) env[`${s.toUpperCase()}_URL`] = `http://127.0.0.1:${servicePorts[s]}`;
    if (opts.allInOne) {
      for (const s of SERVICES) delete env[`${s.toUpperCase()}_URL`];
      const all = startTarget("all", "all", { ...env, PORT: String(gatewayPorts[0]) });
      procs.push(all);
      await all.ready;
      gatewayPorts.splice(1);
    }
    // Services first, then the gateways one after the other (each migrates the gateway schema).
    else for (const s of SERVICES) procs.push(startService(s));
    await Promise.all(procs.map((p) => p.ready));
    for (const [i, port] of (opts.allInOne ? [] : gatewayPorts).entries()) {
      const gw = startTarget(`gateway-${i}`, "gateway", { ...env, PORT: String(port) });
      procs.push(gw);
      await gw.ready;
    }
  };
  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      break;
    } catch (err) {
      await stopProcs();
      const started = procs.splice(0);
      // A port free when freePorts probed it can be bound by another process before ours binds
      // it (ports.ts); the system starts again, every process on fresh ports.
      if (attempt < PORT_ATTEMPTS && started.some(lostItsPort)) continue;
      const message = `${(err as Error).message}\n${diagnostics(started)}`;
      await stop();
      throw new Error(message);
    }
  }

  return {
    id, env, cliEnv, procs, servicePorts, diagnostics, stop,
    gateways: gatewayPorts.map((p) => `http://127.0.0.1:${p}`),
    async restart(service) {
      const p = startService(service);
      procs.push(p);
      await p.ready;
    },
    async settleEvents() {
      const admin = createDb(env.DATABASE_URL!, "public", 1);
      try {
        const { rows } = await admin.raw("SELECT table_schema FROM information_schema.tables WHERE table_name = 'outbox'");
        for (const { table_schema: schema } of rows as Array<{ table_schema: string }>) {
          const db = createDb(env.DATABASE_URL!, schema, 1);
          try { await waitForOutbox(db, schema); } finally { await db.destroy(); }
        }
      } finally {
        await admin.destroy();
      }
      await withJetStream(env.NATS_URL!, (jsm) => waitForConsumers(jsm, env.NATS_STREAM!));
    },
    async user(name, scopes) {
      // What `admin user create --plan paid` and `admin token mint [--scopes]` do, in this
      // process: two admin CLI processes cost 2.5-3 s a user (split-mode.test.ts runs the CLI).
      const db = createDb(env.DATABASE_URL!, "auth", 1);
      try {
        const auth = createAuth(createAuthStore(db));
        const u = await auth.createUser(`${name}_${id}`, "paid", false);
        const t = await auth.mintToken(u.username, scopes, { clientId: "admin-cli" });
        return { userId: u.id, username: u.username, token: t.accessToken };
      } finally {
        await db.destroy();
      }
    },
  };
}
