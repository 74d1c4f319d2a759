/** The UTF-8 encoding protobuf-es uses in this system: TextEncoder's bytes, always. */
import test from "ava";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { getTextEncoding } from "@bufbuild/protobuf/wire";
import { MediaSchema, TextNoteSchema } from "@cms/contracts/media/v1/resources_pb";
import "../src/index.ts";
import { encodeUtf8 } from "../src/text-encoding.ts";

const reference = new TextEncoder();

test("the bytes are TextEncoder's: empty, ASCII at and past the fast path's length, non-ASCII, surrogates", (t) => {
  const cases = [
    "", "a", "\0", "\n\t", "\u007f", "\u0080", "é", "naïve", "日本語", "😀", "a😀b",
    "\ud800", "x\udc00y", "\ud83d", // lone surrogates: TextEncoder writes U+FFFD
    "a".repeat(63), "a".repeat(64), "a".repeat(65), `${"a".repeat(63)}é`, `${"a".repeat(64)}é`, "é".repeat(40),
    "https://example.com/media/12345/thumbnail?size=200", "store://1/2/abc.webp",
  ];
  for (const s of cases) t.deepEqual(Buffer.from(encodeUtf8(s)), Buffer.from(reference.encode(s)), JSON.stringify(s));
});

test("the bytes are TextEncoder's for 5,000 random strings of ASCII, accented, CJK, emoji and lone surrogates", (t) => {
  const pool = ["a", "Z", "0", " ", "/", "\u007f", "\u0080", "é", "ß", "中", "😀", "\ud800", "\udfff", "\0"];
  let seed = 20261127;
  const next = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed; };
  for (let i = 0; i < 5000; i++) {
    const length = next() % 90;
    // Mostly ASCII, as the fields are: the fast path and its fallbacks both get exercised.
    let s = "";
    for (let j = 0; j < length; j++) s += next() % 10 < 8 ? String.fromCharCode(32 + (next() % 95)) : pool[next() % pool.length];
    const got = Buffer.from(encodeUtf8(s));
    if (!got.equals(Buffer.from(reference.encode(s)))) { t.fail(`differs for ${JSON.stringify(s)}`); return; }
  }
  t.pass();
});

test("the platform installs it for protobuf-es, and messages round-trip through it", (t) => {
  t.is(getTextEncoding().encodeUtf8, encodeUtf8);
  const message = create(MediaSchema, {
    id: 7n, collectionId: 9n, name: "Crème brûlée 🍮", description: "a".repeat(200), tags: ["ascii", "日本", "\u0080"],
    mainUrl: "https://example.com/x", viewer: "text", createdBy: "42", note: create(TextNoteSchema, { textNote: "x\ud800y" }),
  });
  const back = fromBinary(MediaSchema, toBinary(MediaSchema, message));
  t.is(back.name, "Crème brûlée 🍮");
  t.deepEqual(back.tags, ["ascii", "日本", "\u0080"]);
  t.is(back.description, "a".repeat(200));
  t.is(back.mainUrl, "https://example.com/x");
  t.is(back.note?.textNote, "x\ufffdy");
});
