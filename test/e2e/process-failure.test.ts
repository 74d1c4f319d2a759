/**
 * A failure nothing handles in a running server process (the entry `npm start` runs): one fatal
 * line in the log's JSON, with the error and its stack, then exit 1 for the orchestrator to start
 * it again. Before, Node printed a plain-text stack on stderr, which log collectors split line by
 * line. The failure is caused by a preloaded fixture once the process says it listens.
 */
import test from "ava";
import { execFileSync, spawn } from "node:child_process";
import { isolatedEnv } from "../helpers/system.js";
import { ROOT } from "../helpers/paths.js";

for (const [kind, msg, message] of [
  ["throw", /^uncaught exception; exiting$/, "thrown after ready"],
  ["reject", /^unhandled rejection; exiting$/, "rejected after ready"],
] as const) {
  test(`${kind === "throw" ? "an exception thrown" : "a rejection"} nobody handles: a fatal JSON line with its stack, and exit 1`, async (t) => {
    const { env, cleanup } = await isolatedEnv({ LOG_LEVEL: "info" });
    t.teardown(async () => {
      // The embedded engine the exit left running (a next start would stop it itself).
      try { execFileSync("pkill", ["-f", `postgres -D ${env.DATA_DIR}`]); } catch { /* none */ }
      await cleanup();
    });
    const child = spawn(process.execPath, ["--import", "tsx", "--import", "./test/fixtures/fail-once-ready.mjs", "packages/server/src/main.ts", "--target=all"], {
      cwd: ROOT, env: { ...process.env, ...env, FAIL_ONCE_READY: kind },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => { stdout += d; });
    child.stderr.on("data", (d) => { stderr += d; });
    const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
    t.is(code, 1, stdout + stderr);
    const lines = stdout.split("\n").filter(Boolean).map((l) => { try { return JSON.parse(l); } catch { return undefined; } });
    t.true(lines.some((l) => /^listening on /.test(l?.msg ?? "")), "it was up first");
    const fatal = lines.find((l) => l?.level === "fatal");
    if (!fatal) return t.fail(`no fatal line:\n${stdout}\n${stderr}`);
    t.regex(fatal.msg, msg);
    t.is(fatal.err.message, message);
    t.regex(fatal.err.stack, /fail-once-ready/);
    t.notRegex(stderr, new RegExp(message), "not a plain-text stack on stderr");
  });
}
