/**
 * A peer's GOAWAY on an idle HTTP/2 connection followed at once by a request: connect-node's
 * session manager lets the late connection error go uncaught (connectrpc/connect-es#1768), which
 * crashed the gateway in split mode when a service shut down; GoawaySafeSessionManager does not.
 * Each case runs in its own process, since the failure is a crash.
 */
import test from "ava";
import { execFile } from "node:child_process";
import { besideModule, nodeArgsOf } from "../../../test/helpers/paths.ts";

const FIXTURE = besideModule(import.meta.url, "./fixtures/goaway-after-idle.ts");
const run = (manager: "plain" | "guarded") => new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
  execFile(process.execPath, [...nodeArgsOf(FIXTURE), manager], { timeout: 30_000 }, (err, stdout, stderr) => {
    resolve({ code: err ? (typeof err.code === "number" ? err.code : null) : 0, stdout, stderr });
  });
});

test("with GoawaySafeSessionManager the process survives, and the request after the GOAWAY is answered on a new connection", async (t) => {
  const r = await run("guarded");
  t.is(r.code, 0, r.stderr);
  t.regex(r.stdout, /survived/);
});

test("connect-node's own manager still crashes there (when this fails, the library is fixed and the guard can go)", async (t) => {
  const r = await run("plain");
  t.not(r.code, 0);
  t.regex(r.stderr, /received GOAWAY without any open streams/);
});
