/**
 * Strings on the wire between this system's processes: protobuf-es (2.17) writes short ASCII
 * strings itself and everything else through TextEncoder.encodeInto, and checks UTF-16 with the
 * native String.prototype.isWellFormed. The platform used to install both through
 * configureTextEncoding; these tests hold the library's own to the same bytes.
 */
import test from "ava";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { getTextEncoding } from "@bufbuild/protobuf/wire";
import { MediaSchema, TextNoteSchema } from "@cms/contracts/media/v1/resources_pb";
import "../src/index.ts";

const reference = new TextEncoder();

/** The bytes of TextNote.text_note (field 1) as written by protobuf-es; TextEncoder's expected. */
function encodedField(text: string): Buffer {
  const bytes = Buffer.from(toBinary(TextNoteSchema, create(TextNoteSchema, { textNote: text })));
  if (text === "") return bytes;
  // tag (field 1, length-delimited), varint length, the UTF-8
  let i = 1;
  while (bytes[i]! & 0x80) i++;
  return bytes.subarray(i + 1);
}

test("the bytes are TextEncoder's: empty, ASCII short and long, non-ASCII, surrogates", (t) => {
  const cases = [
    "", "a", "\0", "\n\t", "\u007f", "\u0080", "é", "naïve", "日本語", "😀", "a😀b",
    "\ud800", "x\udc00y", "\ud83d", // lone surrogates: TextEncoder writes U+FFFD
    "a".repeat(63), "a".repeat(64), "a".repeat(65), "a".repeat(127), "a".repeat(128), "a".repeat(300),
    `${"a".repeat(63)}é`, `${"a".repeat(200)}é`, "é".repeat(40), "é".repeat(100),
    "https://example.com/media/12345/thumbnail?size=200", "store://1/2/abc.webp",
  ];
  for (const s of cases) t.deepEqual(encodedField(s), Buffer.from(reference.encode(s)), JSON.stringify(s));
});

test("the bytes are TextEncoder's for 5,000 random strings of ASCII, accented, CJK, emoji and lone surrogates", (t) => {
  const pool = ["a", "Z", "0", " ", "/", "\u007f", "\u0080", "é", "ß", "中", "😀", "\ud800", "\udfff", "\0"];
  let seed = 20261127;
  const next = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed; };
  for (let i = 0; i < 5000; i++) {
    const length = next() % 300;
    let s = "";
    for (let j = 0; j < length; j++) s += next() % 10 < 8 ? String.fromCharCode(32 + (next() % 95)) : pool[next() % pool.length];
    if (!encodedField(s).equals(Buffer.from(reference.encode(s)))) { t.fail(`differs for ${JSON.stringify(s)}`); return; }
  }
  t.pass();
});

test("UTF-16 is checked natively: lone surrogates are not well-formed, a chunk's base64 is", (t) => {
  const { checkUtf8 } = getTextEncoding();
  // The portable check (encodeURIComponent, ~13 ms a MiB) would answer false with it broken.
  const portable = globalThis.encodeURIComponent;
  globalThis.encodeURIComponent = () => { throw new URIError("not the native check"); };
  try {
    t.false(checkUtf8("x\ud800y"));
    t.false(checkUtf8("\udc00"));
    t.true(checkUtf8("Crème brûlée 🍮"));
    t.true(checkUtf8(Buffer.alloc(3 * 1024 * 1024, 7).toString("base64")));
  } finally {
    globalThis.encodeURIComponent = portable;
  }
});

test("messages round-trip, a 4 MiB chunk's base64 among them", (t) => {
  const big = Buffer.alloc(3 * 1024 * 1024, 0xa5).toString("base64");
  const message = create(MediaSchema, {
    id: 7n, collectionId: 9n, name: "Crème brûlée 🍮", description: big, tags: ["ascii", "日本", "\u0080"],
    mainUrl: "https://example.com/x", viewer: "text", createdBy: "42", note: create(TextNoteSchema, { textNote: "x\ud800y" }),
  });
  const back = fromBinary(MediaSchema, toBinary(MediaSchema, message));
  t.is(back.name, "Crème brûlée 🍮");
  t.deepEqual(back.tags, ["ascii", "日本", "\u0080"]);
  t.is(back.description, big);
  t.is(back.mainUrl, "https://example.com/x");
  t.is(back.note?.textNote, "x\ufffdy");
});
