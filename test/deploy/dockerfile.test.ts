/**
 * The Dockerfile's rules that matter, checked without a container engine (none runs here): a
 * pinned base, a non-root numeric USER in the runtime stage, production dependencies only, the
 * emitted JavaScript started with node (never tsx), OCI labels, and a .dockerignore that keeps
 * local installs, builds and state out of the context. scripts/check-dist.mjs (run by CI) proves
 * that what the runtime stage holds starts and answers.
 */
import test from "ava";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../helpers/paths.js";

interface Instruction { op: string; args: string; line: number }
interface Stage { name: string; base: string; instructions: Instruction[] }

/** Instructions of a Dockerfile (continuations joined, comments dropped), grouped by stage. */
function parseDockerfile(text: string): { args: Map<string, string>; stages: Stage[] } {
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i]!;
    if (/^\s*(#|$)/.test(line)) continue;
    while (line.endsWith("\\") && i + 1 < lines.length) {
      i++;
      const next = lines[i]!;
      line = line.slice(0, -1) + (/^\s*#/.test(next) ? "" : " " + next.trim());
    }
    const m = /^\s*(\w+)\s+(.*)$/s.exec(line);
    if (!m) continue;
    const ins = { op: m[1]!.toUpperCase(), args: m[2]!.trim(), line: start + 1 };
    if (ins.op === "ARG" && !stages.length) {
      const [k, v = ""] = ins.args.split("=", 2);
      args.set(k!, v.replace(/^"|"$/g, ""));
    }
    if (ins.op === "FROM") {
      const [, base, name] = /^(\S+)(?:\s+AS\s+(\S+))?/i.exec(ins.args)!;
      stages.push({ name: name ?? String(stages.length), base: base!.replace(/\$\{(\w+)\}/g, (_, k) => args.get(k) ?? ""), instructions: [] });
    } else if (stages.length) {
      stages.at(-1)!.instructions.push(ins);
    }
  }
  return { args, stages };
}

const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
const { stages } = parseDockerfile(dockerfile);
const runtime = stages.at(-1)!;
const of = (stage: Stage, op: string) => stage.instructions.filter((i) => i.op === op);

test("every stage starts from a pinned Node 20 image (exact release, never a floating tag)", (t) => {
  t.true(stages.length >= 2, "multi-stage: the build stage's tools stay out of the runtime image");
  for (const s of stages) {
    const external = !stages.some((o) => o.name === s.base);
    if (!external) continue;
    t.regex(s.base, /^(docker\.io\/(library\/)?)?node:20\.\d+\.\d+-(bookworm|bullseye|trixie)-slim(@sha256:[0-9a-f]{64})?$|^gcr\.io\/distroless\/nodejs20-debian\d+(:[\w.-]+)?@sha256:[0-9a-f]{64}$/,
      `stage ${s.name} starts from ${s.base}: pin an exact node:20.x.y-<debian>-slim tag (or a distroless image by digest)`);
  }
});

test("the runtime stage runs as a non-root numeric user", (t) => {
  const users = of(runtime, "USER");
  t.true(users.length > 0, "the runtime stage needs a USER");
  const last = users.at(-1)!.args;
  const [uid, gid] = last.split(":");
  t.regex(uid!, /^\d+$/, "a numeric uid lets Kubernetes' runAsNonRoot verify it");
  t.not(Number(uid), 0, "USER must not be root");
  if (gid !== undefined) t.not(Number(gid), 0, "group must not be root");
  // Nothing after USER may switch back.
  const after = runtime.instructions.slice(runtime.instructions.indexOf(users.at(-1)!));
  t.false(after.some((i) => i.op === "RUN"), "no RUN after USER in the runtime stage (nothing installed as the runtime user)");
});

test("production starts the emitted JavaScript with node: no tsx, no TypeScript source, no dev dependencies", (t) => {
  for (const ins of runtime.instructions) t.notRegex(ins.args, /\btsx\b|\.ts\b|--import/, `runtime stage line ${ins.line}: ${ins.op} ${ins.args}`);
  const entry = JSON.parse(of(runtime, "ENTRYPOINT").at(-1)!.args) as string[];
  t.is(entry[0], "node");
  const main = entry.find((a) => a.endsWith(".js"))!;
  t.is(main, "dist/packages/server/src/main.js");
  t.true(existsSync(join(ROOT, main.replace(/^dist\//, "").replace(/\.js$/, ".ts"))), "the entry point is what tsconfig.build.json emits from packages/server/src/main.ts");
  const build = JSON.parse(readFileSync(join(ROOT, "tsconfig.build.json"), "utf8").replace(/^\s*\/\/.*$/gm, ""));
  t.is(build.compilerOptions.outDir, "dist");
  t.is(build.compilerOptions.rootDir, ".");
  // The runtime's node_modules come from a stage that installed production dependencies only.
  const copies = of(runtime, "COPY").map((c) => c.args);
  const nm = copies.find((c) => /\bnode_modules\b/.test(c))!;
  t.truthy(nm, "the runtime stage copies node_modules");
  const from = /--from=(\S+)/.exec(nm)![1]!;
  const depsStage = stages.find((s) => s.name === from)!;
  t.true(of(depsStage, "RUN").some((r) => /npm ci\b.*--omit=dev/.test(r.args)), `stage ${from} installs with npm ci --omit=dev`);
  t.true(copies.some((c) => /--from=\S+\s+\S*dist\s/.test(c + " ")), "the runtime stage copies dist/");
  t.true(copies.every((c) => c.includes("--from=")), "the runtime stage copies from the earlier stages only, never the build context");
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  t.falsy(pkg.dependencies.tsx, "tsx is a development dependency");
  t.falsy(pkg.dependencies.typescript, "typescript is a development dependency");
});

test("every way of starting the server sizes V8's young generation alike (the image, npm start, start:dist, the bench)", (t) => {
  // With dozens of requests in flight, V8's default young generation (2 x 16 MiB here) has a
  // request's objects survive scavenges, copied and then promoted: the list operations lost
  // 0.1-0.2 of their ratio to the bare page for it (bench/notes/overhead.md). The bench runs the
  // system in its own process, so it must start the way production does to measure it.
  const flagOf = (args: string[], where: string) => {
    const flags = args.filter((a) => a.startsWith("--max-semi-space-size="));
    t.is(flags.length, 1, `${where} passes --max-semi-space-size once`);
    return flags[0];
  };
  const entry = JSON.parse(of(runtime, "ENTRYPOINT").at(-1)!.args) as string[];
  const flag = flagOf(entry, "the runtime ENTRYPOINT");
  t.regex(flag ?? "", /^--max-semi-space-size=\d+$/);
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
  for (const script of ["start", "start:dist", "bench"]) {
    const words = pkg.scripts[script]!.split(/\s+/);
    t.is(flagOf(words.slice(words.indexOf("node")), `npm run ${script}`), flag, `npm run ${script} starts node as the image does`);
  }
});

test("the runtime image carries the OCI labels", (t) => {
  const labels = of(runtime, "LABEL").map((l) => l.args).join(" ");
  for (const key of ["title", "description", "version", "revision", "created", "source", "licenses"]) {
    t.regex(labels, new RegExp(`org\\.opencontainers\\.image\\.${key}=`), `label org.opencontainers.image.${key}`);
  }
});

test(".dockerignore keeps local installs, builds, state and git out of the build context", (t) => {
  const ignored = readFileSync(join(ROOT, ".dockerignore"), "utf8").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  for (const entry of [".git", "dist", "dist-test", "data"]) t.true(ignored.includes(entry), `.dockerignore lists ${entry}`);
  t.true(ignored.includes("node_modules") || ignored.includes("**/node_modules"), ".dockerignore lists node_modules");
});
