/**
 * Webhooks through the JSON endpoint, delivered to a local https receiver (its certificate
 * trusted through NODE_EXTRA_CA_CERTS, its host allowed through OUTBOUND_ALLOWED_HOSTS), with
 * short WEBHOOK_* timings: configuration rules, signatures (both kinds), coalescing, publication,
 * retries, failures, disabling, rotation and the test delivery.
 */
import test from "ava";
import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { runJobNow, startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";
import { startReceiver, type Receiver, type Received } from "../helpers/webhook-receiver.js";

// Long enough that the changes a test makes in a row fall in one window even on a loaded machine.
const COALESCE_MS = 1500;
const TIMEOUT_MS = 3000;
let sys: TestSystem;
const receivers: Receiver[] = [];

test.before(async () => {
  sys = await startTestSystem({
    OUTBOUND_ALLOWED_HOSTS: "localhost",
    WEBHOOK_COALESCE_MS: String(COALESCE_MS),
    WEBHOOK_BACKOFF_MS: "150,300,450",
    WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
  });
});
test.after.always(async () => {
  for (const r of receivers) await r.close();
  await sys?.stop();
});

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

/** A published collection of a fresh owner, with a webhook to `r`. */
async function hooked(r: Receiver, opts: { publish?: boolean } = {}): Promise<{ owner: TestUser; id: number; secret: string }> {
  const owner = await sys.user();
  const { collection } = await sys.must(owner.token, { op: "collections.create", name: "Hooked", share_access_level: "public" });
  if (opts.publish !== false) await sys.must(owner.token, { op: "collections.publish", collection_id: collection.id, slug: `hooked-${collection.id}` });
  // The changes so far reach the webhooks service before the webhook exists: none is delivered.
  await sys.system.drainEvents();
  const set = await sys.must(owner.token, { op: "collections.webhook_set", collection_id: collection.id, url: r.url });
  return { owner, id: collection.id, secret: set.secret };
}

function verifyBoth(t: import("ava").ExecutionContext, secret: string, got: Received): void {
  t.is(got.headers["x-service-signature"], `sha256=${createHmac("sha256", secret).update(got.body).digest("hex")}`);
  t.is(got.headers["x-service-delivery"], got.json.id);
  t.is(got.headers["content-type"], "application/json");
  t.deepEqual(new Webhook(secret).verify(got.body, got.headers), got.json);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How many delivery attempts of the collection's webhooks are recorded. */
async function attemptCount(collectionId: number): Promise<number> {
  const db = sys.system.dbOf("webhooks")!;
  const [{ c }] = await db("attempts").join("webhooks", "webhooks.id", "attempts.webhook_id").where("webhooks.collection_id", collectionId).count<{ c: number }[]>("* as c");
  return Number(c);
}

/** Waits until `n` attempts of the collection's webhooks are recorded (the receiver sees one before the service logs it). */
async function attemptsRecorded(collectionId: number, n: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if ((await attemptCount(collectionId)) >= n) return;
    await sleep(25);
  }
  throw new Error(`${n} attempts were never recorded for collection ${collectionId}`);
}

test("configuration: secret once, never again; get shows health and attempts; remove is idempotent; 404 with a hint without one", async (t) => {
  const r = await receiver();
  const owner = await sys.user();
  const { collection } = await sys.must(owner.token, { op: "collections.create", name: "Config" });
  const none = await sys.call(owner.token, { op: "collections.webhook_get", collection_id: collection.id });
  t.is(none.status, 404);
  t.is(none.body.error, "not_found");
  t.truthy(none.body.hint);
  const set = await sys.must(owner.token, { op: "collections.webhook_set", collection_id: collection.id, url: r.url });
  t.regex(set.secret, /^whsec_/);
  t.like(set.webhook, { collection_id: collection.id, url: r.url, events: ["collection.updated"], enabled: true, failure_count: 0, disabled_reason: null, last_status: null });
  t.false("secret" in set.webhook);
  const got = await sys.must(owner.token, { op: "collections.webhook_get", collection_id: collection.id });
  t.false(JSON.stringify(got).includes(set.secret), "the secret is never shown again");
  t.deepEqual(got.webhook.recent_attempts, []);
  t.deepEqual(await sys.must(owner.token, { op: "collections.webhook_remove", collection_id: collection.id }), { removed: true, collection_id: collection.id });
  t.deepEqual(await sys.must(owner.token, { op: "collections.webhook_remove", collection_id: collection.id }), { removed: false, collection_id: collection.id });
  t.is((await sys.call(owner.token, { op: "collections.webhook_get", collection_id: collection.id })).status, 404);
});

test("URL and event rules at webhook_set, and owner only (a collaborator with can_edit is refused)", async (t) => {
  const owner = await sys.user();
  const { collection } = await sys.must(owner.token, { op: "collections.create", name: "Rules" });
  const set = (url: string, extra: Record<string, unknown> = {}, token = owner.token) => sys.call(token, { op: "collections.webhook_set", collection_id: collection.id, url, ...extra });
  t.is((await set("http://localhost:1/x")).body.error, "webhook_url_not_https");
  t.is((await set("https://u:p@localhost:1/x")).body.error, "webhook_url_has_credentials");
  t.is((await set("https://127.0.0.1:1/x")).body.error, "webhook_url_blocked_host");
  t.is((await set("https://2130706433/x")).body.error, "webhook_url_blocked_host");
  t.is((await set("https://[::ffff:10.0.0.1]/x")).body.error, "webhook_url_blocked_host");
  t.is((await set("https://169.254.169.254/latest")).body.error, "webhook_url_blocked_host");
  const own = new URL(sys.url);
  const service = await set(`https://${own.host}/x`);
  t.is(service.body.error, "webhook_url_service_host");
  t.is(service.status, 400);
  const tooLong = await set(`https://localhost/${"a".repeat(2000)}`);
  t.is(tooLong.status, 400);
  t.is(tooLong.body.field, "url");
  const events = await set("https://localhost:1/x", { events: ["collection.deleted"] });
  t.is(events.body.error, "invalid_request");
  t.deepEqual(events.body.allowed_events, ["collection.updated"]);
  t.is((await set("https://localhost:1/x", { events: ["collection.updated"] })).status, 200);

  const editor = await sys.user();
  await sys.must(owner.token, { op: "collaborators.invite", collection_id: collection.id, username: editor.username, can_edit: true });
  await sys.must(editor.token, { op: "collaborators.invite.accept", collection_id: collection.id, inviter_user_id: owner.userId });
  for (const op of ["collections.webhook_set", "collections.webhook_get", "collections.webhook_remove", "collections.webhook_test"]) {
    const res = await sys.call(editor.token, { op, collection_id: collection.id, ...(op.endsWith("set") ? { url: "https://localhost:1/x" } : {}) });
    t.is(res.status, 403, op);
  }
  t.is((await sys.call(owner.token, { op: "collections.webhook_get", collection_id: 999999999 })).status, 404);
});

test("many changes within one window make one signed delivery listing them", async (t) => {
  const r = await receiver();
  const { owner, id, secret } = await hooked(r);
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "Renamed" });
  for (let i = 0; i < 5; i++) await sys.must(owner.token, { op: "media.text_note.add", collection_id: id, name: `n${i}`, text: "x" });
  const [got] = await r.waitFor(1);
  await sleep(COALESCE_MS * 2);
  t.is(r.received.length, 1, "one delivery for the window");
  verifyBoth(t, secret, got!);
  t.like(got!.json, { type: "collection.updated", collection_id: id, published: true });
  t.deepEqual(got!.json.changes.map((c: { kind: string }) => c.kind), ["renamed", "media_added", "media_added", "media_added", "media_added", "media_added"]);
  const health = await sys.must(owner.token, { op: "collections.webhook_get", collection_id: id });
  t.like(health.webhook, { failure_count: 0, last_status: 200, last_error: null });
  t.like(health.webhook.recent_attempts[0], { event: "collection.updated", attempt: 1, status: 200, error: null, delivery_id: got!.json.id });
});

