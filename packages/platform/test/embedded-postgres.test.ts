/**
 * The embedded PostgreSQL: start/stop on a temp DATA_DIR, recovery from an engine whose owner
 * was killed, and attaching to an engine a live process owns. Slow (initdb per DATA_DIR).
 */
import test, { type ExecutionContext } from "ava";
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { portTaken, startEmbeddedPostgres, type EmbeddedPostgres } from "../src/embedded-postgres.ts";
import { reachableByOthers } from "../src/engine-home.ts";
import { createLogger } from "../src/logger.ts";
import { besideModule, nodeArgsOf, ROOT } from "../../../test/helpers/paths.ts";

const log = createLogger("silent");
const OWNER = besideModule(import.meta.url, "./fixtures/embedded-pg-owner.ts");

function tempDataDir(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), "cms-embedded-pg-"));
  // As root the engine runs as the postgres OS user, which must enter DATA_DIR.
  chmodSync(dir, 0o755);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function query<T = Record<string, unknown>>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows as T[];
  } finally {
    await c.end();
  }
}

function alive(pid: number): boolean {
  try { process.kill(pid, 0); return true; } catch (err) { return (err as NodeJS.ErrnoException).code === "EPERM"; }
}

function postmasterPid(dataDir: string): number | undefined {
  const f = join(dataDir, "postgres", "postmaster.pid");
  return existsSync(f) ? Number(readFileSync(f, "utf8").split("\n")[0]) : undefined;
}

async function waitGone(pid: number): Promise<void> {
  while (alive(pid)) await sleep(100);
}

/** Starts the owner fixture on dataDir and waits for its "ready" line. */
async function startOwner(t: ExecutionContext, dataDir: string): Promise<{ child: ChildProcess; url: string; port: number }> {
  const child = spawn(process.execPath, [...nodeArgsOf(OWNER), dataDir], { stdio: ["ignore", "pipe", "pipe"] });
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    }
  });
  let stderr = "";
  child.stderr!.on("data", (d) => { stderr += String(d); });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d) => {
      out += String(d);
      const line = out.split("\n").find((l) => l.startsWith("ready "));
      if (line) resolve({ child, ...JSON.parse(line.slice("ready ".length)) });
    });
    child.once("exit", (code) => reject(new Error(`owner exited (${code}) before ready: ${stderr}`)));
  });
}

test.serial("starts on a fresh DATA_DIR, answers queries, and stop() stops it", async (t) => {
  t.timeout(120_000);
  const dir = tempDataDir(t);
  const db = await startEmbeddedPostgres(dir, log);
  let stopped = false;
  t.teardown(async () => { if (!stopped) await db.stop(); });
  t.false(db.attached);
  t.true(db.port > 0);
  t.regex(db.url, new RegExp(`^postgres://postgres:[^@]+@127\\.0\\.0\\.1:${db.port}/cms$`));
  const rows = await query<{ n: number; db: string }>(db.url, "SELECT 1 + 1 AS n, current_database() AS db");
  t.deepEqual(rows, [{ n: 2, db: "cms" }]);
  // It is a real server: a table survives across connections.
  await query(db.url, "CREATE TABLE t (v text)");
  await query(db.url, "INSERT INTO t VALUES ('kept')");
  t.deepEqual(await query(db.url, "SELECT v FROM t"), [{ v: "kept" }]);
  t.true(existsSync(join(dir, "postgres.owner.json")));
  const pid = postmasterPid(dir)!;
  t.true(alive(pid));

  await db.stop();
  stopped = true;
  await t.throwsAsync(query(db.url, "SELECT 1"));
  t.false(existsSync(join(dir, "postgres.owner.json")));
  t.false(existsSync(join(dir, "postgres", "postmaster.pid")));
  await db.stop(); // idempotent

  // A second start on the same (persistent) DATA_DIR keeps the data.
  const again = await startEmbeddedPostgres(dir, log);
  try {
    t.deepEqual(await query(again.url, "SELECT v FROM t"), [{ v: "kept" }]);
  } finally {
    await again.stop();
  }
});

