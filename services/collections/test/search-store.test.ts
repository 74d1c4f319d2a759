/**
 * The personal search in the store: an owner of at most PREPARED_SEARCH_MAX_OWNER_ROWS
 * collections is searched by a prepared statement, a larger owner by the statement planned for
 * the query; on either side of the bound the page and the total are those of the planned one.
 */
import test from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { freshDatabase } from "../../../test/helpers/system.ts";
import { createDb, ensureExtensions, migrate, serviceMigrations } from "@cms/platform";
import { collectionsMigrations } from "../src/store/migrations.js";
import {
  PREPARED_SEARCH_MAX_OWNER_ROWS, SEARCH_SESSION_SETTINGS, createCollectionsStore, searchPlanSql,
} from "../src/store/collections-store.js";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
let database: { url: string; drop(): Promise<void> };
let db: Knex;

test.before(async () => {
  database = await freshDatabase(adminUrl);
  const schema = `collections_${randomBytes(4).toString("hex")}`;
  const migrating = createDb(database.url, schema, 2);
  try {
    await ensureExtensions(migrating, ["pg_trgm", "unaccent", "btree_gin"]);
    await migrate(migrating, schema, serviceMigrations(collectionsMigrations));
  } finally {
    await migrating.destroy();
  }
  // One connection: pg_prepared_statements below is the one the searches ran on.
  db = createDb(database.url, schema, 1, SEARCH_SESSION_SETTINGS);
});
test.after.always(async () => {
  await db?.destroy();
  await database?.drop();
});

/** An owner of `n` top-level collections; every 7th is about "zephyr", every 3rd tagged "summer". */
async function owner(n: number): Promise<string> {
  const userId = randomUUID();
  await db.raw(
    `INSERT INTO collections (user_id, name, description, tags, position)
     SELECT ?, 'Album ' || i || CASE WHEN i % 7 = 3 THEN ' zephyr' ELSE '' END, 'Photos ' || i,
            CASE WHEN i % 3 = 0 THEN ARRAY['summer'] ELSE ARRAY['winter'] END, i
     FROM generate_series(0, ? - 1) i`,
    [userId, n],
  );
  return userId;
}

const searcher = (userId: string) => ({ userId, follows: { users: [], aliases: [] } });

/** The first page as the statement planned for the query finds it: ids in order, and the total. */
async function planned(query: string, userId: string, limit: number): Promise<{ ids: number[]; total: number }> {
  const [sql, bindings] = searchPlanSql(query, userId, limit);
  const { rows } = await db.raw(sql, bindings);
  return { ids: rows.map((r: { id: unknown }) => Number(r.id)), total: rows.length ? Number(rows[0].total) : 0 };
}

/** Executions of the prepared small-owner search of own collections (with shared ones or not). */
async function preparedRuns(withShared: boolean): Promise<number> {
  const { rows } = await db.raw(
    `SELECT coalesce(sum(generic_plans + custom_plans), 0) AS n FROM pg_prepared_statements
     WHERE statement LIKE 'WITH owner AS%' AND (statement LIKE '%collaborators%') = ?`, [withShared],
  );
  return Number(rows[0].n);
}

for (const [label, rows] of [["at the bound", PREPARED_SEARCH_MAX_OWNER_ROWS], ["one past the bound", PREPARED_SEARCH_MAX_OWNER_ROWS + 1], ["far past it", 1000]] as const) {
  test.serial(`an owner ${label} (${rows} collections) gets the planned statement's page and total`, async (t) => {
    const userId = await owner(rows);
    await db.raw("ANALYZE collections");
    const store = createCollectionsStore(db);
    const runsBefore = await preparedRuns(false);
    for (const query of ["zephyr", "summer", "Album 12", "zephir"]) {
      const want = await planned(query, userId, 20);
      t.true(want.total > 0, `${query} has hits`);
      // The same search again: the prepared statement is executed, not only prepared.
      for (let i = 0; i < 7; i++) {
        const got = await store.search(query, ["own"], searcher(userId), 20, 0);
        t.deepEqual(got.rows.map((r) => Number(r.id)), want.ids, query);
        t.is(got.total, want.total, query);
        t.false("owner_rows" in got.rows[0]!, "the gate's column is not a collection's");
      }
      const past = await store.search(query, ["own"], searcher(userId), 20, want.total + 5);
      t.deepEqual(past, { rows: [], total: want.total }, "a page past the end keeps the total");
    }
    // Within the bound every search ran the prepared statement; past it only the first, which
    // found the owner large (then known as such for a while).
    t.is(await preparedRuns(false) - runsBefore, rows <= PREPARED_SEARCH_MAX_OWNER_ROWS ? 4 * 8 : 1);
    t.deepEqual(await store.search("nothing like it", ["own", "shared"], searcher(userId), 20, 0), { rows: [], total: 0 });
  });
}

test.serial("the prepared statement of own and shared collections: a small owner's searches run it, a large owner's only the first", async (t) => {
  const store = createCollectionsStore(db);
  const search = async (userId: string) => store.search("zephyr", ["own", "shared"], searcher(userId), 20, 0);
  const large = await owner(PREPARED_SEARCH_MAX_OWNER_ROWS + 1);
  const small = await owner(10);
  const before = await preparedRuns(true);
  for (let i = 0; i < 3; i++) t.is((await search(large)).total, 29);
  t.is(await preparedRuns(true) - before, 1);
  for (let i = 0; i < 3; i++) t.is((await search(small)).total, 1);
  t.is(await preparedRuns(true) - before, 4);
});
