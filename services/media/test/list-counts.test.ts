/**
 * media.list's kept totals: each collection's rows that are not deleted (archived and not), as a
 * count row (media_list_counts) plus the changes the triggers append on every write that can
 * change them (media_list_count_changes), folded into the counts by a job. Checked against a
 * count of the rows after every kind of write, including bulk and concurrent ones, before and
 * after folds, and a backfill of rows written before the migration.
 */
import test from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { freshDatabase } from "../../../test/helpers/system.ts";
import { createDb, ensureExtensions, migrate, serviceMigrations } from "@cms/platform";
import { mediaMigrations } from "../src/store/migrations.js";
import { createMediaStore } from "../src/store/media-store.js";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
let database: { url: string; drop(): Promise<void> };
const dbs: Knex[] = [];
const OWNER = randomUUID();

test.before(async () => { database = await freshDatabase(adminUrl); });
test.after.always(async () => {
  for (const db of dbs) await db.destroy().catch(() => {});
  await database?.drop();
});

async function schemaAt(migrations = mediaMigrations): Promise<{ db: Knex; schema: string }> {
  const schema = `media_${randomBytes(4).toString("hex")}`;
  const db = createDb(database.url, schema, 3);
  dbs.push(db);
  await ensureExtensions(db, ["pg_trgm", "unaccent", "btree_gin"]);
  await migrate(db, schema, serviceMigrations(migrations));
  return { db, schema };
}

async function insert(db: Knex, collectionId: number, opts: { archived?: boolean; deleted?: boolean; tag?: string } = {}): Promise<number> {
  const { rows: [r] } = await db.raw(
    `INSERT INTO media (collection_id, owner_user_id, created_by, name, main_url, viewer, position, is_archived, is_deleted, tags)
     VALUES (?, ?, ?, 'item', 'inline://text-note', 'text', (SELECT count(*) FROM media WHERE collection_id = ?), ?, ?, ?) RETURNING id`,
    [collectionId, OWNER, OWNER, collectionId, opts.archived ?? false, opts.deleted ?? false, opts.tag ? [opts.tag] : []],
  );
  return Number(r.id);
}

/** The kept counts (count rows plus changes) and the counted ones, collection by collection (zeros left out). */
async function keptAndCounted(db: Knex) {
  const kept = (await db.raw(`SELECT collection_id, sum(listed)::int AS listed, sum(archived)::int AS archived FROM (
      SELECT collection_id, listed, archived FROM media_list_counts UNION ALL SELECT collection_id, listed, archived FROM media_list_count_changes) k
    GROUP BY collection_id HAVING sum(listed) <> 0 OR sum(archived) <> 0 ORDER BY collection_id`)).rows;
  const counted = (await db.raw(`SELECT collection_id, (count(*) FILTER (WHERE NOT is_archived))::int AS listed, (count(*) FILTER (WHERE is_archived))::int AS archived
    FROM media WHERE NOT is_deleted GROUP BY collection_id ORDER BY collection_id`)).rows;
  return { kept, counted };
}

