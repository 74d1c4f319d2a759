/**
 * Session settings of a service's pool (createDb's last argument) reach every connection the
 * pool opens, through the startup packet's options, beside any options of the URL itself.
 */
import test from "ava";
import { createDb, sessionOptions } from "../src/db.ts";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

test("sessionOptions keeps the URL's options and appends the settings", (t) => {
  t.is(sessionOptions("postgres://u@h/db", { "pg_trgm.word_similarity_threshold": "0.5" }), "-c pg_trgm.word_similarity_threshold=0.5");
  t.is(sessionOptions("postgres://u@h/db?options=-c%20search_path%3Dx", { statement_timeout: "5s" }), "-c search_path=x -c statement_timeout=5s");
  t.is(sessionOptions("postgres://u@h/db", {}), undefined);
  t.throws(() => sessionOptions("postgres://u@h/db", { "bad name": "1" }), { message: /invalid session setting/ });
  t.throws(() => sessionOptions("postgres://u@h/db", { statement_timeout: "1 s" }), { message: /invalid session setting/ });
});

test("every connection of the pool carries the settings", async (t) => {
  const db = createDb(adminUrl, "public", 3, { "pg_trgm.word_similarity_threshold": "0.45", statement_timeout: "4321" });
  const plain = createDb(adminUrl, "public", 1);
  try {
    // Three connections at once: each transaction holds its connection until all three are
    // open (a sleep would let a loaded machine hand one connection out twice), then reports.
    let inside = 0;
    let allInside!: () => void;
    const barrier = new Promise<void>((resolve) => { allInside = resolve; });
    const seen = await Promise.all([0, 1, 2].map(() => db.transaction(async (trx) => {
      const { rows } = await trx.raw("SELECT current_setting('pg_trgm.word_similarity_threshold', true) AS w, current_setting('statement_timeout') AS s, pg_backend_pid() AS pid");
      if (++inside === 3) allInside();
      await barrier;
      return rows[0] as { w: string; s: string; pid: number };
    })));
    t.is(new Set(seen.map((r) => r.pid)).size, 3);
    for (const r of seen) t.deepEqual([r.w, r.s], ["0.45", "4321ms"]);
    const { rows } = await plain.raw("SELECT current_setting('statement_timeout') AS s");
    t.not(rows[0].s, "4321ms");
  } finally {
    await db.destroy();
    await plain.destroy();
  }
});
