/**
 * The personal search in the store: an owner of at most PREPARED_SEARCH_MAX_OWNER_ROWS
 * collections is searched by a prepared statement (gated by a count of the owner's rows until
 * the owner is known to be small), a larger owner by a prepared statement of its own for a query
 * with three letters or digits in a row (up to OWNER_STATEMENTS_MAX of them) or else by the
 * statement planned for the query; whichever runs, the page and the total are those of the
 * planned one.
 */
import test from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { freshDatabase } from "../../../test/helpers/system.ts";
import { createDb, ensureExtensions, migrate, serviceMigrations } from "@cms/platform";
import { collectionsMigrations } from "../src/store/migrations.js";
import {
  OWNER_STATEMENTS_MAX, PREPARED_SEARCH_MAX_OWNER_ROWS, SEARCH_SESSION_SETTINGS, createCollectionsStore, ownerSizes,
  ownerStatements, searchPlanSql,
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

/** A store's page in planned()'s shape. */
function pageOf(page: { rows: Array<{ id: unknown }>; total: number }): { ids: number[]; total: number } {
  return { ids: page.rows.map((r) => Number(r.id)), total: page.total };
}

/** What a large owner's own statement has and the others have not: the query's terms as subqueries. */
const OWNER_STATEMENT_MARK = "%(SELECT lower(immutable_unaccent(%";

type Runs = { gated: number; known: number; own: number };
/**
 * Executions of the prepared searches of own collections (with shared ones or not): the one of
 * small owners gated by the owner's count, the one of owners known to be small, and the large
 * owners' own statements.
 */
async function preparedRuns(withShared: boolean): Promise<Runs> {
  const { rows } = await db.raw(
    `SELECT coalesce(sum(generic_plans + custom_plans) FILTER (WHERE statement LIKE 'WITH owner AS%'), 0) AS gated,
            coalesce(sum(generic_plans + custom_plans) FILTER (WHERE statement LIKE 'WITH hits AS%' AND statement NOT LIKE :mark), 0) AS known,
            coalesce(sum(generic_plans + custom_plans) FILTER (WHERE statement LIKE :mark), 0) AS own
     FROM pg_prepared_statements WHERE (statement LIKE '%collaborators%') = :withShared`, { mark: OWNER_STATEMENT_MARK, withShared },
  );
  return { gated: Number(rows[0].gated), known: Number(rows[0].known), own: Number(rows[0].own) };
}

/** The executions since `before`. */
async function runsSince(before: Runs, withShared = false): Promise<Runs> {
  const now = await preparedRuns(withShared);
  return { gated: now.gated - before.gated, known: now.known - before.known, own: now.own - before.own };
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
    // Within the bound the first search ran the gated statement and found the owner small, and the
    // 31 others the prepared one of known small owners; past it the first found the owner large
    // (then known as such for a while), and each search (a page past the end too) ran the owner's
    // own statement, the queries having three letters in a row.
    t.deepEqual(await runsSince(runsBefore), rows <= PREPARED_SEARCH_MAX_OWNER_ROWS ? { gated: 1, known: 4 * 8 - 1, own: 0 } : { gated: 1, known: 0, own: 4 * 8 });
    t.deepEqual(await store.search("nothing like it", ["own", "shared"], searcher(userId), 20, 0), { rows: [], total: 0 });
  });
}

test.serial("the prepared statements of own and shared collections: a small owner's searches run the shared one, a large owner's its own", async (t) => {
  const store = createCollectionsStore(db);
  const search = async (userId: string) => store.search("zephyr", ["own", "shared"], searcher(userId), 20, 0);
  const large = await owner(PREPARED_SEARCH_MAX_OWNER_ROWS + 1);
  const small = await owner(10);
  const before = await preparedRuns(true);
  for (let i = 0; i < 3; i++) t.is((await search(large)).total, 29);
  t.deepEqual(await runsSince(before, true), { gated: 1, known: 0, own: 3 });
  for (let i = 0; i < 3; i++) t.is((await search(small)).total, 1);
  t.deepEqual(await runsSince(before, true), { gated: 2, known: 2, own: 3 });
});

