/**
 * Statements marked with prepared() run as named prepared statements, one name per distinct SQL
 * text, in and out of transactions; unmarked statements stay unnamed. preparedRows() runs a read
 * with named bindings the same way without knex's runner, on the pool or the unit's connection.
 */
import test from "ava";
import type { Knex } from "knex";
import { createDb, plannedRows, prepared, preparedRows, preparedStatementName, windowTotal } from "../src/db.ts";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * Runs `body` with a pool of one connection in a schema of its own, dropped afterwards: every
 * statement runs on that connection, and pg_prepared_statements is its own.
 */
async function inFreshSchema(name: string, body: (db: Knex) => Promise<void>): Promise<void> {
  const schema = `${name}_${process.pid}`;
  const admin = createDb(adminUrl, "public", 1);
  await admin.raw("CREATE SCHEMA ??", [schema]);
  const db = createDb(adminUrl, schema, 1);
  try {
    await body(db);
  } finally {
    await db.destroy();
    await admin.raw("DROP SCHEMA ?? CASCADE", [schema]);
    await admin.destroy();
  }
}

test("a name per distinct SQL text, the same name for the same text", (t) => {
  const a = preparedStatementName("SELECT 1 /* prepared-statements.test a */");
  t.is(preparedStatementName("SELECT 1 /* prepared-statements.test a */"), a);
  t.not(preparedStatementName("SELECT 1 /* prepared-statements.test b */"), a);
});

test("marked statements are prepared on the connection under their text's name, in and out of a transaction; others are not", async (t) => {
  await inFreshSchema("prepared_test", async (db) => {
    await db.raw("CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL)");
    await db("items").insert([{ id: 1, name: "one" }, { id: 2, name: "two" }]);

    const byId = (id: number) => prepared(db("items").where({ id }).first("id", "name"));
    t.deepEqual(await byId(1), { id: 1, name: "one" });
    t.deepEqual(await byId(2), { id: 2, name: "two" }, "the same statement with other values");
    const locked = await db.transaction(async (trx) => prepared(trx("items").where({ id: 2 }).first("id", "name").forUpdate()));
    t.deepEqual(locked, { id: 2, name: "two" });
    const { rows: raw } = await prepared(db.raw("SELECT name FROM items WHERE id = ? AND name <> ?", [1, "x"]));
    t.deepEqual(raw, [{ name: "one" }]);
    await db("items").where({ id: 1 }).first("name");

    const texts = {
      byId: db("items").where({ id: 0 }).first("id", "name").toSQL().toNative().sql,
      locked: db("items").where({ id: 0 }).first("id", "name").forUpdate().toSQL().toNative().sql,
      raw: db.raw("SELECT name FROM items WHERE id = ? AND name <> ?", [0, ""]).toSQL().toNative().sql,
      unmarked: db("items").where({ id: 0 }).first("name").toSQL().toNative().sql,
    };
    const { rows } = await db.raw("SELECT name, statement FROM pg_prepared_statements");
    const byText = new Map((rows as Array<{ name: string; statement: string }>).map((r) => [r.statement, r.name]));
    t.is(byText.get(texts.byId), preparedStatementName(texts.byId));
    t.is(byText.get(texts.locked), preparedStatementName(texts.locked));
    t.not(preparedStatementName(texts.locked), preparedStatementName(texts.byId));
    t.is(byText.get(texts.raw), preparedStatementName(texts.raw));
    t.false(byText.has(texts.unmarked), "an unmarked statement is not prepared");
    t.is(rows.length, 3);
  });
});

