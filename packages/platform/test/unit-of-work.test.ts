/**
 * The unit of work: stores bound to one transaction, events in the outbox with the state change,
 * the relay woken after the commit only, nothing left by a rollback, and no remote call inside.
 */
import test from "ava";
import { randomBytes } from "node:crypto";
import type { Knex } from "knex";
import { createRouterTransport, createClient } from "@connectrpc/connect";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import { freshDatabase } from "../../../test/helpers/system.ts";
import { createDb, migrate } from "../src/db.ts";
import { serviceMigrations } from "../src/bus.ts";
import { createOneStatementUnit, createUnitOfWork, inUnitOfWork, type EventWriter, type Queryable } from "../src/unit-of-work.ts";
import { assertCalls } from "../src/authn.ts";
import { runInCallScope } from "../src/call-scope.ts";
import { AppError } from "../src/errors.ts";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
let database: { url: string; drop(): Promise<void> };
let db: Knex;

test.before(async () => {
  database = await freshDatabase(adminUrl);
  const schema = `uow_${randomBytes(4).toString("hex")}`;
  db = createDb(database.url, schema, 4);
  await migrate(db, schema, serviceMigrations([["0001_notes", { async up(k) { await k.schema.createTable("notes", (t) => { t.increments("id"); t.text("body"); }); } }]]));
});
test.after.always(async () => {
  await db?.destroy();
  await database?.drop();
});

/** A store over whatever query runner the unit hands it. */
const notesStore = (q: Queryable) => ({
  add: async (body: string) => (await q("notes").insert({ body }).returning("id"))[0].id as number,
  count: async () => Number((await q("notes").count<{ n: number }[]>("* as n"))[0]!.n),
});

test.serial("a committed unit writes its rows and events together and wakes the relay once, after the commit", async (t) => {
  let notified = 0;
  const uow = createUnitOfWork(db, notesStore, { notify: () => { notified++; } });
  const before = Number((await db("outbox").count<{ n: number }[]>("* as n"))[0]!.n);
  const id = await uow(async (notes, events) => {
    t.true(inUnitOfWork());
    const n = await notes.add("hello");
    await events.emit("note.added", { id: n });
    await events.emit("note.added", { id: n, again: true });
    t.is(notified, 0, "not before the commit");
    return n;
  });
  t.false(inUnitOfWork());
  t.is(notified, 1);
  t.truthy(await db("notes").where({ id }).first());
  t.is(Number((await db("outbox").count<{ n: number }[]>("* as n"))[0]!.n), before + 2);
  const quiet = createUnitOfWork(db, notesStore, { notify: () => { t.fail("no events, no wake-up"); } });
  await quiet(async (notes) => notes.count());
});

test.serial("a unit's events are written in one statement at its end, in the order emitted", async (t) => {
  const uow = createUnitOfWork(db, notesStore, { notify: () => {} });
  const inserts: string[] = [];
  const onQuery = (q: { sql: string }) => { if (/insert into "outbox"/i.test(q.sql)) inserts.push(q.sql); };
  db.on("query", onQuery);
  t.teardown(() => { db.off("query", onQuery); });
  const tag = `order-${Date.now()}`;
  await uow(async (notes, events) => {
    for (let i = 0; i < 3; i++) await events.emit("note.ordered", { tag, i });
    t.is(inserts.length, 0, "nothing written before the work is done");
    await notes.add("after the events");
  });
  t.is(inserts.length, 1, "one statement for the three");
  const rows = await db("outbox").whereRaw("payload->>'tag' = ?", [tag]).orderBy("seq");
  t.deepEqual(rows.map((r: { payload: { i: number } }) => r.payload.i), [0, 1, 2]);
});

test.serial("a failed unit leaves neither rows nor events", async (t) => {
  const uow = createUnitOfWork(db, notesStore, { notify: () => t.fail("a rollback wakes nobody") });
  const before = { notes: await notesStore(db).count(), outbox: Number((await db("outbox").count<{ n: number }[]>("* as n"))[0]!.n) };
  await t.throwsAsync(uow(async (notes, events) => {
    await notes.add("lost");
    await events.emit("note.added", {});
    throw new Error("boom");
  }), { message: "boom" });
  t.is(await notesStore(db).count(), before.notes);
  t.is(Number((await db("outbox").count<{ n: number }[]>("* as n"))[0]!.n), before.outbox);
});

test("a call to another service inside a unit of work is refused before it leaves", async (t) => {
  let reached = false;
  const transport = createRouterTransport((r) => r.service(SocialService, { async resolveHandle() { reached = true; return { found: false }; } }), {
    transport: { interceptors: [assertCalls({ signer: { sign: async () => "x" }, identity: "test" })] },
  });
  const social = createClient(SocialService, transport);
  const uow = createUnitOfWork(db, notesStore, { notify() {} });
  await t.throwsAsync(uow(async () => social.resolveHandle({ handle: "x" })), { message: /inside a unit of work/ });
  t.false(reached);
  // After the commit the same call goes through.
  await uow(async (notes) => notes.count());
  await social.resolveHandle({ handle: "x" });
  t.true(reached);
});

/** The outbox rows whose payload carries this tag, in seq order. */
const taggedEvents = async (tag: string) => (await db("outbox").whereRaw("payload->>'tag' = ?", [tag]).orderBy("seq")).map((r: { type: string; payload: { i?: number } }) => [r.type, r.payload.i]);

