/**
 * The event bus: outbox rows written in the caller's transaction, relayed after commit to the
 * in-process transport (always) and to NATS JetStream (when NATS_URL is set).
 */
import test, { type ExecutionContext } from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Knex } from "knex";
import { freshDatabase } from "../../../test/helpers/system.ts";
import { createDb, migrate } from "../src/db.ts";
import { createLogger } from "../src/logger.ts";
import {
  claimDueRows,
  createLocalTransport,
  createNatsTransport,
  createOutboxRelay,
  enqueueEvent,
  serviceMigrations,
  type BusEvent,
  type BusTransport,
  type OutboxRelay,
} from "../src/bus.ts";

const log = createLogger("silent");
const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
let database: { url: string; drop(): Promise<void> };
const knexes: Knex[] = [];

test.before(async () => { database = await freshDatabase(adminUrl); });
test.after.always(async () => {
  for (const k of knexes) await k.destroy().catch(() => {});
  await database?.drop();
});

/** A schema of its own (with the outbox) for one test. */
async function freshSchema(): Promise<Knex> {
  const schema = `bus_${randomBytes(4).toString("hex")}`;
  const db = createDb(database.url, schema, 5);
  knexes.push(db);
  await migrate(db, schema, serviceMigrations([]));
  return db;
}

async function outboxCount(db: Knex): Promise<number> {
  const row = await db("outbox").count<{ count: number }[]>("* as count").first();
  return Number(row!.count);
}

/** Resolves once `pred` holds; polls (the ava timeout bounds the wait). */
async function until(pred: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await pred())) await sleep(20);
}

interface Harness { db: Knex; transport: BusTransport; relay: OutboxRelay }
async function localHarness(t: ExecutionContext, relayOpts: { pollMs?: number } = {}): Promise<Harness> {
  const db = await freshSchema();
  const transport = createLocalTransport(log);
  const relay = createOutboxRelay(db, transport, log, relayOpts);
  t.teardown(async () => { await relay.stop(); await transport.close(); });
  return { db, transport, relay };
}

test("an event enqueued in a committed transaction reaches every subscriber", async (t) => {
  const { db, transport, relay } = await localHarness(t);
  const a: BusEvent[] = [];
  const b: BusEvent[] = [];
  await transport.subscribe("sub-a", "thing.created", async (e) => { a.push(e); });
  await transport.subscribe("sub-b", "thing.created", async (e) => { b.push(e); });
  const other: BusEvent[] = [];
  await transport.subscribe("sub-c", "thing.deleted", async (e) => { other.push(e); });

  let id = "";
  await db.transaction(async (trx) => {
    id = await enqueueEvent(trx, "thing.created", { thing_id: 7, name: "seven", tags: ["x"] });
  });
  t.is(await outboxCount(db), 1);
  t.is(a.length, 0, "nothing is published before the relay runs");

  await relay.drain();
  t.is(a.length, 1);
  t.is(b.length, 1);
  t.is(other.length, 0);
  t.is(a[0]!.id, id);
  t.is(a[0]!.type, "thing.created");
  t.deepEqual(a[0]!.payload, { thing_id: 7, name: "seven", tags: ["x"] });
  t.false(Number.isNaN(Date.parse(a[0]!.occurredAt)));
  t.is(b[0]!.id, id);
  t.is(await outboxCount(db), 0, "published rows are deleted");
});

test("an event enqueued in a transaction that rolls back is never delivered", async (t) => {
  const { db, transport, relay } = await localHarness(t);
  const seen: BusEvent[] = [];
  await transport.subscribe("sub", "thing.created", async (e) => { seen.push(e); });

  await t.throwsAsync(db.transaction(async (trx) => {
    await enqueueEvent(trx, "thing.created", { rolled_back: true });
    throw new Error("abort the transaction");
  }), { message: "abort the transaction" });
  t.is(await outboxCount(db), 0);

  // A committed event after it proves the relay did run.
  const marker = await db.transaction((trx) => enqueueEvent(trx, "thing.created", { marker: true }));
  await relay.drain();
  t.deepEqual(seen.map((e) => e.id), [marker]);
  t.deepEqual(seen.map((e) => e.payload), [{ marker: true }]);
});

