/**
 * NATS killed and restarted while changes are made, in split mode on the real backends. The test
 * runs its OWN nats-server (JetStream, a store folder of its own, a free port): the machine's
 * shared one is never touched. While it is down, collections.update keeps answering 200 (the
 * events wait in the outbox); once it is back, the outbox publishes every event, the webhooks
 * consumer takes each exactly once (each change appears once in the deliveries), the outboxes
 * empty, and no service process was restarted.
 *
 *   npm run test:backends -- test/faults/nats.test.ts
 */
import test from "ava";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { freePort } from "@cms/platform";
import { hookedCollection, mustCall, splitEnabled, startSplitSystem } from "../helpers/split.js";
import { startReceiver } from "../helpers/webhook-receiver.js";
import { systemDb, until } from "../helpers/faults.js";

async function waitFor(check: () => Promise<boolean> | boolean, ms: number, what: string): Promise<void> {
  if (!(await until(check, ms))) throw new Error(`timed out waiting for ${what}`);
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1", () => { s.destroy(); resolve(true); });
    s.once("error", () => resolve(false));
  });
}

/** A nats-server with JetStream of this test's own, on `port`, keeping its store in `dir`. */
async function startNats(port: number, dir: string): Promise<ChildProcess> {
  const child = spawn("nats-server", ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", dir], { stdio: "ignore" });
  await waitFor(() => listening(port), 20_000, `nats-server on ${port}`);
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGKILL");
  await exited;
}

if (!splitEnabled) {
  test.skip("NATS killed and restarted mid-traffic (skipped: needs the real backends; npm run test:backends)", () => {});
} else {
  test("NATS killed and restarted while changes are made: every event published after it returns, each processed once, no restarts", async (t) => {
    t.timeout(300_000);
    const port = await freePort();
    const store = mkdtempSync(join(tmpdir(), "cms-nats-fault-"));
    let nats = await startNats(port, store);
    t.teardown(async () => { await kill(nats); rmSync(store, { recursive: true, force: true }); });
    const receiver = await startReceiver();
    t.teardown(() => receiver.close());
    const sys = await startSplitSystem({ env: { NATS_URL: `nats://127.0.0.1:${port}`, WEBHOOK_COALESCE_MS: "1000", OUTBOUND_ALLOWED_HOSTS: "localhost" } });
    t.teardown(() => sys.stop());
    const db = await systemDb(t, sys);
    const [gw] = sys.gateways as [string];
    const alice = await sys.user("alice");
    const must = mustCall(sys, gw, alice.token);
    const id = await hookedCollection(must, receiver.url);
    // The path works before the fault: a change is delivered.
    await must({ op: "collections.update", collection_id: id, description: "before" });
    await waitFor(() => receiver.received.length >= 1, 60_000, "the first delivery");
    await sleep(1500);
    const before = receiver.received.length;

    // NATS goes away; changes go on and answer 200 (their events wait in the outbox).
    await kill(nats);
    const CHANGES = 8;
    for (let i = 0; i < CHANGES; i++) {
      await must({ op: "collections.update", collection_id: id, description: `during ${i}` });
      await sleep(250);
    }
    const pendingWhileDown = Number((await db.query("SELECT count(*)::int AS n FROM collections.outbox")).rows[0].n);
    t.true(pendingWhileDown >= 1, "events wait in the outbox while NATS is down");

    // NATS comes back on the same port and store; nobody restarts anything.
    nats = await startNats(port, store);
    const changesAfter = () => receiver.received.slice(before).reduce((n, r) => n + (r.json.changes as unknown[]).length, 0);
    await waitFor(() => changesAfter() >= CHANGES, 150_000, `${CHANGES} changes delivered after NATS returned (got ${changesAfter()})`);
    await sleep(3000); // anything duplicated would arrive meanwhile
    t.is(changesAfter(), CHANGES, "each change delivered exactly once");
    const ats = receiver.received.slice(before).flatMap((r) => (r.json.changes as Array<{ at: string }>).map((c) => c.at));
    t.is(new Set(ats).size, ats.length, "no change twice");
    const { rows } = await db.query("SELECT table_schema FROM information_schema.tables WHERE table_name = 'outbox'");
    for (const { table_schema: schema } of rows) {
      const n = Number((await db.query(`SELECT count(*)::int AS n FROM "${schema}".outbox`)).rows[0].n);
      t.is(n, 0, `the ${schema} outbox is empty`);
    }
    t.true(sys.procs.every((p) => !p.done), `no process exited or was restarted\n${sys.diagnostics()}`);
  });
}