test("preparedRows: named bindings (repeated, arrays) as knex.raw binds them, prepared once, on the transaction's own connection", async (t) => {
  // One connection: the transaction's query cannot have come from the pool.
  await inFreshSchema("prepared_rows_test", async (db) => {
    await db.raw("CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, tags text[] NOT NULL)");
    await db("items").insert([{ id: 1, name: "one", tags: ["a"] }, { id: 2, name: "two", tags: ["b"] }, { id: 3, name: "three", tags: ["a", "b"] }]);
    // :word twice, :tags an array, the names in another order than the text's.
    const sql = `SELECT id, name FROM items WHERE (name LIKE '%' || :word || '%' OR :word = '') AND tags && CAST(:tags AS text[]) AND id > :after ORDER BY id LIMIT :limit`;
    const cases = [
      { limit: 10, after: 0, tags: ["a"], word: "" },
      { limit: 10, after: 0, tags: ["a", "b"], word: "t" },
      { limit: 1, after: 1, tags: ["b"], word: "" },
    ];
    for (const bindings of cases) {
      const want = (await db.raw(sql, bindings)).rows;
      t.deepEqual(await preparedRows(db, sql, bindings), want, JSON.stringify(bindings));
    }
    t.deepEqual((await preparedRows<{ id: number }>(db, sql, cases[1]!)).map((r) => r.id), [2, 3]);

    // Inside a transaction it sees the transaction's own rows, and not once it is over.
    let finished: typeof db | undefined;
    const inside = await db.transaction(async (trx) => {
      await trx("items").insert({ id: 4, name: "four", tags: ["a"] });
      finished = trx;
      return preparedRows<{ id: number }>(trx, sql, { limit: 10, after: 3, tags: ["a"], word: "" });
    });
    t.deepEqual(inside.map((r) => r.id), [4]);
    await t.throwsAsync(preparedRows(finished!, sql, cases[0]!), { message: /Transaction already finished/ });
    await t.throwsAsync(preparedRows(db, sql, { ...cases[0]!, word: undefined }), { message: /Undefined binding\(s\) for \[word\]/ });

    // One positional text, prepared under its name, executed every time it ran (five).
    const { rows } = await db.raw("SELECT name, statement, generic_plans + custom_plans AS runs FROM pg_prepared_statements WHERE statement LIKE 'SELECT id, name FROM items%'");
    t.is(rows.length, 1);
    t.regex(rows[0].statement, /LIKE '%' \|\| \$1 \|\| '%' OR \$2 = ''\) AND tags && CAST\(\$3 AS text\[\]\) AND id > \$4 ORDER BY id LIMIT \$5$/);
    t.is(rows[0].name, preparedStatementName(rows[0].statement));
    t.is(Number(rows[0].runs), 5);
  });
});

test("plannedRows: the same named bindings, sent unnamed (planned for its values every time, nothing prepared)", async (t) => {
  await inFreshSchema("planned_rows_test", async (db) => {
    await db.raw("CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, tags text[] NOT NULL)");
    await db("items").insert([{ id: 1, name: "one", tags: ["a"] }, { id: 2, name: "two", tags: ["b"] }, { id: 3, name: "three", tags: ["a", "b"] }]);
    const sql = `SELECT id FROM items WHERE name LIKE :pattern AND tags && CAST(:tags AS text[]) ORDER BY id`;
    for (const bindings of [{ pattern: "%t%", tags: ["a", "b"] }, { pattern: "%", tags: ["a"] }, { tags: ["b"], pattern: "o%" }]) {
      const want = (await db.raw(sql, bindings)).rows;
      t.deepEqual(await plannedRows(db, sql, bindings), want, JSON.stringify(bindings));
    }
    const inside = await db.transaction(async (trx) => {
      await trx("items").insert({ id: 4, name: "tour", tags: ["a"] });
      return plannedRows<{ id: string }>(trx, sql, { pattern: "t%", tags: ["a"] });
    });
    t.deepEqual(inside.map((r) => Number(r.id)), [3, 4]);
    await t.throwsAsync(plannedRows(db, sql, { pattern: "%", tags: undefined }), { message: /Undefined binding\(s\) for \[tags\]/ });
    const { rows } = await db.raw("SELECT count(*) AS n FROM pg_prepared_statements WHERE statement LIKE 'SELECT id FROM items%'");
    t.is(Number(rows[0].n), 0);
  });
});

test("windowTotal: the first row's window count; no row at offset 0 is 0 without asking; no row further on asks", async (t) => {
  let asked = 0;
  const count = async () => { asked++; return 7; };
  t.is(await windowTotal([{ total: "12" }, { total: "12" }], 10, count), 12);
  t.is(await windowTotal([], 0, count), 0);
  t.is(asked, 0);
  t.is(await windowTotal([], 20, count), 7);
  t.is(asked, 1);
});