test("a handler that throws gets the event again (at least once); the row goes after success", async (t) => {
  const { db, transport, relay } = await localHarness(t);
  const calls: BusEvent[] = [];
  const attemptsSeen: number[] = [];
  await transport.subscribe("flaky", "thing.created", async (e) => {
    calls.push(e);
    const row = await db("outbox").where({ id: e.id }).first();
    attemptsSeen.push(row?.attempts);
    if (calls.length === 1) throw new Error("transient failure");
  });
  const id = await db.transaction((trx) => enqueueEvent(trx, "thing.created", { n: 1 }));
  await relay.drain();
  t.is(calls.length, 2);
  t.deepEqual(calls.map((e) => e.id), [id, id]);
  t.deepEqual(calls[1]!.payload, { n: 1 });
  t.deepEqual(attemptsSeen, [0, 1], "the failed attempt was recorded on the row");
  t.is(await outboxCount(db), 0);
});

test("a failed publish keeps its event as it was (seq, id, payload, trace headers), one attempt more and later; the pass goes on with the rest", async (t) => {
  const db = await freshSchema();
  const inner = createLocalTransport(log);
  let failFor: string | undefined;
  // Fails the publish itself (not a handler), once, for one event.
  const transport: BusTransport = { ...inner, async publish(e) { if (e.id === failFor) { failFor = undefined; throw new Error("broker down"); } await inner.publish(e); } };
  const relay = createOutboxRelay(db, transport, log);
  t.teardown(async () => { await relay.stop(); await inner.close(); });
  const seen: number[] = [];
  const headersOf = new Map<number, Record<string, string>>();
  await inner.subscribe("sub", "n", async (e) => { seen.push(e.payload.n as number); headersOf.set(e.payload.n as number, e.headers); });
  const ids = await db.transaction(async (trx) => [await enqueueEvent(trx, "n", { n: 1 }), await enqueueEvent(trx, "n", { n: 2 }), await enqueueEvent(trx, "n", { n: 3 })]);
  await db("outbox").where({ id: ids[0] }).update({ headers: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } });
  const before = await db("outbox").where({ id: ids[0] }).first();
  failFor = ids[0];
  t.is(await (relay as unknown as { drain(ms?: number): Promise<void> }).drain(5_000).then(() => seen.length), 3);
  t.deepEqual(seen.slice(0, 2), [2, 3], "the rest went out in the same pass");
  t.deepEqual(seen[2], 1, "the failed one on a later pass");
  t.is(await outboxCount(db), 0);
  // What the failed pass wrote back, seen by failing the same event on every pass.
  const again = await db.transaction((trx) => enqueueEvent(trx, "n", { n: 4 }));
  const row0 = await db("outbox").where({ id: again }).first();
  const failing: BusTransport = { ...inner, async publish() { throw new Error("broker down"); } };
  const stuck = createOutboxRelay(db, failing, log);
  const drainStarted = Date.now();
  await t.throwsAsync(stuck.drain(300));
  const row1 = await db("outbox").where({ id: again }).first();
  t.is(row1.seq, row0.seq, "same seq: it keeps its place in the order");
  t.deepEqual(row1.payload, { n: 4 });
  t.true(row1.attempts >= 1, "its failed attempts are counted");
  t.true(new Date(row1.next_attempt_at).getTime() >= drainStarted + 200, "the next attempt is later (at least 250 ms after a failure)");
  t.deepEqual(new Date(row1.occurred_at), new Date(row0.occurred_at));
  t.is(headersOf.get(1)?.traceparent, before.headers.traceparent, "the retried event still carries the context it was written in");
});

test("a pass that fails part-way takes nothing and leaves its connection usable: the next pass publishes", async (t) => {
  // A pool of one connection: the next pass runs on the connection the failed one used.
  const { rows: [{ schema }] } = await (await freshSchema()).raw("SELECT current_schema() AS schema");
  const db = createDb(database.url, schema, 1);
  knexes.push(db);
  // The write-back of a failed publish (attempts 1) is refused: the pass fails after its claim.
  await db.raw("ALTER TABLE outbox ADD CONSTRAINT first_attempt_only CHECK (attempts = 0)");
  const inner = createLocalTransport(log);
  let fail = true;
  const transport: BusTransport = { ...inner, async publish(e) { if (fail) { fail = false; throw new Error("broker down"); } await inner.publish(e); } };
  const relay = createOutboxRelay(db, transport, log);
  t.teardown(async () => { await relay.stop(); await inner.close(); });
  const seen: string[] = [];
  await transport.subscribe("sub", "thing.created", async (e) => { seen.push(e.id); });
  const id = await db.transaction((trx) => enqueueEvent(trx, "thing.created", { n: 1 }));

  await t.throwsAsync(relay.drain(), { message: /first_attempt_only/ });
  const row = await db("outbox").where({ id }).first();
  t.is(row?.attempts, 0, "the claim was rolled back with the failed write-back");
  t.deepEqual(seen, []);

  await relay.drain();
  t.deepEqual(seen, [id]);
  t.is(await outboxCount(db), 0);
});

