/**
 * The README's internal-client example, run as written against an all-in-one system that serves
 * its service port (SERVICE_PORT): as a user with an access token, and as a service with its own
 * credential.
 */
import test from "ava";
import { execFile } from "node:child_process";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { ROOT } from "../helpers/paths.js";

let sys: TestSystem;
test.before(async () => { sys = await startTestSystem({ SERVICE_PORT: "0" }); });
test.after.always(async () => { await sys?.stop(); });

function runExample(env: Record<string, string>): Promise<Record<string, any>> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ["--import", "tsx", "examples/internal-client.ts"], { cwd: ROOT, env: { ...process.env, SERVICE_URL: sys.system.serviceUrl!, ...env }, timeout: 60_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout.trim()))));
  });
}

test("examples/internal-client.ts lists a user's collections with the user's token", async (t) => {
  const alice = await sys.user();
  await sys.must(alice.token, { op: "collections.create", name: "Seen by the internal client" });
  const out = await runExample({ TOKEN: alice.token });
  t.deepEqual(out.collections.map((c: { name: string }) => c.name), ["Seen by the internal client"]);
});

test("examples/internal-client.ts searches public collections with a service credential", async (t) => {
  const bob = await sys.user();
  const { collection } = await sys.must(bob.token, { op: "collections.create", name: "Aurora borealis nights", share_access_level: "public" });
  await sys.must(bob.token, { op: "collections.publish", collection_id: collection.id, slug: "aurora", searchable: true });
  const { credential } = await sys.system.clients.get(AuthService).createServiceCredential({ name: "analytics" });
  const out = await runExample({ SERVICE_CREDENTIAL: credential, QUERY: "aurora" });
  t.true(out.collections.some((hit: { collection: { name: string } }) => hit.collection.name === "Aurora borealis nights"));
});