test("nothing while unpublished; the unpublish itself is delivered", async (t) => {
  const r = await receiver();
  const { owner, id } = await hooked(r, { publish: false });
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "Quiet" });
  await sleep(COALESCE_MS * 3);
  t.is(r.received.length, 0, "an unpublished collection's changes are not delivered");
  await sys.must(owner.token, { op: "collections.publish", collection_id: id, slug: `q-${id}` });
  const [pub] = await r.waitFor(1);
  t.deepEqual(pub!.json.changes.map((c: { kind: string }) => c.kind), ["published"]);
  await sys.must(owner.token, { op: "collections.unpublish", collection_id: id });
  const [, unpub] = await r.waitFor(2);
  t.like(unpub!.json, { published: false });
  t.deepEqual(unpub!.json.changes.map((c: { kind: string }) => c.kind), ["unpublished"]);
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "After" });
  await sleep(COALESCE_MS * 3);
  t.is(r.received.length, 2, "nothing after the unpublish");
});

test("retries: a 500, a timeout and a 3xx are failures retried with the same delivery id; the fourth attempt is the last", async (t) => {
  const r = await receiver();
  const { owner, id } = await hooked(r);
  r.script({ status: 500 }, { hang: true }, { status: 302, headers: { location: "https://localhost/elsewhere" } }, { status: 200 });
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "Retry me" });
  const got = await r.waitFor(4, 30_000);
  t.is(new Set(got.map((g) => g.json.id)).size, 1, "one delivery, four attempts");
  t.is(new Set(got.map((g) => g.body)).size, 1, "the same body every time");
  await attemptsRecorded(id, 4);
  const health = await sys.must(owner.token, { op: "collections.webhook_get", collection_id: id });
  const attempts = health.webhook.recent_attempts.slice(0, 4).reverse();
  t.deepEqual(attempts.map((a: { attempt: number }) => a.attempt), [1, 2, 3, 4]);
  t.deepEqual(attempts.map((a: { status: number | null }) => a.status), [500, null, 302, 200]);
  t.regex(attempts[1].error, new RegExp(`within ${TIMEOUT_MS} ms`));
  t.regex(attempts[2].error, /redirects are not followed/);
  t.like(health.webhook, { failure_count: 0, last_status: 200 });

  // A delivery failing all four attempts counts one failure.
  r.script({ status: 500 }, { status: 500 }, { status: 500 }, { status: 500 });
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "Fail me" });
  await r.waitFor(8, 30_000);
  await attemptsRecorded(id, 8);
  const after = await sys.must(owner.token, { op: "collections.webhook_get", collection_id: id });
  t.like(after.webhook, { failure_count: 1, last_status: 500, enabled: true });
});

