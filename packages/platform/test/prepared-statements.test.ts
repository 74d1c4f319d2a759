/**
 * Statements marked with prepared() run as named prepared statements, one name per distinct SQL
 * text, in and out of transactions; unmarked statements stay unnamed.
 */
import test from "ava";
import { createDb, prepared, preparedStatementName } from "../src/db.ts";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

test("a name per distinct SQL text, the same name for the same text", (t) => {
  const a = preparedStatementName("SELECT 1 /* prepared-statements.test a */");
  t.is(preparedStatementName("SELECT 1 /* prepared-statements.test a */"), a);
  t.not(preparedStatementName("SELECT 1 /* prepared-statements.test b */"), a);
});

test("marked statements are prepared on the connection under their text's name, in and out of a transaction; others are not", async (t) => {
  const schema = `prepared_test_${process.pid}`;
  const admin = createDb(adminUrl, "public", 1);
  await admin.raw("CREATE SCHEMA ??", [schema]);
  // One connection: every statement below runs on it, and pg_prepared_statements is its own.
  const db = createDb(adminUrl, schema, 1);
  try {
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
  } finally {
    await db.destroy();
    await admin.raw("DROP SCHEMA ?? CASCADE", [schema]);
    await admin.destroy();
  }
});
