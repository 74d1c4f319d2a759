/**
 * Webhooks in split mode: a retry that fell due while the webhooks process was stopped goes out
 * when it comes back (the schedule lives in PostgreSQL, not in timers), with the same delivery id.
 * Needs real backends (run with npm run test:backends); skipped otherwise.
 */
import test from "ava";
import { call, hookedCollection, mustCall, splitEnabled, startSplitSystem, type SplitSystem } from "../helpers/split.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";

if (!splitEnabled) {
  test.skip("webhooks in split mode (skipped: needs DATABASE_URL and NATS_URL; run with npm run test:backends)", () => {});
} else {
  let sys: SplitSystem;
  let r: Receiver;
  test.before(async () => {
    r = await startReceiver();
    sys = await startSplitSystem({
      env: { OUTBOUND_ALLOWED_HOSTS: "localhost", WEBHOOK_COALESCE_MS: "300", WEBHOOK_BACKOFF_MS: "2000,2000,2000", WEBHOOK_TIMEOUT_MS: "1000" },
    });
  });
  test.after.always(async () => {
    await sys?.stop();
    await r?.close();
  });

  test("a retry due while the webhooks process was stopped is delivered once it is back", async (t) => {
    t.timeout(120_000);
    const gw = sys.gateways[0]!;
    const alice = await sys.user("hooker");
    // The publish's event passes before the webhook exists.
    const id = await hookedCollection(mustCall(sys, gw, alice.token), r.url, { settle: () => sys.settleEvents() });

    r.script({ status: 500 });
    t.is((await call(gw, alice.token, { op: "collections.update", collection_id: id, name: "Changed" })).status, 200);
    const [first] = await r.waitFor(1, 30_000);
    // Its outcome recorded (the retry scheduled in PostgreSQL), the process goes away.
    for (let i = 0; i < 100; i++) {
      const h = await call(gw, alice.token, { op: "collections.webhook_get", collection_id: id });
      if (h.body.webhook?.recent_attempts?.length) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    const webhooks = sys.procs.find((p) => p.name === "webhooks" && !p.done)!;
    webhooks.child.kill("SIGKILL");
    await webhooks.exited;
    // The retry falls due (2 s) while nothing runs the engine.
    await new Promise((res) => setTimeout(res, 3000));
    t.is(r.received.length, 1, "nothing is sent while the webhooks process is down");
    await sys.restart("webhooks");
    const [, retry] = await r.waitFor(2, 30_000);
    t.is(retry!.json.id, first!.json.id, "the same delivery, its second attempt");
    t.is(retry!.body, first!.body);
    const health = await call(gw, alice.token, { op: "collections.webhook_get", collection_id: id });
    t.is(health.status, 200, JSON.stringify(health.body));
    t.deepEqual(health.body.webhook.recent_attempts.map((a: { attempt: number; status: number }) => [a.attempt, a.status]), [[2, 200], [1, 500]]);
  });
}