test("a relay's claim makes its own transaction's commit asynchronous, and only its own; the relay's passes claim with it", async (t) => {
  const { db, transport, relay } = await localHarness(t);
  const claims: string[] = [];
  db.on("query", (q: { sql: string }) => { if (/^\s*DELETE FROM outbox/.test(q.sql)) claims.push(q.sql); });
  const ids = await db.transaction(async (trx) => [await enqueueEvent(trx, "n", { n: 1 }), await enqueueEvent(trx, "n", { n: 2 })]);
  const setting = async (q: Knex | Knex.Transaction) => (await q.raw("SHOW synchronous_commit")).rows[0].synchronous_commit as string;
  t.is(await setting(db), "on", "the pool's sessions wait for the WAL flush");
  await db.transaction(async (trx) => {
    t.is(await setting(trx), "on");
    const rows = await claimDueRows(trx, 1);
    t.deepEqual(rows.map((r) => r.id), [ids[0]], "the first due row, no more than the batch");
    t.is(await setting(trx), "off", "this transaction's commit does not wait for its WAL");
  });
  // A pool of five: the claim's session is among them; none keeps the setting past its transaction.
  const sessions = await Promise.all(Array.from({ length: 5 }, () => db.transaction((trx) => setting(trx).then(async (v) => { await sleep(50); return v; }))));
  t.deepEqual(sessions, ["on", "on", "on", "on", "on"]);
  t.is(await outboxCount(db), 1, "the claimed row is gone once committed, the other stays");

  // The relay claims with that statement and no other.
  const [tested] = claims.splice(0);
  const seen: string[] = [];
  await transport.subscribe("sub", "n", async (e) => { seen.push(e.id); });
  await relay.drain();
  t.deepEqual(seen, [ids[1]]);
  t.true(claims.length >= 1);
  t.deepEqual(new Set(claims), new Set([tested]), "every pass claims with the statement tested above");
});

test("events of one outbox are published in commit order", async (t) => {
  const { db, transport, relay } = await localHarness(t);
  const seen: number[] = [];
  await transport.subscribe("sub", "n", async (e) => { seen.push(e.payload.n as number); });
  await db.transaction(async (trx) => {
    for (let n = 1; n <= 5; n++) await enqueueEvent(trx, "n", { n });
  });
  await db.transaction((trx) => enqueueEvent(trx, "n", { n: 6 }));
  await relay.drain();
  t.deepEqual(seen, [1, 2, 3, 4, 5, 6]);
});

test("two relays on one outbox (two replicas) still publish in commit order", async (t) => {
  const { db, transport } = await localHarness(t);
  const seen: number[] = [];
  // A slow publish keeps one pass busy while the other tries to run.
  await transport.subscribe("sub", "n", async (e) => { await sleep(5); seen.push(e.payload.n as number); });
  const replicas = [createOutboxRelay(db, transport, log, { batch: 3 }), createOutboxRelay(db, transport, log, { batch: 3 })];
  for (let n = 1; n <= 12; n++) await db.transaction((trx) => enqueueEvent(trx, "n", { n }));
  await Promise.all([...replicas.map((r) => r.drain()), ...replicas.map((r) => r.drain())]);
  await until(async () => (await outboxCount(db)) === 0);
  t.deepEqual(seen, Array.from({ length: 12 }, (_, i) => i + 1));
});