/** A port a server of this test listens on until the test ends (or, with `release`, a free one). */
async function portHeldBy(t: ExecutionContext, opts: { release?: boolean } = {}): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const closed = () => new Promise<void>((r) => server.close(() => r()));
  const port = (server.address() as { port: number }).port;
  if (opts.release) await closed();
  else t.teardown(closed);
  return port;
}

test.serial("a port taken between its choice and postgres's bind: the engine starts on another", async (t) => {
  t.timeout(120_000);
  const dir = tempDataDir(t);
  const taken = await portHeldBy(t);
  const other = await portHeldBy(t, { release: true });
  const offered = [taken, other];
  const lines: Array<Record<string, unknown>> = [];
  const capture = createLogger("info", {}, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  const db = await startEmbeddedPostgres(dir, capture, { choosePort: async () => offered.shift()! });
  try {
    t.is(db.port, other);
    t.deepEqual(await query(db.url, "SELECT current_database() AS db"), [{ db: "cms" }]);
    t.true(lines.some((l) => l.port === taken && /port was taken/.test(String(l.msg))), "the retry is logged with the taken port");
  } finally {
    await db.stop();
  }
});

test.serial("a port taken on every attempt: the start fails after three, saying so", async (t) => {
  t.timeout(120_000);
  const dir = tempDataDir(t);
  const taken = await portHeldBy(t);
  let attempts = 0;
  const err = await t.throwsAsync(startEmbeddedPostgres(dir, log, { choosePort: async () => { attempts++; return taken; } }));
  t.regex(err!.message, new RegExp(`did not start: the port chosen for it was taken before it could bind it, 3 times \\(the last ${taken}\\)`));
  t.is(attempts, 3);
  t.is(postmasterPid(dir), undefined, "no engine left running");
});

test("portTaken reads postgres's words for a taken TCP port or socket lock, and nothing else", (t) => {
  t.true(portTaken('2026-11-27 LOG:  could not bind IPv4 address "127.0.0.1": Address already in use\nHINT:  Is another postmaster already running on port 5433?'));
  t.true(portTaken('FATAL:  lock file "/tmp/.s.PGSQL.5433.lock" already exists'));
  t.false(portTaken('FATAL:  lock file "postmaster.pid" already exists'), "the data directory's lock is another engine on the same cluster, not a port");
  t.false(portTaken("FATAL:  could not access private key file"));
  t.false(portTaken(""));
});

test.serial("recovers from an engine left running by a killed process", async (t) => {
  t.timeout(180_000);
  const dir = tempDataDir(t);
  const owner = await startOwner(t, dir);
  t.deepEqual(await query(owner.url, "SELECT 1 AS one"), [{ one: 1 }]);
  await query(owner.url, "CREATE TABLE survived (v int)");
  await query(owner.url, "INSERT INTO survived VALUES (42)");
  const stalePid = postmasterPid(dir)!;
  t.true(alive(stalePid));

  const exited = new Promise((r) => owner.child.once("exit", r));
  owner.child.kill("SIGKILL");
  await exited;
  t.true(alive(stalePid), "the engine outlives its killed owner (the stale case)");

  let db: EmbeddedPostgres | undefined;
  t.teardown(async () => { await db?.stop(); });
  db = await startEmbeddedPostgres(dir, log);
  t.false(db.attached);
  await waitGone(stalePid);
  t.false(alive(stalePid), "the stale engine was stopped");
  t.not(postmasterPid(dir), stalePid);
  t.deepEqual(await query(db.url, "SELECT v FROM survived"), [{ v: 42 }]);
  await t.throwsAsync(query(owner.url, "SELECT 1"), undefined, "the old port no longer answers");
});

test.serial("attaches to an engine another live process owns; refuses without attach", async (t) => {
  t.timeout(180_000);
  const dir = tempDataDir(t);
  const owner = await startOwner(t, dir);
  const enginePid = postmasterPid(dir)!;

  const err = await t.throwsAsync(startEmbeddedPostgres(dir, log));
  t.regex(err!.message, /in use/);
  t.regex(err!.message, new RegExp(`pid ${owner.child.pid}`));
  t.true(alive(enginePid), "refusing does not touch the owner's engine");

  const attached = await startEmbeddedPostgres(dir, log, { attach: true });
  t.true(attached.attached);
  t.is(attached.port, owner.port);
  t.deepEqual(await query<{ one: number }>(attached.url, "SELECT 1 AS one"), [{ one: 1 }]);
  await attached.stop(); // a no-op for an attached engine
  t.true(alive(enginePid), "stop() of an attached engine leaves it running");
  t.deepEqual(await query(owner.url, "SELECT 2 AS two"), [{ two: 2 }]);

  // The owner's orderly shutdown stops the engine.
  const exited = new Promise((r) => owner.child.once("exit", r));
  owner.child.kill("SIGTERM");
  await exited;
  await waitGone(enginePid);
  t.false(existsSync(join(dir, "postgres.owner.json")));
});

// As root, also run the engine the way a normal user does: the owner fixture under uid 65534.
// The fixture runs from this checkout, so that user must be able to read it: not so in a clone
// made by root in a private (0700) folder, where only root runs the project at all.
const checkoutReadableByOthers = reachableByOthers(ROOT);
const asNobody = process.getuid?.() === 0 && existsSync("/usr/bin/setpriv") && checkoutReadableByOthers ? test.serial : test.serial.skip;
asNobody("works for a normal (non-root) user too", async (t) => {
  t.timeout(120_000);
  const dir = mkdtempSync(join(tmpdir(), "cms-embedded-pg-user-"));
  chownSync(dir, 65534, 65534);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const child = spawn("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, ...nodeArgsOf(OWNER), dir], {
    stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, HOME: tmpdir() },
  });
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  let stderr = "";
  child.stderr!.on("data", (d) => { stderr += String(d); });
  const ready = await new Promise<{ url: string }>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d) => {
      out += String(d);
      const line = out.split("\n").find((l) => l.startsWith("ready "));
      if (line) resolve(JSON.parse(line.slice("ready ".length)));
    });
    child.once("exit", (code) => reject(new Error(`owner exited (${code}) before ready: ${stderr}`)));
  });
  const [row] = await query<{ who: string }>(ready.url, "SELECT current_user AS who");
  t.is(row!.who, "postgres");
  const pid = postmasterPid(dir)!;
  t.true(alive(pid));
  child.kill("SIGTERM");
  t.is(await exited, 0);
  await waitGone(pid);
  t.false(alive(pid));
});

