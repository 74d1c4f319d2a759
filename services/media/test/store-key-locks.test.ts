/**
 * The locks that keep the object cleanup and a write adopting a stored object apart, on
 * PostgreSQL: the cleanup's exclusive hold on its keys makes an adopting write wait until it
 * commits, adopting writes do not wait for each other, two cleanups over overlapping keys both
 * finish (the keys are locked in one order), and a cleanup that waited for an adopting write
 * sees the row it committed.
 */
import test from "ava";
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { freshDatabase } from "../../../test/helpers/system.ts";
import { createDb, createUnitOfWork, ensureExtensions, migrate, serviceMigrations } from "@cms/platform";
import { mediaMigrations } from "../src/store/migrations.js";
import { createMediaStore } from "../src/store/media-store.js";
import { createMediaStores } from "../src/store/stores.js";
import { createObjectCleanup } from "../src/app/object-cleanup.js";
import type { MediaAccess } from "../src/app/access.js";
import { memoryObjects } from "./fakes.js";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
let database: { url: string; drop(): Promise<void> };
let db: Knex;

test.before(async () => {
  database = await freshDatabase(adminUrl);
  db = createDb(database.url, "public", 6);
});
test.after.always(async () => {
  await db?.destroy().catch(() => {});
  await database?.drop();
});

/** A transaction left open until its release() is called. */
async function openTransaction(): Promise<{ trx: Knex.Transaction; release(): Promise<void> }> {
  const trx = await db.transaction();
  return { trx, release: () => trx.commit().then(() => {}) };
}

/** Resolves once `n` backends wait on an advisory lock. */
async function waitingOnAdvisoryLocks(n = 1): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await db.raw("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND datname = current_database()");
    if (rows[0].n >= n) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`fewer than ${n} backends waited on an advisory lock`);
}

test.serial("an adopting write waits for the cleanup holding its key, and not for another adopting write", async (t) => {
  const keys = ["store://u/1/1_a.png", "store://u/1/1_b.png"];
  const cleanup = await openTransaction();
  await createMediaStore(cleanup.trx).lockStoreKeys(keys, "exclusive");
  const adopter = await openTransaction();
  const order: string[] = [];
  const adopting = createMediaStore(adopter.trx).lockStoreKeys([keys[1]!], "share").then(() => order.push("adopted"));
  await waitingOnAdvisoryLocks();
  order.push("cleanup committed");
  await cleanup.release();
  await adopting;
  t.deepEqual(order, ["cleanup committed", "adopted"]);
  // A second adopting write of the same key does not wait for the first.
  const other = await openTransaction();
  await createMediaStore(other.trx).lockStoreKeys([keys[1]!], "share");
  await other.release();
  await adopter.release();
});

test.serial("two cleanups over overlapping keys named in opposite orders both finish: the keys are locked in one order", async (t) => {
  const [x, y, z] = ["store://u/1/1_x.png", "store://u/1/1_y.png", "store://u/1/1_z.png"];
  const holder = await openTransaction();
  await createMediaStore(holder.trx).lockStoreKeys([z], "exclusive");
  // The first in z's queue names z first; the second, queued after it, names x and y first.
  // Taken in the order named, the first would get z and wait for y, held by the second waiting
  // for z: a deadlock, and PostgreSQL would abort one of them.
  const first = db.transaction((trx) => createMediaStore(trx).lockStoreKeys([z, y, x], "exclusive"));
  await waitingOnAdvisoryLocks(1);
  const second = db.transaction((trx) => createMediaStore(trx).lockStoreKeys([x, y, z], "exclusive"));
  await waitingOnAdvisoryLocks(2);
  await holder.release();
  await t.notThrowsAsync(Promise.all([first, second]));
});

test.serial("a cleanup that waited for an adopting write sees its row, and keeps the object", async (t) => {
  const schema = "media_cleanup";
  const mdb = createDb(database.url, schema, 4);
  t.teardown(() => mdb.destroy());
  await ensureExtensions(mdb, ["pg_trgm", "unaccent", "btree_gin"]);
  await migrate(mdb, schema, serviceMigrations(mediaMigrations));
  const objects = memoryObjects();
  const key = `store://${randomUUID()}/1/1_photo.png`;
  await objects.store.put(key, Buffer.from("bytes"), { contentType: "image/png" });
  const noCovers = { coverKeysAmong: async () => new Set<string>() } as unknown as MediaAccess;
  const cleanup = createObjectCleanup({ unitOfWork: createUnitOfWork(mdb, createMediaStores, { notify() {} }), objects: objects.store }, noCovers);

  // The adopting write holds the key and has written its row, not yet committed.
  const adopter = await mdb.transaction();
  const store = createMediaStore(adopter);
  await store.lockStoreKeys([key], "share");
  await store.insert({ collection_id: 1, owner_user_id: randomUUID(), created_by: randomUUID(), main_url: key, viewer: "image", position: 0 });
  const removing = cleanup.removeOrphaned([key]);
  await waitingOnAdvisoryLocks(1);
  await adopter.commit();
  t.deepEqual(await removing, { removed: 0, kept: 1 });
  t.truthy(await objects.store.head(key));
});