test("drain waits for what was pending at its call while a long pass of the running relay holds the outbox", async (t) => {
  const { db, transport, relay } = await localHarness(t);
  const seen: string[] = [];
  let release!: () => void;
  const held = new Promise<void>((r) => { release = r; });
  let entered = false;
  await transport.subscribe("sub", "n", async (e) => {
    if (e.payload.block) { entered = true; await held; }
    seen.push(e.id);
  });
  await db.transaction((trx) => enqueueEvent(trx, "n", { block: true }));
  relay.start();
  await until(() => entered);
  const target = await db.transaction((trx) => enqueueEvent(trx, "n", { target: true }));
  // The running pass holds the first event (and the outbox lock) well past what a fixed number
  // of retries would wait; drain must not give up and return before `target` is published.
  setTimeout(release, 4_000);
  await relay.drain();
  t.true(seen.includes(target), "the event pending at the call was published before drain resolved");
});

test("drain rejects, naming what is left, when the transport keeps failing", async (t) => {
  const { db, transport, relay } = await localHarness(t);
  await transport.subscribe("sub", "n", async () => { throw new Error("receiver down"); });
  await db.transaction((trx) => enqueueEvent(trx, "n", { n: 1 }));
  await t.throwsAsync(relay.drain(600), { message: /1 event\(s\) pending when the wait began are still unpublished after 600 ms/ });
  t.is(await outboxCount(db), 1, "the event stays in the outbox for a later pass");
});

test("a started relay publishes when notified", async (t) => {
  // A poll interval far beyond the test timeout: only notify() can wake the relay.
  const { db, transport, relay } = await localHarness(t, { pollMs: 3_600_000 });
  t.timeout(30_000);
  const seen: BusEvent[] = [];
  await transport.subscribe("sub", "thing.created", async (e) => { seen.push(e); });
  // A first event proves the relay ran its first pass and went to sleep afterwards.
  const first = await db.transaction((trx) => enqueueEvent(trx, "thing.created", { first: true }));
  relay.start();
  await until(() => seen.length === 1);
  await until(async () => (await outboxCount(db)) === 0);
  const id = await db.transaction((trx) => enqueueEvent(trx, "thing.created", { woke: true }));
  relay.notify();
  await until(() => seen.length === 2);
  t.deepEqual(seen.map((e) => e.id), [first, id]);
  await until(async () => (await outboxCount(db)) === 0);
  await relay.stop();
});

test("a started relay also finds events on its timer (no notify)", async (t) => {
  const { db, transport, relay } = await localHarness(t, { pollMs: 50 });
  t.timeout(30_000);
  const seen: BusEvent[] = [];
  await transport.subscribe("sub", "thing.created", async (e) => { seen.push(e); });
  relay.start();
  const id = await db.transaction((trx) => enqueueEvent(trx, "thing.created", { timer: true }));
  await until(() => seen.length > 0);
  t.deepEqual(seen.map((e) => e.id), [id]);
});

test("an idle relay's timer asks whether a row is due and claims only then: one read a pass, no transaction", async (t) => {
  const { db, transport, relay } = await localHarness(t, { pollMs: 30 });
  t.timeout(30_000);
  const statements: string[] = [];
  db.on("query", (q: { sql: string }) => statements.push(q.sql.replace(/\s+/g, " ").trim()));
  const count = (re: RegExp) => statements.filter((sql) => re.test(sql)).length;
  const seen: BusEvent[] = [];
  await transport.subscribe("sub", "thing.created", async (e) => { seen.push(e); });
  relay.start();
  await until(() => count(/^SELECT EXISTS/) >= 3 || count(/^DELETE FROM outbox/) >= 3);
  // The start's own pass claims; the timer's passes after it only read.
  t.is(count(/^DELETE FROM outbox/), 1);
  t.is(count(/^BEGIN/i), 1);
  // A row the timer finds (written without a notify, as a crash between commit and notify leaves it) is claimed and published.
  const id = await db.transaction((trx) => enqueueEvent(trx, "thing.created", { idle: true }));
  await until(() => seen.length > 0);
  t.deepEqual(seen.map((e) => e.id), [id]);
  t.is(count(/^DELETE FROM outbox/), 2);
});

test("local transport refuses a duplicate subscription name on one type", async (t) => {
  const transport = createLocalTransport(log);
  await transport.subscribe("dup", "x", async () => {});
  await t.throwsAsync(transport.subscribe("dup", "x", async () => {}), { message: /duplicate subscription/ });
  await t.notThrowsAsync(transport.subscribe("dup", "y", async () => {}));
  await transport.close();
});

