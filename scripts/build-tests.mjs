// Emits the code and its tests to dist-test/ (tsconfig.test-build.json), which `npm test` and
// `npm run test:backends` run (ava.emitted.config.mjs): each test file is a process of its own,
// and loading a file's TypeScript through tsx's module hooks costs twice the CPU of loading the
// emitted JavaScript (importing the whole system: ~2.5 s of CPU against ~1.2 s). The workspaces
// are linked as in dist/ (scripts/package-dist.mjs), and the test folders' files that are not
// TypeScript (certificates, loader hooks, ...) are copied beside the emitted tests, whose
// fixtures run emitted too (test/helpers/paths.ts, besideModule and nodeArgsOf).
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

const ROOT = new URL("..", import.meta.url).pathname;
const OUT = "dist-test";

rmSync(join(ROOT, OUT), { recursive: true, force: true });
execFileSync(join(ROOT, "node_modules", ".bin", "tsc"), ["-p", "tsconfig.test-build.json"], { cwd: ROOT, stdio: "inherit" });
execFileSync(process.execPath, [join(ROOT, "scripts", "package-dist.mjs"), OUT], { cwd: ROOT, stdio: "inherit" });

const testDirs = ["test", ...["packages", "services"].flatMap((group) => readdirSync(join(ROOT, group)).map((name) => join(group, name, "test")))];
for (const dir of testDirs) {
  if (!existsSync(join(ROOT, dir))) continue;
  cpSync(join(ROOT, dir), join(ROOT, OUT, dir), { recursive: true, filter: (src) => statSync(src).isDirectory() || !src.endsWith(".ts") });
}