test("twenty failed deliveries disable the webhook; webhook_set re-enables it with a new secret (the old one stops signing)", async (t) => {
  const r = await receiver();
  const { owner, id, secret } = await hooked(r);
  const hook = await sys.system.dbOf("webhooks")!("webhooks").where({ collection_id: id }).whereNull("removed_at").first();
  // Nineteen failed deliveries already happened (the log of their attempts is not needed here).
  await sys.system.dbOf("webhooks")!("webhooks").where({ id: hook.id }).update({ failure_count: 19 });
  r.fallback = { status: 500 };
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "Twentieth" });
  await r.waitFor(4, 30_000);
  await attemptsRecorded(id, 4);
  const disabled = await sys.must(owner.token, { op: "collections.webhook_get", collection_id: id });
  t.like(disabled.webhook, { enabled: false, failure_count: 20 });
  t.regex(disabled.webhook.disabled_reason, /20 consecutive/);
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "While disabled" });
  await sleep(COALESCE_MS * 3);
  t.is(r.received.length, 4, "nothing is delivered while disabled");

  r.fallback = { status: 200 };
  const reset = await sys.must(owner.token, { op: "collections.webhook_set", collection_id: id, url: r.url });
  t.not(reset.secret, secret);
  t.like(reset.webhook, { enabled: true, failure_count: 0, disabled_reason: null });
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "Enabled again" });
  const [, , , , next] = await r.waitFor(5);
  verifyBoth(t, reset.secret, next!);
  t.throws(() => new Webhook(secret).verify(next!.body, next!.headers), undefined, "the old secret no longer verifies");
});

