/**
 * Starts a whole system in the test process (all-in-one) on a fresh DATA_DIR. When the run has
 * real backends (DATABASE_URL, NATS_URL, S3_ENDPOINT set by `test/run-tests.ts --backends`), each
 * system gets its own database, stream and bucket, removed again by stop(). Its database is a
 * copy of the run's migrated template when test/run-tests.ts made one.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import type { JetStreamManager } from "@nats-io/jetstream";
import { loadConfig, type Logger, type System } from "@cms/platform";
import { startSystem } from "@cms/server";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { Ajv, type ValidateFunction } from "ajv";
import { PUBLIC_SERVICES } from "@cms/gateway";
import { buildRegistry } from "@cms/gateway/registry";
import { FAST_SCRYPT } from "../../services/auth/test/fakes.js";

/** The op registry the gateway builds from the public services' descriptors (also what the fuzz and authz tests draw from). */
export const opRegistry = buildRegistry(PUBLIC_SERVICES);
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const validators = new Map<string, ValidateFunction>();
/**
 * Every 200 answer of the op endpoint in the e2e suite is checked against the response schema
 * that operation.describe publishes for its operation: the published contract and the answers
 * cannot drift apart without a test failing.
 */
export function checkAnswer(op: string, body: unknown): void {
  const entry = opRegistry.get(op);
  if (!entry || entry.streamsObject) return;
  let validate = validators.get(op);
  if (!validate) validators.set(op, (validate = ajv.compile(entry.responseSchema)));
  if (!validate(body)) {
    throw new Error(`${op} answered JSON that its published response schema refuses: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body).slice(0, 2000)}`);
  }
}

export const API_KEY = "test-apikey";

export interface TestUser {
  userId: string;
  username: string;
  token: string;
}

export interface CallResult<T = Record<string, any>> {
  status: number;
  body: T;
  headers: Headers;
}

export interface TestSystem {
  system: System;
  url: string;
  env: Record<string, string>;
  call<T = Record<string, any>>(token: string | undefined, body: Record<string, unknown>, opts?: { apikey?: string | null; headers?: Record<string, string> }): Promise<CallResult<T>>;
  /** A call that must answer 200; its body (the test setup's shorthand). */
  must<T = Record<string, any>>(token: string, body: Record<string, unknown>): Promise<T>;
  /** A user and a token; with `password`, one who can also sign in on the web pages. */
  user(opts?: { plan?: "free" | "paid" | "founding"; admin?: boolean; scopes?: string[]; username?: string; password?: string }): Promise<TestUser>;
  token(username: string, scopes?: string[]): Promise<string>;
  /** Stops the system and starts it again on the same data (a process restart); url and system change. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface TestSystemOptions {
  /** Where the system logs (tests that read what it logged). */
  log?: Logger;
}

/**
 * Runs a job now. The system's own timer may be running the same job at that moment (its lease
 * then makes this run skip): wait for that run and go again, so a test's run always happens.
 */
export async function runJobNow(system: System, name: string, args: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  for (let i = 0; i < 200; i++) {
    const out = await system.runJob(name, args);
    if (!(typeof out.skipped === "string" && out.skipped.startsWith("another replica"))) return out;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`job ${name} stayed leased by another run`);
}

/**
 * Which of the keys are still stored once the outbox is drained and the object cleanup had up to
 * `ms` to remove them (it runs after the commit, on the bus).
 */
export async function storedAfterCleanup(system: System, keys: string[], ms = 10_000): Promise<string[]> {
  await system.drainEvents();
  const stored = async () => (await Promise.all(keys.map(async (k) => ((await system.store.head(k)) ? k : undefined)))).filter((k): k is string => k !== undefined);
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && (await stored()).length) await new Promise((r) => setTimeout(r, 50));
  return stored();
}

/** Runs `fn` with a JetStream manager on a connection of its own to `url`, closed afterwards. */
export async function withJetStream<T>(url: string, fn: (jsm: JetStreamManager) => Promise<T>): Promise<T> {
  const { connect } = await import("@nats-io/transport-node");
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const nc = await connect({ servers: url, timeout: 5000 });
  try {
    return await fn(await jetstreamManager(nc));
  } finally {
    await nc.close();
  }
}

/**
 * Where test/run-tests.ts says a run's migrated template is: a stopped embedded cluster (copied
 * into a test system's DATA_DIR), or a database on DATABASE_URL's server.
 */
export const CLUSTER_TEMPLATE_ENV = "CMS_TEST_CLUSTER_TEMPLATE";
export const DATABASE_TEMPLATE_ENV = "CMS_TEST_DATABASE_TEMPLATE";

/**
 * A fresh database on the server DATABASE_URL points at, empty or a copy of `template`; returns
 * its name, its URL and a drop function.
 */