test("local broadcast reaches onBroadcast handlers of that type only", async (t) => {
  const transport = createLocalTransport(log);
  const got: Array<Record<string, unknown>> = [];
  const other: Array<Record<string, unknown>> = [];
  await transport.onBroadcast("auth.token.revoked", (p) => { got.push(p); });
  await transport.onBroadcast("auth.token.revoked", (p) => { got.push({ second: p.token_hash }); });
  await transport.onBroadcast("something.else", (p) => { other.push(p); });
  transport.broadcast("auth.token.revoked", { token_hash: "abc" });
  t.deepEqual(got, [{ token_hash: "abc" }, { second: "abc" }]);
  t.deepEqual(other, []);
  await transport.close();
  transport.broadcast("auth.token.revoked", { token_hash: "after-close" });
  t.is(got.length, 2, "close() drops the handlers");
});

// ---- NATS JetStream ---------------------------------------------------------------------
const natsTest = process.env.NATS_URL ? test.serial : test.skip;

async function natsSetup(t: ExecutionContext) {
  const id = randomBytes(4).toString("hex");
  const stream = `CMS_BUSTEST_${id}`;
  const subjectPrefix = `cmsbustest.${id}`;
  const transports: BusTransport[] = [];
  const open = async () => {
    const tr = await createNatsTransport({ url: process.env.NATS_URL!, stream, subjectPrefix, log });
    transports.push(tr);
    return tr;
  };
  const { connect } = await import("@nats-io/transport-node");
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const nc = await connect({ servers: process.env.NATS_URL });
  const jsm = await jetstreamManager(nc);
  t.teardown(async () => {
    for (const tr of transports) await tr.close().catch(() => {});
    await jsm.streams.delete(stream).catch(() => {});
    await nc.close();
  });
  return { stream, open, jsm };
}

natsTest("NATS: a committed event reaches a durable subscriber through the relay", async (t) => {
  t.timeout(60_000);
  const { stream, open, jsm } = await natsSetup(t);
  const db = await freshSchema();
  const transport = await open();
  const relay = createOutboxRelay(db, transport, log);
  t.teardown(() => relay.stop());
  const seen: BusEvent[] = [];
  await transport.subscribe("webhooks-collection-updated", "collection.updated", async (e) => { seen.push(e); });
  t.truthy(await jsm.consumers.info(stream, "webhooks-collection-updated"), "a durable consumer exists");

  await t.throwsAsync(db.transaction(async (trx) => {
    await enqueueEvent(trx, "collection.updated", { rolled_back: true });
    throw new Error("rollback");
  }));
  const id = await db.transaction((trx) => enqueueEvent(trx, "collection.updated", { collection_id: 12, change: "renamed" }));
  await relay.drain();
  t.is(await outboxCount(db), 0);
  await until(() => seen.length >= 1);
  t.is(seen[0]!.id, id);
  t.is(seen[0]!.type, "collection.updated");
  t.deepEqual(seen[0]!.payload, { collection_id: 12, change: "renamed" });
  t.false(Number.isNaN(Date.parse(seen[0]!.occurredAt)));
  const info = await jsm.streams.info(stream);
  t.is(info.state.messages, 1, "the rolled-back event was never published");
});

natsTest("NATS: settle resolves once every consumer has processed what was published before it, and names a consumer that does not", async (t) => {
  t.timeout(60_000);
  const { open } = await natsSetup(t);
  const transport = await open();
  const done: string[] = [];
  await transport.subscribe("slow-sub", "thing.created", async (e) => { await sleep(1_500); done.push(e.id); });
  await transport.subscribe("quick-sub", "thing.other", async (e) => { done.push(e.id); });
  const event: BusEvent = { id: randomUUID(), type: "thing.created", payload: {}, occurredAt: new Date().toISOString(), headers: {} };
  await transport.publish(event);
  await transport.settle();
  t.deepEqual(done, [event.id], "the slow handler finished before settle resolved; the other consumer's filter never matched");

  // A subscription whose process is gone: its consumer stays behind, and settle says so.
  const gone = await open();
  await gone.subscribe("gone-sub", "thing.later", async () => {});
  await gone.close();
  await transport.publish({ ...event, id: randomUUID(), type: "thing.later" });
  await t.throwsAsync(transport.settle(500), { message: /consumer\(s\) gone-sub have not processed/ });
});

