/** Range, conditional-request and Content-Disposition rules of streamed objects. */
import test from "ava";
import { contentDisposition, etagMatches, ifRangeHolds, parseRange } from "../src/domain/http-range.ts";

test("single byte ranges: closed, open-ended, suffix, clamped", (t) => {
  t.deepEqual(parseRange("bytes=0-99", 1000), { kind: "partial", start: 0, end: 99 });
  t.deepEqual(parseRange("bytes=900-", 1000), { kind: "partial", start: 900, end: 999 });
  t.deepEqual(parseRange("bytes=-100", 1000), { kind: "partial", start: 900, end: 999 });
  t.deepEqual(parseRange("bytes=-5000", 1000), { kind: "partial", start: 0, end: 999 });
  t.deepEqual(parseRange("bytes=990-2000", 1000), { kind: "partial", start: 990, end: 999 });
  t.deepEqual(parseRange(" Bytes = 1 - 2 ", 1000), { kind: "partial", start: 1, end: 2 });
});

test("no header, other units, malformed and multi-range headers send the whole object", (t) => {
  for (const h of [undefined, "", "items=0-1", "bytes=abc", "bytes=-", "bytes=5-1", "bytes=0-1,5-6"]) {
    t.deepEqual(parseRange(h, 1000), { kind: "full" }, String(h));
  }
});

test("ranges past the end are unsatisfiable", (t) => {
  t.deepEqual(parseRange("bytes=1000-", 1000), { kind: "unsatisfiable" });
  t.deepEqual(parseRange("bytes=-0", 1000), { kind: "unsatisfiable" });
  t.deepEqual(parseRange("bytes=0-", 0), { kind: "unsatisfiable" });
});

test("If-None-Match: lists, weak tags and the wildcard", (t) => {
  t.true(etagMatches('"abc"', '"abc"'));
  t.true(etagMatches('"x", W/"abc"', '"abc"'));
  t.true(etagMatches("*", '"abc"'));
  t.false(etagMatches('"abd"', '"abc"'));
  t.false(etagMatches(undefined, '"abc"'));
});

test("If-Range: the range holds only for the same strong tag", (t) => {
  t.true(ifRangeHolds(undefined, '"abc"'));
  t.true(ifRangeHolds('"abc"', '"abc"'));
  t.false(ifRangeHolds('"old"', '"abc"'));
  t.false(ifRangeHolds('W/"abc"', '"abc"'));
  t.true(ifRangeHolds("Wed, 21 Oct 2015 07:28:00 GMT", '"abc"'));
});

test("Content-Disposition carries an ASCII fallback and the UTF-8 name", (t) => {
  t.is(contentDisposition("attachment", "photo.jpg"), `attachment; filename="photo.jpg"; filename*=UTF-8''photo.jpg`);
  t.is(contentDisposition("inline", 'é "x".txt'), `inline; filename="e_ _x_.txt"; filename*=UTF-8''e%CC%81%20%22x%22.txt`.replace("e%CC%81", "%C3%A9"));
});