test.serial("a unit of one statement sends the change and its events as one statement, and wakes the relay after it", async (t) => {
  let notified = 0;
  const unit = createOneStatementUnit(db, { notify: () => { notified++; } });
  const id = await notesStore(db).add("before");
  const sent: string[] = [];
  const onQuery = (q: { sql: string }) => { sent.push(q.sql); };
  db.on("query", onQuery);
  t.teardown(() => { db.off("query", onQuery); });
  const tag = `one-${randomBytes(3).toString("hex")}`;
  const rows = await unit(db("notes").where({ id }).update({ body: "after" }).returning(["id", "body"]), async (events) => {
    for (let i = 0; i < 3; i++) await events.emit("note.changed", { tag, i });
  });
  t.deepEqual(rows, [{ id, body: "after" }]);
  t.is(sent.length, 1, "no BEGIN, no COMMIT, no second statement");
  t.is(notified, 1);
  t.deepEqual(await taggedEvents(tag), [["note.changed", 0], ["note.changed", 1], ["note.changed", 2]]);
  t.is((await db("notes").where({ id }).first()).body, "after");
});

test.serial("a unit of one statement that matches no row writes no event and wakes nobody; without events it is the statement alone", async (t) => {
  const unit = createOneStatementUnit(db, { notify: () => t.fail("nothing was written") });
  const tag = `none-${randomBytes(3).toString("hex")}`;
  t.deepEqual(await unit(db("notes").where({ id: -1 }).update({ body: "x" }).returning(["id"]), (events) => events.emit("note.changed", { tag })), []);
  t.deepEqual(await taggedEvents(tag), []);
  const id = await notesStore(db).add("quiet");
  t.deepEqual(await unit(db("notes").where({ id }).update({ body: "still quiet" }).returning(["body"]), async () => {}), [{ body: "still quiet" }]);
});

test.serial("a unit of one statement that fails writes neither the change nor its events", async (t) => {
  const unit = createOneStatementUnit(db, { notify: () => t.fail("nothing was written") });
  const id = await notesStore(db).add("kept");
  const tag = `fail-${randomBytes(3).toString("hex")}`;
  // The second row's id collides with the first's: the statement fails after changing one row.
  const other = await notesStore(db).add("other");
  await t.throwsAsync(unit(db("notes").whereIn("id", [id, other]).update({ id: db.raw("?::int", [id]) }).returning(["id"]), (events) => events.emit("note.changed", { tag })));
  t.deepEqual(await taggedEvents(tag), []);
  t.deepEqual((await db("notes").whereIn("id", [id, other]).orderBy("id")).map((r: { body: string }) => r.body), ["kept", "other"]);
});

/** Runs `fn` as the handler of a call whose caller's signal is `signal`. */
const inCall = <T>(signal: AbortSignal, fn: () => Promise<T>) => runInCallScope({ principal: { internal: true }, service: "test", signal }, fn);
const outboxCount = async () => Number((await db("outbox").count<{ n: number }[]>("* as n"))[0]!.n);

test.serial("a unit of a call that ends while it works rolls back: its caller was answered already and may be retrying", async (t) => {
  const uow = createUnitOfWork(db, notesStore, { notify: () => t.fail("a rollback wakes nobody") });
  const before = { notes: await notesStore(db).count(), outbox: await outboxCount() };
  const call = new AbortController();
  const err = await t.throwsAsync(inCall(call.signal, () => uow(async (notes, events) => {
    await notes.add("too late");
    await events.emit("note.added", {});
    // The deadline passes (connect aborts the handler's signal) while the unit still works.
    call.abort();
  })), { instanceOf: AppError });
  t.is(err!.code, "unavailable");
  t.is(await notesStore(db).count(), before.notes);
  t.is(await outboxCount(), before.outbox);

  // A call still under way commits as any unit does.
  let notified = 0;
  const live = createUnitOfWork(db, notesStore, { notify: () => { notified++; } });
  await inCall(new AbortController().signal, () => live(async (notes, events) => { await notes.add("in time"); await events.emit("note.added", {}); }));
  t.is(await notesStore(db).count(), before.notes + 1);
  t.is(notified, 1);
});

test.serial("a unit of one statement of a call that has ended sends nothing", async (t) => {
  const unit = createOneStatementUnit(db, { notify: () => t.fail("nothing was written") });
  const id = await notesStore(db).add("unchanged");
  const sent: string[] = [];
  const onQuery = (q: { sql: string }) => { sent.push(q.sql); };
  db.on("query", onQuery);
  t.teardown(() => { db.off("query", onQuery); });
  const ended = AbortSignal.abort();
  const tag = `ended-${randomBytes(3).toString("hex")}`;
  for (const emit of [async () => {}, (events: EventWriter) => events.emit("note.changed", { tag })]) {
    const err = await t.throwsAsync(inCall(ended, () => unit(db("notes").where({ id }).update({ body: "changed" }).returning(["id"]), emit)), { instanceOf: AppError });
    t.is(err!.code, "unavailable");
  }
  t.deepEqual(sent, []);
  t.is((await db("notes").where({ id }).first()).body, "unchanged");
  t.deepEqual(await taggedEvents(tag), []);
});