test.serial("an owner known to be small who grows past the bound still gets the planned page; once forgotten, the gate finds it large", async (t) => {
  const store = createCollectionsStore(db);
  const userId = await owner(50);
  const search = () => store.search("zephyr", ["own"], searcher(userId), 20, 0);
  const before = await preparedRuns(false);
  t.is((await search()).total, 7);
  // A tree copied in meanwhile: 1,000 more collections, 143 more hits.
  await db.raw(
    `INSERT INTO collections (user_id, name, description, tags, position)
     SELECT ?, 'Copy ' || i || CASE WHEN i % 7 = 3 THEN ' zephyr' ELSE '' END, 'Copied', ARRAY['x'], 100 + i FROM generate_series(0, 999) i`,
    [userId],
  );
  const want = await planned("zephyr", userId, 20);
  t.is(want.total, 150);
  const grown = await search();
  t.deepEqual(pageOf(grown), want, "the known-small statement answers the grown owner rightly");
  t.deepEqual(await runsSince(before), { gated: 1, known: 1, own: 0 });
  // The memory lapses (ten seconds): the gate counts again and finds the owner large.
  ownerSizes.delete(userId);
  t.is((await search()).total, 150);
  t.is((await search()).total, 150);
  t.deepEqual(await runsSince(before), { gated: 2, known: 1, own: 2 }, "after the gate found it large, the owner's own statement runs");
});

test.serial("a large owner's own statement is planned once, and a query without three letters in a row gets the planned statement", async (t) => {
  const store = createCollectionsStore(db);
  // Many hits: a plan made for an unknown limit looks dearer than one made for 20, and the
  // statement's page bounds must not tip PostgreSQL into planning it for its values every time.
  const userId = await owner(20_000);
  await db.raw("ANALYZE collections");
  const ownStatement = async () => (await db.raw(
    "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE :owner AND statement LIKE :mark",
    { owner: `%'${userId}'%`, mark: OWNER_STATEMENT_MARK },
  )).rows.map((r: { generic_plans: unknown; custom_plans: unknown }) => ({ generic: Number(r.generic_plans), custom: Number(r.custom_plans) }));
  for (const query of ["zephyr", "summer", "photos", "Album 1234"]) {
    const want = await planned(query, userId, 20);
    for (let i = 0; i < 3; i++) {
      const got = await store.search(query, ["own"], searcher(userId), 20, 0);
      t.deepEqual(pageOf(got), want, query);
    }
    const second = await store.search(query, ["own"], searcher(userId), 20, 20);
    t.is(second.total, want.total, `${query}: the second page's total`);
  }
  const [runs] = await ownStatement();
  t.is(runs!.generic + runs!.custom, 16);
  // PostgreSQL plans a prepared statement for its values five times, then keeps its generic plan
  // when that costs no more: the query's terms, unknown to that plan, cost it nothing.
  t.true(runs!.generic >= 10, `generic plans: ${runs!.generic} of 16`);
  const before = await preparedRuns(false);
  for (const query of ["a.b", "50%", "c++ x"]) {
    const got = await store.search(query, ["own"], searcher(userId), 20, 0);
    const want = await planned(query, userId, 20);
    t.deepEqual(pageOf(got), want, query);
  }
  t.deepEqual(await runsSince(before), { gated: 0, known: 0, own: 0 });
});

test.serial("a large owner's own statement of own and shared collections: its hits first, then the accepted shares, as the planned statement ranks them", async (t) => {
  const store = createCollectionsStore(db);
  const userId = await owner(PREPARED_SEARCH_MAX_OWNER_ROWS + 50);
  const other = await owner(20);
  const theirs = (await db.raw("SELECT id, name FROM collections WHERE user_id = ? ORDER BY id", [other])).rows as Array<{ id: string; name: string }>;
  const share = async (id: string, status: string) => db.raw(
    "INSERT INTO collaborators (collection_id, user_id, inviter_user_id, status) VALUES (?, ?, ?, ?)", [id, userId, other, status],
  );
  // Two of the other owner's zephyr collections shared with this owner: one accepted, one pending.
  const zephyrs = theirs.filter((r) => r.name.endsWith("zephyr"));
  t.is(zephyrs.length, 3);
  await share(zephyrs[0]!.id, "accepted");
  await share(zephyrs[1]!.id, "pending");
  // Ranked own hits first (the planned statement of own collections), then the accepted share.
  const own = await planned("zephyr", userId, 100);
  const want = { ids: [...own.ids, Number(zephyrs[0]!.id)], total: own.total + 1 };
  const before = await preparedRuns(true);
  for (let i = 0; i < 7; i++) {
    const got = await store.search("zephyr", ["own", "shared"], searcher(userId), 100, 0);
    t.deepEqual(pageOf(got), want);
    t.deepEqual(got.rows.map((r) => Boolean((r as { is_own?: unknown }).is_own)), [...own.ids.map(() => true), false]);
  }
  t.deepEqual(await runsSince(before, true), { gated: 1, known: 0, own: 7 });
});