natsTest("NATS: the same event id published twice is delivered once", async (t) => {
  t.timeout(60_000);
  const { stream, open, jsm } = await natsSetup(t);
  const transport = await open();
  const seen: BusEvent[] = [];
  await transport.subscribe("dedup-sub", "thing.created", async (e) => { seen.push(e); });
  const event: BusEvent = { id: randomUUID(), type: "thing.created", payload: { n: 1 }, occurredAt: new Date().toISOString(), headers: {} };
  await transport.publish(event);
  await transport.publish({ ...event, payload: { n: 1, resent: true } });
  const marker: BusEvent = { id: randomUUID(), type: "thing.created", payload: { marker: true }, occurredAt: new Date().toISOString(), headers: {} };
  await transport.publish(marker);
  // One consumer delivers in stream order: once the marker is in, any duplicate would be too.
  await until(() => seen.some((e) => e.id === marker.id));
  t.deepEqual(seen.map((e) => e.id), [event.id, marker.id]);
  t.deepEqual(seen[0]!.payload, { n: 1 });
  t.is((await jsm.streams.info(stream)).state.messages, 2);
});

natsTest("NATS: a failing handler gets the event redelivered", async (t) => {
  t.timeout(60_000);
  const { open } = await natsSetup(t);
  const transport = await open();
  const calls: string[] = [];
  await transport.subscribe("flaky-sub", "thing.created", async (e) => {
    calls.push(e.id);
    if (calls.length === 1) throw new Error("transient");
  });
  const event: BusEvent = { id: randomUUID(), type: "thing.created", payload: {}, occurredAt: new Date().toISOString(), headers: {} };
  await transport.publish(event);
  await until(() => calls.length >= 2);
  t.deepEqual(calls.slice(0, 2), [event.id, event.id]);
});

natsTest("NATS: a durable subscription resumes where it left off after a restart", async (t) => {
  t.timeout(60_000);
  const { open } = await natsSetup(t);
  const first = await open();
  const mk = (n: number): BusEvent => ({ id: randomUUID(), type: "thing.created", payload: { n }, occurredAt: new Date().toISOString(), headers: {} });
  // Published before anyone subscribed: the durable consumer still gets it.
  const e1 = mk(1);
  await first.publish(e1);
  const seen1: number[] = [];
  await first.subscribe("resume-sub", "thing.created", async (e) => { seen1.push(e.payload.n as number); });
  await until(() => seen1.length >= 1);
  t.deepEqual(seen1, [1]);
  await sleep(200); // let the ack reach the server
  await first.close();

  const second = await open();
  await second.publish(mk(2));
  const seen2: number[] = [];
  await second.subscribe("resume-sub", "thing.created", async (e) => { seen2.push(e.payload.n as number); });
  await until(() => seen2.length >= 1);
  await second.publish(mk(3));
  await until(() => seen2.length >= 2);
  t.deepEqual(seen2, [2, 3], "the acknowledged event is not delivered again");
});

natsTest("NATS: broadcast reaches onBroadcast handlers", async (t) => {
  t.timeout(30_000);
  const { open } = await natsSetup(t);
  const a = await open();
  const b = await open();
  const got: Array<Record<string, unknown>> = [];
  await b.onBroadcast("auth.token.revoked", (p) => { got.push(p); });
  a.broadcast("auth.token.revoked", { token_hash: "h1" });
  await until(() => got.length >= 1);
  t.deepEqual(got, [{ token_hash: "h1" }]);
});

natsTest("NATS: a broadcast reaches this process's own handlers at once, and only once", async (t) => {
  t.timeout(30_000);
  const { open } = await natsSetup(t);
  const a = await open();
  const b = await open();
  const own: Array<Record<string, unknown>> = [];
  const other: Array<Record<string, unknown>> = [];
  await a.onBroadcast("auth.token.revoked", (p) => { own.push(p); });
  await b.onBroadcast("auth.token.revoked", (p) => { other.push(p); });
  a.broadcast("auth.token.revoked", { token_hash: "h2" });
  t.deepEqual(own, [{ token_hash: "h2" }], "before any round trip through the server");
  await until(() => other.length >= 1);
  await sleep(200); // the echo of a's own broadcast has come back by now, and was skipped
  t.deepEqual(own, [{ token_hash: "h2" }]);
  t.deepEqual(other, [{ token_hash: "h2" }]);
});
