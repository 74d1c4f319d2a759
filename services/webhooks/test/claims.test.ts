/**
 * Two senders (replicas) claiming from one schema: every due delivery is claimed by exactly one
 * of them, one per webhook at a time, and a claim that lapses (its sender died) is due again.
 */
import test from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { freshDatabase } from "../../../test/helpers/system.ts";
import { createDb, migrate, serviceMigrations } from "@cms/platform";
import { migrations } from "../src/store/migrations.js";
import { createWebhooksStore } from "../src/store/webhooks-store.js";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
let database: { url: string; drop(): Promise<void> };
let a: Knex;
let b: Knex;

test.before(async () => {
  database = await freshDatabase(adminUrl);
  const schema = `webhooks_${randomBytes(4).toString("hex")}`;
  a = createDb(database.url, schema, 4);
  b = createDb(database.url, schema, 4);
  await migrate(a, schema, serviceMigrations(migrations));
});
test.after.always(async () => {
  await a?.destroy();
  await b?.destroy();
  await database?.drop();
});

async function seed(webhooks: number, perWebhook: number): Promise<void> {
  for (let w = 0; w < webhooks; w++) {
    const hook = await createWebhooksStore(a).upsertWebhook({ collectionId: 1000 + w, ownerUserId: randomUUID(), url: "https://x.example/", events: ["collection.updated"], secret: "whsec_x", published: true });
    for (let i = 0; i < perWebhook; i++) {
      await createWebhooksStore(a).insertDelivery({ id: randomUUID(), webhookId: hook.id, collectionId: 1000 + w, event: "collection.updated", body: "{}", windowClosedAt: new Date(Date.now() - 1000 + i) });
    }
  }
}

const claim = (db: Knex, limit: number, claimMs = 60_000) => db.transaction((trx) => createWebhooksStore(trx).claimDue(limit, claimMs));

test.serial("concurrent claims of two replicas never take the same delivery, and take one per webhook", async (t) => {
  await seed(40, 2);
  const [x, y] = await Promise.all([claim(a, 30), claim(b, 30)]);
  const ids = [...x, ...y].map((d) => d.id);
  t.is(new Set(ids).size, ids.length, "no delivery claimed twice");
  const hooks = [...x, ...y].map((d) => d.webhook_id);
  t.is(new Set(hooks).size, hooks.length, "one delivery in flight per webhook");
  t.is(ids.length, 40);
  t.true([...x, ...y].every((d) => d.attempts === 1));
  // While those are in flight, the second delivery of each webhook waits.
  t.deepEqual(await claim(a, 100), []);
});

test.serial("a lapsed claim is due again, with its attempt counted", async (t) => {
  await a("deliveries").delete();
  await seed(1, 1);
  const [first] = await claim(a, 10, 50);
  t.truthy(first);
  t.deepEqual(await claim(b, 10, 50), []);
  await new Promise((r) => setTimeout(r, 120));
  const [again] = await claim(b, 10, 50);
  t.is(again?.id, first!.id);
  t.is(again?.attempts, 2);
});

test.serial("an attempt's outcome and webhook_remove at the same time never deadlock: the remove waits for the outcome", async (t) => {
  const { recordOutcome } = await import("../src/app/delivery-engine.js");
  await a("deliveries").delete();
  await seed(1, 1);
  const [claimed] = await claim(a, 1);
  t.truthy(claimed);
  // The outcome's unit pauses right after it changed the delivery row; the remove starts then.
  let removing: Promise<boolean> | undefined;
  await a.transaction(async (trx) => {
    const store = createWebhooksStore(trx);
    const paused = {
      ...store,
      async finishDelivery(...args: Parameters<typeof store.finishDelivery>) {
        await store.finishDelivery(...args);
        removing = b.transaction((other) => createWebhooksStore(other).removeWebhook(claimed!.collection_id));
        // Long enough for the remove to reach its first lock.
        await new Promise((r) => setTimeout(r, 300));
      },
    };
    await recordOutcome(paused, claimed!, { status: 200, durationMs: 5 }, { kind: "delivered" });
  });
  t.true(await removing!);
  const row = await a("deliveries").where({ id: claimed!.id }).first("state");
  t.is(row.state, "delivered", "the outcome committed first; the remove discarded nothing it had");
  t.truthy((await a("webhooks").where({ id: claimed!.webhook_id }).first("removed_at")).removed_at);
});

test.serial("the reads before a pass's units: a delivery is due until claimed, a window once it closes", async (t) => {
  await a("deliveries").delete();
  await a("windows").delete();
  const store = createWebhooksStore(a);
  t.false(await store.anyDeliveryDue());
  t.false(await store.anyWindowDue());
  await seed(1, 1);
  t.true(await store.anyDeliveryDue());
  const [claimed] = await claim(a, 1, 60_000);
  t.truthy(claimed);
  t.false(await store.anyDeliveryDue(), "a claimed delivery is not due until its claim lapses");
  await store.finishDelivery(claimed!.id, "delivered");
  t.false(await store.anyDeliveryDue());
  t.true(await store.addChange(1000, { eventId: randomUUID(), kind: "renamed", at: new Date() }, 60_000));
  t.false(await store.anyWindowDue(), "a window open for a minute is not due");
  await a("windows").update({ closes_at: a.raw("now() - interval '1 second'") });
  t.true(await store.anyWindowDue());
});