test.serial("starts from a DATA_DIR inside a private (0700) folder, with no chmod: as root the cluster lives where the postgres user reaches it", async (t) => {
  t.timeout(120_000);
  const parent = mkdtempSync(join(tmpdir(), "cms-private-")); // mode 0700, as mktemp -d makes it
  t.is(statSync(parent).mode & 0o777, 0o700);
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  const dir = join(parent, "data");
  const lines: Array<Record<string, unknown>> = [];
  const capture = createLogger("info", {}, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  const db = await startEmbeddedPostgres(dir, capture);
  const cluster = lines.find((l) => typeof l.cluster === "string")?.cluster as string | undefined;
  t.teardown(() => { if (cluster) rmSync(cluster, { recursive: true, force: true }); });
  try {
    await query(db.url, "CREATE TABLE t (v text)");
    await query(db.url, "INSERT INTO t VALUES ('private')");
    if (userInfo().uid === 0) {
      t.truthy(cluster, "the start-up log says where the cluster lives");
      t.true(existsSync(join(cluster!, "PG_VERSION")));
      t.is(statSync(parent).mode & 0o777, 0o700, "the private folder was left as it was");
    }
  } finally {
    await db.stop();
  }
  // The same DATA_DIR finds the same cluster again.
  const again = await startEmbeddedPostgres(dir, log);
  try {
    t.deepEqual(await query(again.url, "SELECT v FROM t"), [{ v: "private" }]);
  } finally {
    await again.stop();
  }
});