export async function freshDatabase(adminUrl: string, opts: { template?: string } = {}): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `cms_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}${opts.template ? ` TEMPLATE ${pg.escapeIdentifier(opts.template)}` : ""}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** Environment of one isolated system: own DATA_DIR, database, NATS stream and S3 bucket. */
export async function isolatedEnv(overrides: Record<string, string> = {}): Promise<{ env: Record<string, string>; cleanup(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), "cms-test-"));
  // As root the embedded PostgreSQL runs as the postgres OS user, which must enter DATA_DIR.
  chmodSync(dataDir, 0o755);
  const id = randomBytes(4).toString("hex");
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    HOST: "127.0.0.1",
    PORT: "0",
    GATEWAY_API_KEYS: API_KEY,
    RATE_LIMIT_PER_MINUTE: "100000",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "error",
    OTEL_SDK_DISABLED: "true",
  };
  const cleanups: Array<() => Promise<void>> = [async () => rmSync(dataDir, { recursive: true, force: true })];
  // A database of its own, a copy of the run's template when there is one (unless the caller gives one).
  const ownDatabase = !overrides.DATABASE_URL;
  if (ownDatabase && process.env.DATABASE_URL) {
    const db = await freshDatabase(process.env.DATABASE_URL, { template: process.env[DATABASE_TEMPLATE_ENV] });
    env.DATABASE_URL = db.url;
    cleanups.push(db.drop);
  } else if (ownDatabase && process.env[CLUSTER_TEMPLATE_ENV]) {
    // `cp -a`: as root the cluster's files belong to the postgres OS user, and must stay so.
    execFileSync("cp", ["-a", process.env[CLUSTER_TEMPLATE_ENV]!, join(dataDir, "postgres")]);
  }
  if (process.env.NATS_URL) {
    env.NATS_URL = process.env.NATS_URL;
    env.NATS_STREAM = `CMS_TEST_${id}`;
    env.NATS_SUBJECT_PREFIX = `cmstest.${id}`;
    cleanups.push(() => withJetStream(process.env.NATS_URL!, async (jsm) => { await jsm.streams.delete(`CMS_TEST_${id}`).catch(() => {}); }));
  }
  if (process.env.S3_ENDPOINT) {
    for (const k of ["S3_ENDPOINT", "S3_REGION", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "S3_FORCE_PATH_STYLE"]) {
      if (process.env[k]) env[k] = process.env[k]!;
    }
    env.S3_BUCKET = `cms-test-${id}`;
  }
  Object.assign(env, overrides);
  return {
    env,
    async cleanup() {
      for (const fn of cleanups.reverse()) await fn().catch(() => {});
    },
  };
}

export async function startTestSystem(overrides: Record<string, string> = {}, opts: TestSystemOptions = {}): Promise<TestSystem> {
  const { env, cleanup } = await isolatedEnv(overrides);
  const start = () => {
    const config = loadConfig(env, ["--target=all"]);
    // Passwords hashed in milliseconds: sign-in tests hash dozens (~0.45 s each at production cost,
    // which the admin CLI's processes in passwords-cli.test.ts keep).
    config.passwordHashParams = FAST_SCRYPT;
    return startSystem(config, opts.log ? { log: opts.log } : {});
  };
  let system: System;
  try {
    system = await start();
  } catch (err) {
    await cleanup();
    throw err;
  }
  let auth = system.clients.get(AuthService);
  let n = 0;
  const t: TestSystem = {
    system,
    url: system.url!,
    env,
    async call(token, body, opts = {}) {
      const headers: Record<string, string> = { "content-type": "application/json", ...opts.headers };
      const apikey = opts.apikey === undefined ? API_KEY : opts.apikey;
      if (apikey !== null) headers.apikey = apikey;
      if (token) headers.authorization = `Bearer ${token}`;
      const res = await fetch(`${t.url}/functions/v1/thirdparty-v1`, { method: "POST", headers, body: JSON.stringify(body) });
      const text = await res.text();
      let parsed: any;
      try { parsed = JSON.parse(text); } catch { parsed = { raw: text }; }
      if (res.status === 200 && typeof body.op === "string" && res.headers.get("content-type")?.startsWith("application/json")) checkAnswer(body.op, parsed);
      return { status: res.status, body: parsed, headers: res.headers };
    },
    async must(token, body) {
      const res = await t.call(token, body);
      if (res.status !== 200) throw new Error(`${String(body.op)} answered ${res.status}: ${JSON.stringify(res.body)}`);
      return res.body as never;
    },
    async token(username, scopes) {
      const minted = await auth.mintToken({ username, scopes: scopes ?? [] });
      return minted.accessToken;
    },
    async user(opts = {}) {
      const username = opts.username ?? `user${process.pid}_${++n}_${randomBytes(2).toString("hex")}`;
      const u = await auth.createUser({ username, plan: opts.plan ?? "free", isAdmin: opts.admin ?? false, password: opts.password });
      const token = await t.token(username, opts.scopes);
      return { userId: u.userId, username, token };
    },
    async restart() {
      await system.stop();
      system = t.system = await start();
      t.url = system.url!;
      auth = system.clients.get(AuthService);
    },
    async stop() {
      await system.stop();
      await cleanup();
    },
  };
  return t;
}
