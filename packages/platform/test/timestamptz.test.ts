/**
 * timestamptz values read without pg's regular-expression parser (parseTimestamptz): the same
 * instant as PostgreSQL means, in every time zone, and the same Date as pg's parser for whatever
 * text it is given.
 */
import test from "ava";
import fc from "fast-check";
import { createDb, parseTimestamptz, pgParseTimestamptz as parsePostgresDate } from "../src/db.ts";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

test("the instant PostgreSQL means, whatever the session's time zone (offsets with minutes and seconds too)", async (t) => {
  const db = createDb(adminUrl, "public", 1);
  try {
    // Amsterdam before 1937 was +00:19:32, Kathmandu is +05:45, St. John's is -03:30.
    for (const zone of ["UTC", "America/Los_Angeles", "Asia/Kathmandu", "America/St_Johns", "Europe/Amsterdam"]) {
      await db.transaction(async (trx) => {
        await trx.raw(`SET LOCAL TimeZone = '${zone}'`);
        const { rows } = await trx.raw(`
          SELECT ts, ts::text AS text, floor(extract(epoch FROM ts) * 1000)::float8 AS ms
          FROM (VALUES ('2026-11-24 18:30:08.705123+00'::timestamptz), ('2026-03-29 01:59:59.9999+00'), ('1999-12-31 23:59:59+00'),
                       ('1900-06-01 12:00:00.5+00'), ('1970-01-01 00:00:00+00'), ('1960-07-04 03:02:01.001+00'), ('9999-12-31 23:59:59.999+00')) v(ts)`);
        for (const r of rows as Array<{ ts: Date; text: string; ms: number }>) {
          t.true(r.ts instanceof Date);
          t.is(r.ts.getTime(), r.ms, `${zone}: ${r.text}`);
          t.is(parseTimestamptz(r.text).getTime(), r.ms, `${zone}: ${r.text}`);
        }
      });
    }
  } finally {
    await db.destroy();
  }
});

test("what the fast path does not read goes to pg's parser: infinity, BC, years past 9999 or before 1000, other shapes", (t) => {
  for (const text of ["infinity", "-infinity", "0044-03-15 12:00:00+00 BC", "10000-01-01 00:00:00+00", "0099-01-01 00:00:00+00",
    "2026-11-24T18:30:08Z", "2026-11-24 18:30:08", "2026-11-24 18:30:08+0x", "2026-11-24 1a:30:08+00", "2026-11-24 18:30:08.5+00 extra"]) {
    const expected = parsePostgresDate(text);
    const got = parseTimestamptz(text);
    if (expected instanceof Date) t.is(got.getTime(), expected.getTime(), text);
    else t.is(got as unknown, expected as unknown, text);
  }
});

test("any ISO text PostgreSQL may write gives the same Date as pg's parser", (t) => {
  const pad = (n: number, w: number) => String(n).padStart(w, "0");
  const text = fc.record({
    year: fc.integer({ min: 1000, max: 9999 }), month: fc.integer({ min: 1, max: 12 }), day: fc.integer({ min: 1, max: 28 }),
    hour: fc.integer({ min: 0, max: 23 }), minute: fc.integer({ min: 0, max: 59 }), second: fc.integer({ min: 0, max: 59 }),
    fraction: fc.option(fc.stringMatching(/^[0-9]{1,6}$/), { nil: undefined }),
    sign: fc.constantFrom("+", "-"), offsetHours: fc.integer({ min: 0, max: 15 }),
    offsetMinutes: fc.option(fc.integer({ min: 0, max: 59 }), { nil: undefined }), offsetSeconds: fc.option(fc.integer({ min: 0, max: 59 }), { nil: undefined }),
  }).map((v) => `${pad(v.year, 4)}-${pad(v.month, 2)}-${pad(v.day, 2)} ${pad(v.hour, 2)}:${pad(v.minute, 2)}:${pad(v.second, 2)}`
    + `${v.fraction === undefined ? "" : `.${v.fraction}`}${v.sign}${pad(v.offsetHours, 2)}`
    + `${v.offsetMinutes === undefined ? "" : `:${pad(v.offsetMinutes, 2)}${v.offsetSeconds === undefined ? "" : `:${pad(v.offsetSeconds, 2)}`}`}`);
  fc.assert(fc.property(text, (s) => parseTimestamptz(s).getTime() === (parsePostgresDate(s) as Date).getTime()), { numRuns: 5000, seed: 1124 });
  t.pass();
});