test.serial(`only the first ${OWNER_STATEMENTS_MAX} large owners of a process get a statement of their own`, async (t) => {
  ownerStatements.clear();
  // The tests after this one have owners of their own statements again.
  t.teardown(() => ownerStatements.clear());
  const store = createCollectionsStore(db);
  const owners: string[] = [];
  for (let i = 0; i <= OWNER_STATEMENTS_MAX; i++) owners.push(await owner(PREPARED_SEARCH_MAX_OWNER_ROWS + 1));
  for (const userId of owners) t.is((await store.search("zephyr", ["own"], searcher(userId), 20, 0)).total, 29);
  t.is(ownerStatements.size, OWNER_STATEMENTS_MAX);
  const prepared = async (userId: string) => Number((await db.raw(
    "SELECT count(*) AS n FROM pg_prepared_statements WHERE statement LIKE ?", [`%'${userId}'%`],
  )).rows[0].n);
  t.is(await prepared(owners[0]!), 1);
  t.is(await prepared(owners[OWNER_STATEMENTS_MAX - 1]!), 1);
  t.is(await prepared(owners[OWNER_STATEMENTS_MAX]!), 0, "the one past the bound is planned for its query");
  const last = await store.search("zephyr", ["own"], searcher(owners[OWNER_STATEMENTS_MAX]!), 20, 0);
  t.deepEqual(pageOf(last), await planned("zephyr", owners[OWNER_STATEMENTS_MAX]!, 20));
});

/**
 * Names that put a query beside every kind of neighbour: whole words, inside words, twice (inside
 * a word first, whole later), words apart, punctuation and the characters of regular expressions
 * and LIKE, accents.
 */
const RANKED_NAMES = [
  "Zephyr", "zephyrs at dawn", "azephyr", "the zephyr-wind", "zephyrian zephyr", "zephir", "Zéphyr café",
  "red car", "red big blue car", "car is red", "bored cars", "c++ notes", "learning c++", "a.b test", "axb test",
  "(x) marks", "[tag] list", "50% off", "500 off", "under_score", "underXscore", "back\\slash", "$^|* sign",
  "e-mail", "my e-mail box", "ζέφυρος wind", "Album 7",
];
const RANKED_QUERIES = [
  "zephyr", "zephyrs", "zeph", "red car", "c++", "a.b", "(x)", "[tag]", "50%", "under_score", "back\\slash",
  "$^|*", "e-mail", "café", "ζέφυρος", "Album 7", "car",
];

/** Every hit and its score as the score is defined: LIKE (0 or 1) + word_similarity + ts_rank. */
async function scoredByDefinition(query: string, userId: string): Promise<Array<{ id: number; score: number }>> {
  const { rows: [{ q }] } = await db.raw("SELECT lower(immutable_unaccent(?)) AS q", [query.trim()]);
  const pattern = `%${String(q).replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
  const { rows } = await db.raw(
    `SELECT id, (CASE WHEN search_text LIKE :pattern THEN 1 ELSE 0 END + word_similarity(:q, search_text)
                 + ts_rank(search_tsv, plainto_tsquery('simple', :q))) AS score
     FROM collections WHERE user_id = :userId AND NOT is_deleted AND parent_id IS NULL AND NOT is_archived
       AND (search_text LIKE :pattern OR search_text %> :q OR search_tsv @@ plainto_tsquery('simple', :q))
     ORDER BY score DESC, id DESC`,
    { pattern, q, userId },
  );
  return rows.map((r: { id: unknown; score: unknown }) => ({ id: Number(r.id), score: Number(r.score) }));
}

for (const [label, filler] of [["a small owner (the prepared statement)", 0], ["a large owner (its own statement, or for a query without three letters in a row the statement planned for it)", PREPARED_SEARCH_MAX_OWNER_ROWS]] as const) {
  test.serial(`the ranking of ${label} is LIKE + word_similarity + ts_rank, for queries beside every kind of character`, async (t) => {
    const userId = randomUUID();
    await db.raw(
      `INSERT INTO collections (user_id, name, position) SELECT ?::uuid, n, i FROM unnest(?::text[]) WITH ORDINALITY AS x(n, i)
       UNION ALL SELECT ?::uuid, 'Filler ' || i, 1000 + i FROM generate_series(1, ?) i`,
      [userId, RANKED_NAMES, userId, filler],
    );
    await db.raw("ANALYZE collections");
    const store = createCollectionsStore(db);
    for (const query of RANKED_QUERIES) {
      const want = await scoredByDefinition(query, userId);
      t.true(want.length > 0, `${query} has hits`);
      // Twice: the second run of a small owner's search is the prepared statement of known small owners.
      for (let i = 0; i < 2; i++) {
        const got = await store.search(query, ["own"], searcher(userId), 50, 0);
        t.is(got.total, want.length, query);
        t.deepEqual(got.rows.map((r) => Number(r.id)), want.map((w) => w.id), query);
        got.rows.forEach((r, k) => t.true(Math.abs(Number((r as { score?: unknown }).score) - want[k]!.score) < 1e-6, `${query}: score of ${String(r.name)}`));
      }
    }
  });
}
