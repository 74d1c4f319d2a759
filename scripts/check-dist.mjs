// What the image's runtime stage runs, proved without a container engine (CI runs this after
// `npm run build`): in a scratch folder holding only what the Dockerfile's runtime stage holds
// (package.json, package-lock.json, `npm ci --omit=dev`, dist/), the emitted main starts
// `--target=all` on embedded defaults, the emitted admin CLI creates a user and mints a token,
// `ping` answers through the gateway, /metrics answers on METRICS_PORT, and SIGTERM stops it
// cleanly. No tsx, TypeScript or test tool may be installed there. Plain JavaScript: it must
// not depend on the TypeScript tooling it checks the absence of.
//
//   node scripts/check-dist.mjs            (exit 0 and a last line "dist check: passed")
import { spawn, execFile } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdtempSync, rmSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = new URL("..", import.meta.url).pathname;
const MAIN = "dist/packages/server/src/main.js";
const ADMIN = "dist/packages/server/src/admin-cli.js";
/** Development-only packages that must not be in the production install. */
const DEV_ONLY = ["tsx", "typescript", "ava", "@bufbuild/buf", "s3rver"];
const started = Date.now();
const step = (msg) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);

function run(cmd, args, opts) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { maxBuffer: 16 << 20, timeout: 180_000, ...opts }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(" ")} failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

if (!existsSync(join(ROOT, MAIN))) throw new Error(`${MAIN} is missing: run npm run build first`);
const work = mkdtempSync(join(tmpdir(), "cms-dist-"));
// As root the embedded PostgreSQL runs as the postgres OS user, which must enter this folder.
chmodSync(work, 0o755);
let child;
try {
  // The runtime stage: the manifests, production dependencies only, the emitted JavaScript.
  for (const f of ["package.json", "package-lock.json"]) cpSync(join(ROOT, f), join(work, f));
  step("npm ci --omit=dev");
  await run("npm", ["ci", "--omit=dev", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: work });
  const present = DEV_ONLY.filter((p) => existsSync(join(work, "node_modules", p)));
  if (present.length) throw new Error(`development packages in the production install: ${present.join(", ")}`);
  cpSync(join(ROOT, "dist"), join(work, "dist"), { recursive: true, verbatimSymlinks: true });
  step("production install ready; starting dist main --target=all");

  const dataDir = join(work, "data");
  const metricsPort = await freePort();
  const env = {
    PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR ?? "/tmp",
    DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: "0", GATEWAY_API_KEYS: "dist-check-key", METRICS_PORT: String(metricsPort), LOG_LEVEL: "info",
  };
  child = spawn(process.execPath, ["--enable-source-maps", MAIN, "--target=all"], { cwd: work, env, stdio: ["ignore", "pipe", "pipe"] });
  const output = [];
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error(`no ready line within 90 s:\n${output.join("\n")}`)), 90_000);
    const onData = (d) => {
      buf += d.toString("utf8");
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        output.push(line);
        try {
          const entry = JSON.parse(line);
          if (typeof entry.msg === "string" && entry.msg.startsWith("listening on ")) { clearTimeout(timer); resolve(entry.url); }
        } catch { /* not a log line */ }
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", (d) => output.push(`[stderr] ${d.toString("utf8").trimEnd()}`));
    void exited.then(({ code, signal }) => { clearTimeout(timer); reject(new Error(`main exited before it was ready (${code ?? signal}):\n${output.join("\n")}`)); });
  });
  step(`listening on ${url}`);

  const adminEnv = { ...env, LOG_LEVEL: "warn" };
  const created = JSON.parse(await run(process.execPath, [ADMIN, "user", "create", "distcheck"], { cwd: work, env: adminEnv }));
  const { access_token: token } = JSON.parse(await run(process.execPath, [ADMIN, "token", "mint", "distcheck"], { cwd: work, env: adminEnv }));
  const res = await fetch(`${url}/functions/v1/thirdparty-v1`, {
    method: "POST",
    headers: { "content-type": "application/json", apikey: "dist-check-key", authorization: `Bearer ${token}` },
    body: JSON.stringify({ op: "ping" }),
  });
  const body = await res.json();
  if (res.status !== 200 || body.ok !== true || body.user?.user_id !== created.user_id) throw new Error(`ping answered ${res.status}: ${JSON.stringify(body)}`);
  step(`ping answered ok for ${body.user.username}`);

  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  if (!/^cms_op_requests_total\{[^}]*op="ping"/m.test(metrics)) throw new Error(`/metrics lacks the ping's cms_op_requests_total:\n${metrics.slice(0, 2000)}`);
  step("/metrics counted the ping");

  child.kill("SIGTERM");
  const { code, signal } = await exited;
  if (code !== 0) throw new Error(`main exited with ${code ?? signal} on SIGTERM:\n${output.slice(-20).join("\n")}`);
  step("SIGTERM: clean exit 0");
  const pkg = JSON.parse(readFileSync(join(work, "package.json"), "utf8"));
  console.log(`dist check: passed (${Object.keys(pkg.dependencies).length} production dependencies, ${((Date.now() - started) / 1000).toFixed(1)} s)`);
} finally {
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
}
