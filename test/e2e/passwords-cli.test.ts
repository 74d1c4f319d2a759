/** Admin CLI: passwords are read from standard input and stored as scrypt hashes only. */
import test from "ava";
import { spawn } from "node:child_process";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { entryArgs } from "../helpers/split.js";
import { DEFAULT_SCRYPT, parseHash, verifyPassword } from "../../services/auth/src/domain/passwords.js";
import { FAST_SCRYPT } from "../../services/auth/test/fakes.js";

let sys: TestSystem;
test.before(async () => { sys = await startTestSystem(); });
test.after.always(async () => { await sys?.stop(); });

/** Runs the admin CLI with `input` on standard input: exit code, stdout, stderr. */
function admin(args: string[], input: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...entryArgs("packages/server/src/admin-cli.ts"), ...args], {
      cwd: process.cwd(), env: { ...process.env, ...sys.env, LOG_LEVEL: "error" }, stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "", stderr = "";
    child.stdout.on("data", (d) => { stdout += d; });
    child.stderr.on("data", (d) => { stderr += d; });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

const hashOf = async (username: string): Promise<string | null> =>
  (await sys.system.dbOf("auth")!("users").select("password_hash").where({ username }).first())?.password_hash ?? null;

test.serial("user create --password-stdin stores a hash of the password (one trailing newline is not part of it)", async (t) => {
  t.timeout(120_000);
  const out = await admin(["user", "create", "carol", "--password-stdin"], "a long passphrase\n");
  t.is(out.code, 0, out.stderr);
  t.like(JSON.parse(out.stdout), { username: "carol", plan: "free", is_admin: false });
  const hash = await hashOf("carol");
  t.truthy(hash);
  t.false(hash!.includes("passphrase"));
  t.true(await verifyPassword("a long passphrase", hash!));
  t.false(await verifyPassword("a long passphrase\n", hash!));
  t.deepEqual(parseHash(hash!)?.params, DEFAULT_SCRYPT, "a process started from its environment hashes at the production cost");
});

test.serial("a system given passwordHashParams hashes new passwords with them (the test systems' cheap ones)", async (t) => {
  const u = await sys.user({ password: "a long passphrase" });
  t.deepEqual(parseHash((await hashOf(u.username))!)?.params, FAST_SCRYPT);
  t.notDeepEqual(FAST_SCRYPT, DEFAULT_SCRYPT);
});

test.serial("user password replaces the password; the old one stops matching", async (t) => {
  t.timeout(120_000);
  const out = await admin(["user", "password", "carol"], "another passphrase");
  t.is(out.code, 0, out.stderr);
  t.deepEqual(JSON.parse(out.stdout), { username: "carol", password_set: true });
  const hash = await hashOf("carol");
  t.true(await verifyPassword("another passphrase", hash!));
  t.false(await verifyPassword("a long passphrase", hash!));
});

test.serial("a too short password, or an unknown user, is refused with the contract's error and exit code 1", async (t) => {
  t.timeout(120_000);
  const short = await admin(["user", "password", "carol"], "short\n");
  t.is(short.code, 1);
  t.like(JSON.parse(short.stderr.trim().split("\n").pop()!), { error: "invalid_request", field: "password" });
  const unknown = await admin(["user", "password", "nobody"], "long enough password");
  t.is(unknown.code, 1);
  t.like(JSON.parse(unknown.stderr.trim().split("\n").pop()!), { error: "not_found" });
  const empty = await admin(["user", "create", "dave", "--password-stdin"], "");
  t.not(empty.code, 0);
  t.is(await sys.system.dbOf("auth")!("users").where({ username: "dave" }).first(), undefined);
});
