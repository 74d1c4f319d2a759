/** Idempotency keys: claim, complete/replay, reuse with another body, release, concurrency. */
import test from "ava";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { AppError } from "@cms/platform";
import { useGatewayDatabase } from "./gateway-db.ts";
import { canonicalJson } from "../src/domain/canonical-json.ts";
import { createIdempotencyStore, IDEMPOTENCY_TTL_MS, type Claim, type IdempotencyStore } from "../src/store/idempotency-store.ts";

let store: IdempotencyStore;
const gatewayDb = useGatewayDatabase(test, { ready: (db) => { store = createIdempotencyStore(db); }, closing: () => store?.stop() });

/** A user id no other test uses (the table is shared by the tests of this file). */
const user = () => `user-${randomUUID()}`;

function claimed(c: Claim): Extract<Claim, { kind: "claimed" }> {
  if (c.kind !== "claimed") throw new Error(`expected claimed, got ${c.kind}`);
  return c;
}

test("the first claim of a key is 'claimed' and leaves a pending record", async (t) => {
  const u = user();
  const c = await store.claim(u, "collections.create", "k1", "hash-a");
  t.is(c.kind, "claimed");
  const row = await gatewayDb()("idempotency_keys").where({ user_id: u, op: "collections.create", key: "k1" }).first();
  t.is(row.state, "pending");
  t.is(row.request_hash, "hash-a");
});

test("after complete(), the same request replays the stored response exactly", async (t) => {
  const u = user();
  const c = claimed(await store.claim(u, "collections.create", "k1", "hash-a"));
  const body = '{"collection":{"id":17,"name":"Trip \\u00e9 ☃","tags":[]},"created":true}';
  await c.complete({ status: 201, body });
  for (let i = 0; i < 2; i++) {
    const again = await store.claim(u, "collections.create", "k1", "hash-a");
    t.is(again.kind, "replay");
    if (again.kind === "replay") t.deepEqual(again.response, { status: 201, body });
  }
  // release() after completion does not drop the stored response.
  await c.release();
  t.is((await store.claim(u, "collections.create", "k1", "hash-a")).kind, "replay");
});

test("the same key with a different request body is idempotency_key_reused (409)", async (t) => {
  const u = user();
  const c = claimed(await store.claim(u, "media.create", "k2", "hash-a"));
  // Refused while pending and after completion alike.
  const pending = await t.throwsAsync(store.claim(u, "media.create", "k2", "hash-b"), { instanceOf: AppError });
  t.is((pending as AppError).code, "idempotency_key_reused");
  await c.complete({ status: 200, body: "{}" });
  const err = await t.throwsAsync(store.claim(u, "media.create", "k2", "hash-b"), { instanceOf: AppError });
  const app = err as AppError;
  t.is(app.code, "idempotency_key_reused");
  t.is(app.status, 409);
  t.is(app.extra.field, "idempotency_key");
  t.regex(app.detail, /k2/);
});

test("keys are scoped per user and per operation", async (t) => {
  const u1 = user();
  const u2 = user();
  claimed(await store.claim(u1, "collections.create", "same", "h1"));
  t.is((await store.claim(u2, "collections.create", "same", "h2")).kind, "claimed");
  t.is((await store.claim(u1, "collections.update", "same", "h3")).kind, "claimed");
});

test("release() frees the key for a new claim (any body)", async (t) => {
  const u = user();
  const c = claimed(await store.claim(u, "collections.create", "k3", "hash-a"));
  await c.release();
  t.is(await gatewayDb()("idempotency_keys").where({ user_id: u }).first(), undefined);
  const c2 = await store.claim(u, "collections.create", "k3", "hash-b");
  t.is(c2.kind, "claimed");
});

test("two concurrent claims: one runs, the other waits and then replays", async (t) => {
  t.timeout(30_000);
  const u = user();
  const settled: Claim[] = [];
  const track = (p: Promise<Claim>) => p.then((c) => { settled.push(c); return c; });
  const p1 = track(store.claim(u, "collections.create", "k4", "hash-a"));
  const p2 = track(store.claim(u, "collections.create", "k4", "hash-a"));
  while (settled.length === 0) await sleep(10);
  await sleep(300); // the second one keeps waiting while the first is pending
  t.is(settled.length, 1, "the second claim waits for the first to finish");
  const first = claimed(settled[0]!);
  await first.complete({ status: 201, body: '{"id":1}' });
  const results = await Promise.all([p1, p2]);
  t.deepEqual(results.map((r) => r.kind).sort(), ["claimed", "replay"]);
  const replay = results.find((r) => r.kind === "replay");
  t.deepEqual(replay?.kind === "replay" ? replay.response : undefined, { status: 201, body: '{"id":1}' });
});

test("many concurrent claims: exactly one is claimed", async (t) => {
  t.timeout(30_000);
  const u = user();
  const all = Array.from({ length: 8 }, () => store.claim(u, "collections.create", "k5", "hash-a"));
  // Complete the winner as soon as it appears; every other claim then replays.
  const winner = claimed(await Promise.race(all));
  await winner.complete({ status: 200, body: "done" });
  const results = await Promise.all(all);
  t.is(results.filter((r) => r.kind === "claimed").length, 1);
  t.is(results.filter((r) => r.kind === "replay").length, 7);
});

test("a waiter takes over when the first claim is released", async (t) => {
  t.timeout(30_000);
  const u = user();
  const first = claimed(await store.claim(u, "collections.create", "k6", "hash-a"));
  const waiting = store.claim(u, "collections.create", "k6", "hash-a");
  await sleep(100);
  await first.release();
  const second = await waiting;
  t.is(second.kind, "claimed");
});

test("a claim that waits too long gives conflict", async (t) => {
  const quick = createIdempotencyStore(gatewayDb(), { waitMs: 200 });
  t.teardown(() => quick.stop());
  const u = user();
  claimed(await quick.claim(u, "collections.create", "k7", "hash-a"));
  const err = await t.throwsAsync(quick.claim(u, "collections.create", "k7", "hash-a"), { instanceOf: AppError });
  t.is((err as AppError).code, "conflict");
  t.is((err as AppError).status, 409);
});

test("a record older than 24 hours no longer counts", async (t) => {
  const u = user();
  const c = claimed(await store.claim(u, "collections.create", "k8", "hash-a"));
  await c.complete({ status: 200, body: "old" });
  await gatewayDb()("idempotency_keys").where({ user_id: u }).update({ created_at: new Date(Date.now() - IDEMPOTENCY_TTL_MS - 60_000) });
  const fresh = await store.claim(u, "collections.create", "k8", "hash-b");
  t.is(fresh.kind, "claimed");
});

test("canonicalJson ignores object key order but not array order", (t) => {
  const a = { b: 1, a: { d: [1, { y: 2, x: 1 }], c: "s" }, op: "collections.create" };
  const b = { op: "collections.create", a: { c: "s", d: [1, { x: 1, y: 2 }] }, b: 1 };
  t.is(canonicalJson(a), canonicalJson(b));
  t.is(canonicalJson(a), '{"a":{"c":"s","d":[1,{"x":1,"y":2}]},"b":1,"op":"collections.create"}');
  t.not(canonicalJson({ l: [1, 2] }), canonicalJson({ l: [2, 1] }));
  t.not(canonicalJson({ a: 1 }), canonicalJson({ a: "1" }));
  t.not(canonicalJson({ a: null }), canonicalJson({}));
  t.deepEqual(JSON.parse(canonicalJson(b)), b, "the output is JSON of the same value");
  t.is(canonicalJson({ 'q"uote': "line\nbreak" }), '{"q\\"uote":"line\\nbreak"}');
});