test("a 410 Gone disables at once", async (t) => {
  const r = await receiver();
  const { owner, id } = await hooked(r);
  r.script({ status: 410 });
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "Gone" });
  await r.waitFor(1);
  await sleep(COALESCE_MS);
  const h = await sys.must(owner.token, { op: "collections.webhook_get", collection_id: id });
  t.like(h.webhook, { enabled: false, last_status: 410 });
  t.regex(h.webhook.disabled_reason, /410/);
  t.is(r.received.length, 1, "no retry after a 410");
});

test("webhook_test sends one signed test delivery now and answers the attempt; a failing one answers delivered:false", async (t) => {
  const r = await receiver();
  const { owner, id, secret } = await hooked(r, { publish: false });
  const ok = await sys.must(owner.token, { op: "collections.webhook_test", collection_id: id });
  t.true(ok.delivered);
  t.like(ok.attempt, { event: "webhook.test", attempt: 1, status: 200, error: null });
  const [got] = await r.waitFor(1);
  verifyBoth(t, secret, got!);
  t.like(got!.json, { type: "collection.updated", test: true, collection_id: id });
  r.script({ status: 503 });
  const bad = await sys.must(owner.token, { op: "collections.webhook_test", collection_id: id });
  t.false(bad.delivered);
  t.like(bad.attempt, { status: 503 });
  const h = await sys.must(owner.token, { op: "collections.webhook_get", collection_id: id });
  t.is(h.webhook.failure_count, 0, "tests do not count as failures");
  t.is(h.webhook.recent_attempts[0].event, "webhook.test");
});

test("removing a webhook discards what was queued", async (t) => {
  const r = await receiver();
  const { owner, id } = await hooked(r);
  r.fallback = { status: 500 };
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "Queued" });
  await r.waitFor(1, 30_000);
  await sys.must(owner.token, { op: "collections.webhook_remove", collection_id: id });
  await sleep(1200);
  t.is(r.received.length, 1, "the queued retries were discarded");
  const db = sys.system.dbOf("webhooks")!;
  const left = await db("deliveries").where({ collection_id: id, state: "pending" });
  t.deepEqual(left, []);
});

test("one slow receiver does not hold back another collection's deliveries", async (t) => {
  const slow = await receiver();
  const fast = await receiver();
  slow.fallback = { hang: true };
  const a = await hooked(slow);
  const b = await hooked(fast);
  await sys.must(a.owner.token, { op: "collections.update", collection_id: a.id, name: "Slow" });
  await slow.waitFor(1);
  await sys.must(b.owner.token, { op: "collections.update", collection_id: b.id, name: "Fast" });
  // The slow attempt holds its slot until its deadline; the other goes out meanwhile (a receiver
  // sees its request before the attempt is recorded, so nothing is recorded for the slow one yet).
  await fast.waitFor(1);
  t.is(await attemptCount(a.id), 0, "the slow attempt is still in flight");
  slow.fallback = { status: 200 };
});

// Serial (ava runs these before the others): the job, run as if a month had passed, purges every old log.
test.serial("the delivery log of a removed webhook is kept 30 days, then purged by the job", async (t) => {
  const r = await receiver();
  const { owner, id } = await hooked(r);
  await sys.must(owner.token, { op: "collections.update", collection_id: id, name: "Logged" });
  await r.waitFor(1);
  await attemptsRecorded(id, 1);
  await sys.must(owner.token, { op: "collections.webhook_remove", collection_id: id });
  const db = sys.system.dbOf("webhooks")!;
  const hook = await db("webhooks").where({ collection_id: id }).whereNotNull("removed_at").first();
  const count = async (table: string) => Number((await db(table).where({ webhook_id: hook.id }).count<{ n: number }[]>("* as n"))[0]!.n);
  await runJobNow(sys.system, "delivery_log_purge", { now: new Date(Date.now() + 29 * 24 * 3600_000).toISOString() });
  t.is(await count("deliveries"), 1, "kept within 30 days");
  t.true(await count("attempts") >= 1);
  const purged = await runJobNow(sys.system, "delivery_log_purge", { now: new Date(Date.now() + 31 * 24 * 3600_000).toISOString() });
  t.true(Number(purged.webhooks) >= 1);
  t.is(await count("deliveries"), 0);
  t.is(await count("attempts"), 0);
  t.falsy(await db("webhooks").where({ id: hook.id }).first());
});