test("the kept counts follow inserts, archive and restore, soft and hard deletes, moves, bulk writes and unrelated updates", async (t) => {
  const { db } = await schemaAt();
  const check = async (what: string) => {
    const { kept, counted } = await keptAndCounted(db);
    t.deepEqual(kept, counted, what);
  };
  const a: number[] = [];
  for (let i = 0; i < 6; i++) a.push(await insert(db, 1, { archived: i % 3 === 0 }));
  await insert(db, 2);
  await insert(db, 2, { deleted: true });
  await check("inserts, archived and deleted ones");
  await db("media").whereIn("id", [a[1]!, a[2]!]).update({ is_archived: true });
  await check("archived");
  await db("media").where({ id: a[0]! }).update({ is_archived: false });
  await check("unarchived");
  await db("media").where({ id: a[1]! }).update({ is_deleted: true, deleted_at: db.fn.now() });
  await check("an archived row soft-deleted");
  await db("media").where({ id: a[1]! }).update({ is_deleted: false, is_archived: false });
  await check("restored, unarchived in the same write");
  await db("media").whereIn("id", [a[3]!, a[4]!]).update({ collection_id: 2 });
  await check("moved to another collection");
  await db("media").where({ id: a[5]! }).update({ collection_id: 3, is_archived: true });
  await check("moved and archived at once");
  const store = createMediaStore(db);
  t.true(await store.foldListCounts() > 0);
  t.is(Number((await db("media_list_count_changes").count("* as n"))[0]!.n), 0, "every change folded");
  await check("after a fold");
  await db("media").where({ id: a[0]! }).update({ thumbnail_url: "store://x/1/t.webp", name: "renamed", position: 9 });
  t.is(Number((await db("media_list_count_changes").count("* as n"))[0]!.n), 0, "an update of other columns appends nothing");
  await check("an update of other columns");
  await db("media").where({ id: a[2]! }).delete();
  await check("a hard delete");
  for (let i = 0; i < 200; i++) await insert(db, 4, { archived: i % 5 === 0 });
  await db("media").where({ collection_id: 4 }).whereRaw("id % 2 = 0").update({ is_archived: db.raw("NOT is_archived") });
  await check("a bulk update flipping half of a collection");
  await db("media").where({ collection_id: 4 }).update({ is_deleted: true });
  await check("a whole collection soft-deleted in one statement");
  await db("media").where({ collection_id: 4 }).update({ is_deleted: false, collection_id: 5 });
  await check("restored into another collection in one statement");
  t.true(await store.foldListCounts(7) > 7, "folds in batches until none is left");
  await check("after a fold in batches of 7");
  await db("media").whereIn("collection_id", [1, 2, 3, 5]).delete();
  await check("every row deleted");
  await store.foldListCounts();
  await check("folded again");
  t.deepEqual((await keptAndCounted(db)).counted, []);
});

test("concurrent inserts, deletes, archives and folds in one collection leave the kept count right", async (t) => {
  const { db } = await schemaAt();
  const store = createMediaStore(db);
  const ids = await Promise.all(Array.from({ length: 20 }, () => insert(db, 7)));
  await Promise.all([
    ...ids.slice(0, 10).map((id) => db("media").where({ id }).delete()),
    ...Array.from({ length: 10 }, () => insert(db, 7, { archived: true })),
    ...ids.slice(10, 15).map((id) => db("media").where({ id }).update({ is_archived: true })),
    store.foldListCounts(3), store.foldListCounts(3),
  ]);
  const { kept, counted } = await keptAndCounted(db);
  t.deepEqual(kept, counted);
  t.deepEqual(counted, [{ collection_id: 7, listed: 5, archived: 15 }]);
});

test("rows written before the migration are counted by it", async (t) => {
  const before = mediaMigrations.filter(([name]) => name < "20270201000000");
  t.true(before.length < mediaMigrations.length);
  const { db, schema } = await schemaAt(before);
  for (let i = 0; i < 7; i++) await insert(db, 11, { archived: i < 2, deleted: i === 6 });
  await insert(db, 12, { deleted: true });
  await migrate(db, schema, serviceMigrations(mediaMigrations));
  const { kept, counted } = await keptAndCounted(db);
  t.deepEqual(kept, counted);
  t.deepEqual(counted, [{ collection_id: 11, listed: 4, archived: 2 }]);
});

test("media.list's total is the kept count without a filter, and a count of the rows with one", async (t) => {
  const { db } = await schemaAt();
  const store = createMediaStore(db);
  for (let i = 0; i < 5; i++) await insert(db, 21, { archived: i === 0, tag: i < 2 ? "red" : undefined });
  const page = (extra: { includeArchived?: boolean; tag?: string } = {}) => store.listPage({ collectionId: 21, includeArchived: false, limit: 2, offset: 0, ...extra });
  t.is((await page()).total, 4);
  t.is((await page({ includeArchived: true })).total, 5);
  t.is((await page({ tag: "red" })).total, 1);
  await store.foldListCounts();
  t.is((await page()).total, 4, "the same once folded");
  await insert(db, 21);
  t.is((await page()).total, 5, "a change not folded yet counts");
  // Read from the kept rows, not counted: a count set by hand shows through, filtered totals do not.
  await db("media_list_counts").where({ collection_id: 21 }).update({ listed: 40, archived: 2 });
  t.is((await page()).total, 41);
  t.is((await page({ includeArchived: true })).total, 43);
  t.is((await page({ tag: "red" })).total, 1);
  // Past the end there is no row to carry the total: counted.
  t.is((await store.listPage({ collectionId: 21, includeArchived: false, limit: 2, offset: 50 })).total, 5);
});
