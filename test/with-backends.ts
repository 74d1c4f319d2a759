/**
 * Runs a command (the test suites) against real backends: PostgreSQL (DATABASE_URL, default the
 * local server), NATS JetStream (NATS_URL, default the local server) and an S3-compatible server
 * (s3rver, started here on a free port unless S3_ENDPOINT is given). Tests create their own
 * database, stream and bucket on these and remove them.
 *
 *   node --import tsx test/with-backends.ts ava [args...]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import pg from "pg";

const require = createRequire(import.meta.url);
const env: Record<string, string | undefined> = { ...process.env };
env.DATABASE_URL ||= "postgres://postgres@127.0.0.1:5432/postgres";
env.NATS_URL ||= "nats://127.0.0.1:4222";

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

let stopS3 = async () => {};
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
  stopS3 = async () => {
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  };
}

const [cmd, ...args] = process.argv.slice(2);
if (!cmd) {
  console.error("usage: with-backends.ts <command> [args...]");
  process.exit(2);
}
try {
  await checkPostgres();
} catch (err) {
  console.error(`PostgreSQL at ${env.DATABASE_URL} is not reachable: ${(err as Error).message}`);
  process.exit(1);
}
try {
  await checkNats();
} catch (err) {
  console.error(`NATS with JetStream at ${env.NATS_URL} is not reachable: ${(err as Error).message}`);
  process.exit(1);
}
await startS3();
console.log(`backends: DATABASE_URL=${env.DATABASE_URL} NATS_URL=${env.NATS_URL} S3_ENDPOINT=${env.S3_ENDPOINT}`);
const child = spawn(cmd === "ava" ? join("node_modules", ".bin", "ava") : cmd, args, { stdio: "inherit", env });
const code: number = await new Promise((resolve) => child.on("exit", (c, sig) => resolve(c ?? (sig ? 1 : 0))));
await stopS3();
process.exit(code);
