/**
 * Runs a command (the test suites) with what a run's test systems share, made once here and
 * removed when the command ends:
 *
 * - a migrated template of the database. Each all-in-one test system (test/helpers/system.ts)
 *   starts from a copy of it instead of making and migrating its own: on embedded defaults a
 *   stopped cluster copied into its DATA_DIR (no `initdb`), on a real server a database made
 *   with `CREATE DATABASE ... TEMPLATE`. The template is made by a start's own migration code
 *   (migrateSystem), and the systems still run their migrations, finding none pending. Split
 *   systems start from it too, but for split-mode.test.ts; the stores' tests keep making empty
 *   databases: they, and it, test migrating from nothing.
 * - with `--backends`, real backends: PostgreSQL (DATABASE_URL, default the local server), NATS
 *   JetStream (NATS_URL, default the local server) and an S3-compatible server (s3rver, started
 *   here on a free port unless S3_ENDPOINT is given). Tests create their own database, stream and
 *   bucket on these and remove them.
 *
 *   node --import tsx test/run-tests.ts [--backends] ava [args...]
 *
 * `npx ava <file>` alone works too: without a template, each system makes its own database.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import pg from "pg";
import { createLogger, migrateSystem } from "@cms/platform";
import { startEmbeddedPostgres } from "@cms/platform/embedded-postgres";
import { MODULES } from "@cms/server";
import { CLUSTER_TEMPLATE_ENV, DATABASE_TEMPLATE_ENV, freshDatabase } from "./helpers/system.ts";

const require = createRequire(import.meta.url);
const env: Record<string, string | undefined> = { ...process.env };
const cleanups: Array<() => Promise<void>> = [];

async function checkPostgres(): Promise<void> {
  const c = new pg.Client({ connectionString: env.DATABASE_URL });
  await c.connect();
  await c.end();
}

async function checkNats(): Promise<void> {
  const { connect } = await import("@nats-io/transport-node");
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const nc = await connect({ servers: env.NATS_URL, timeout: 5000 });
  await (await jetstreamManager(nc)).getAccountInfo();
  await nc.close();
}

async function startS3(): Promise<void> {
  if (env.S3_ENDPOINT) return;
  const S3rver = require("s3rver");
  const dir = mkdtempSync(join(tmpdir(), "s3rver-"));
  // s3rver removes a key's folder once it is empty, and a PUT into that folder at the same moment
  // (two objects of one collection, or of one chunked upload) fails to open its file: an
  // unhandled stream error that would end this process, and every later test with it. That one
  // request fails (the client sees a reset connection); the server goes on. (The store's
  // temporary keys have no folder, so that the busiest one no longer races.)
  process.on("uncaughtException", (err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT" && String(err.path ?? "").startsWith(dir)) {
      console.error(`s3rver: a write raced the removal of its folder (${err.path}); that request failed`);
      return;
    }
    throw err;
  });
  const server = new S3rver({ port: 0, address: "127.0.0.1", silent: true, directory: dir });
  const addr = await server.run();
  env.S3_ENDPOINT = `http://127.0.0.1:${addr.port}`;
  env.S3_REGION = "us-east-1";
  env.S3_ACCESS_KEY_ID = "S3RVER";
  env.S3_SECRET_ACCESS_KEY = "S3RVER";
  env.S3_FORCE_PATH_STYLE = "true";
  cleanups.push(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });
}

/** A database on DATABASE_URL's server with every schema migrated, for `CREATE DATABASE ... TEMPLATE`. */
async function makeDatabaseTemplate(): Promise<void> {
  const database = await freshDatabase(env.DATABASE_URL!);
  cleanups.push(() => database.drop());
  await migrateSystem(database.url, MODULES);
  env[DATABASE_TEMPLATE_ENV] = database.name;
}

/**
 * A stopped embedded cluster with the `cms` database migrated, made the way test systems make
 * their DATA_DIR (test/helpers/system.ts), so that a copy of it lands where their engine looks.
 */
async function makeClusterTemplate(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "cms-test-template-"));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  chmodSync(dataDir, 0o755);
  const engine = await startEmbeddedPostgres(dataDir, createLogger("error"));
  try {
    await migrateSystem(engine.url, MODULES);
  } finally {
    await engine.stop();
  }
  if (engine.dir !== join(dataDir, "postgres")) {
    // The engine keeps this DATA_DIR's cluster elsewhere (engine-home.ts): a copy into a test's
    // DATA_DIR would not be found there, so every system makes its own.
    rmSync(engine.dir, { recursive: true, force: true });
    console.log(`no database template: the embedded cluster of ${dataDir} lives in ${engine.dir}`);
    return;
  }
  env[CLUSTER_TEMPLATE_ENV] = engine.dir;
}

async function cleanup(): Promise<void> {
  for (const fn of cleanups.reverse()) await fn().catch((err) => console.error(`cleanup: ${(err as Error).message}`));
}

const args = process.argv.slice(2);
const backends = args[0] === "--backends";
if (backends) args.shift();
const [cmd, ...rest] = args;
if (!cmd) {
  console.error("usage: run-tests.ts [--backends] <command> [args...]");
  process.exit(2);
}
// An interrupt reaches the command too (one process group): it ends, then the templates go. One
// that comes while they are being made lets them be made, then removes them.
let child: ChildProcess | undefined;
let interrupted: NodeJS.Signals | undefined;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (child) child.kill(signal);
    else interrupted = signal;
  });
}
try {
  if (backends) {
    env.DATABASE_URL ||= "postgres://postgres@127.0.0.1:5432/postgres";
    env.NATS_URL ||= "nats://127.0.0.1:4222";
    await checkPostgres().catch((err) => { throw new Error(`PostgreSQL at ${env.DATABASE_URL} is not reachable: ${(err as Error).message}`); });
    await checkNats().catch((err) => { throw new Error(`NATS with JetStream at ${env.NATS_URL} is not reachable: ${(err as Error).message}`); });
    await startS3();
    console.log(`backends: DATABASE_URL=${env.DATABASE_URL} NATS_URL=${env.NATS_URL} S3_ENDPOINT=${env.S3_ENDPOINT}`);
  }
  const started = performance.now();
  if (env.DATABASE_URL) await makeDatabaseTemplate();
  else await makeClusterTemplate();
  console.log(`database template made in ${((performance.now() - started) / 1000).toFixed(1)} s`);
} catch (err) {
  console.error((err as Error).message);
  await cleanup();
  process.exit(1);
}

if (interrupted) {
  await cleanup();
  process.exit(interrupted === "SIGINT" ? 130 : 143);
}
const running = spawn(cmd === "ava" ? join("node_modules", ".bin", "ava") : cmd, rest, { stdio: "inherit", env });
child = running;
const code: number = await new Promise((resolve) => running.on("exit", (c, sig) => resolve(c ?? (sig ? 1 : 0))));
await cleanup();
process.exit(code);
