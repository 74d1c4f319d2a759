// Completes what `tsc -p tsconfig.build.json` emitted into dist/ so that `node dist/...` runs
// with no TypeScript tooling: each workspace gets a package.json whose exports name the emitted
// .js files, dist/node_modules/@cms/<name> links to it (Node resolves the workspaces there
// before the root node_modules, whose @cms links point at the TypeScript sources), and the
// workspaces' non-code files (services/gateway/assets) are copied beside their code.
// Plain JavaScript: it runs in the image's build stage before anything else exists.
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";

const ROOT = new URL("..", import.meta.url).pathname;
// dist/ by default; `npm test`'s build (scripts/build-tests.mjs) names dist-test/.
const DIST = join(ROOT, process.argv[2] ?? "dist");
/** Folders of a workspace that hold files read at run time, not code. */
const ASSET_DIRS = ["assets"];

const toJs = (value) => {
  if (typeof value === "string") return value.replace(/\.ts$/, ".js");
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toJs(v)]));
  return value;
};

if (!existsSync(DIST)) throw new Error(`${relative(ROOT, DIST)}/ is missing: emit the code into it first (npm run build, npm run build:tests)`);
rmSync(join(DIST, "node_modules"), { recursive: true, force: true });
mkdirSync(join(DIST, "node_modules", "@cms"), { recursive: true });
const rootPkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
writeFileSync(join(DIST, "package.json"), JSON.stringify({ name: `${rootPkg.name}-dist`, version: rootPkg.version, private: true, type: "module" }, null, 2) + "\n");

const workspaces = [];
for (const group of ["packages", "services"]) {
  for (const name of readdirSync(join(ROOT, group))) {
    const pkgFile = join(ROOT, group, name, "package.json");
    if (!existsSync(pkgFile)) continue;
    const pkg = JSON.parse(readFileSync(pkgFile, "utf8"));
    const out = join(DIST, group, name);
    if (!existsSync(out)) throw new Error(`${group}/${name} emitted nothing into ${relative(ROOT, DIST)}/ (is it in the tsconfig's include?)`);
    writeFileSync(join(out, "package.json"), JSON.stringify({ ...pkg, exports: toJs(pkg.exports) }, null, 2) + "\n");
    for (const dir of ASSET_DIRS) {
      const src = join(ROOT, group, name, dir);
      if (existsSync(src)) cpSync(src, join(out, dir), { recursive: true });
    }
    const scope = pkg.name.split("/")[0];
    const link = join(DIST, "node_modules", ...pkg.name.split("/"));
    mkdirSync(join(DIST, "node_modules", scope), { recursive: true });
    symlinkSync(relative(join(link, ".."), out), link, "dir");
    workspaces.push(pkg.name);
  }
}
console.log(`${relative(ROOT, DIST)}/: ${workspaces.length} workspaces linked (${workspaces.join(", ")})`);
