/** The gateway's intake of a request body: what it refuses before any schema, naming the field. */
import test from "ava";
import { AppError } from "@cms/platform";
import { bodyText, findDuplicateKey, parseRequestBody, MAX_DEPTH } from "../src/domain/request-body.js";

const fieldOf = (raw: string | Buffer): string => {
  try { parseRequestBody(Buffer.isBuffer(raw) ? raw : Buffer.from(raw)); return "ok"; } catch (err) { return String((err as AppError).extra.field ?? (err as AppError).detail); }
};

test("duplicate keys, at any depth, with their path", (t) => {
  t.is(findDuplicateKey('{"a":1,"a":2}'), "a");
  t.is(findDuplicateKey('{"a":{"b":1,"c":{"d":[1,{"e":1,"e":2}]}}}'), "a.c.d[1].e");
  t.is(findDuplicateKey('{"a":[{"x":1},{"x":2}],"b":{"x":1}}'), undefined, "the same key in different objects is fine");
  t.is(findDuplicateKey('{"a\\"b":1,"a\\"b":2}'), 'a"b', "escaped quotes inside keys");
  t.is(findDuplicateKey('{"k":"a\\\\","k":1}'), "k", "a value ending in a backslash");
  t.is(findDuplicateKey('{"\\u0061":1,"a":2}'), "a", "the same key spelled with an escape");
  t.is(findDuplicateKey('{"s":"{\\"a\\":1,\\"a\\":2}"}'), undefined, "JSON inside a string is text");
  t.is(findDuplicateKey(JSON.stringify({ content_base64: "A".repeat(2_000_000), index: 1 })), undefined);
});

test("NUL characters and unpaired surrogates anywhere, keys included", (t) => {
  t.is(fieldOf(JSON.stringify({ op: "x", name: "a\u0000b" })), "name");
  t.is(fieldOf(JSON.stringify({ op: "x", tags: ["ok", "b\u0000"] })), "tags[1]");
  t.is(fieldOf(JSON.stringify({ op: "x", repro: { deep: [{ k: "\u0000" }] } })), "repro.deep[0].k");
  t.is(fieldOf('{"op":"x","a\\u0000":1}'), "a\u0000");
  t.is(fieldOf('{"op":"x","name":"\\ud800"}'), "name");
  t.is(fieldOf('{"op":"x","name":"\\udc00x"}'), "name");
  t.is(fieldOf('{"op":"x","name":"\\ud83d\\ude00"}'), "ok", "a surrogate pair is a character");
});

test("integers beyond 2^53 are refused; floats and safe integers pass to the schema", (t) => {
  t.is(fieldOf('{"op":"x","collection_id":18446744073709552000}'), "collection_id");
  t.is(fieldOf('{"op":"x","ids":[1,9007199254740993]}'), "ids[1]");
  t.is(fieldOf('{"op":"x","n":-9007199254740993}'), "n");
  t.is(fieldOf('{"op":"x","n":9007199254740991}'), "ok");
  t.is(fieldOf('{"op":"x","n":1.5}'), "ok", "the schema decides about floats");
});

test("nesting deeper than the limit, invalid UTF-8, invalid JSON, non-objects", (t) => {
  const deep = (n: number) => `{"op":"x","repro":${"[".repeat(n)}${"]".repeat(n)}}`;
  t.is(fieldOf(deep(MAX_DEPTH - 2)), "ok");
  t.regex(fieldOf(deep(MAX_DEPTH + 5)), /^repro(\[0\])+$/);
  t.regex(fieldOf(deep(200_000)), /not valid JSON|repro/);
  t.regex(fieldOf(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])), /UTF-8/);
  t.regex(fieldOf("{"), /not valid JSON/);
  t.regex(fieldOf("[1]"), /JSON object/);
  t.regex(fieldOf("null"), /JSON object/);
});

test("the body's text: ASCII and multi-byte UTF-8 decode to the same text as UTF-8; invalid bytes are refused", (t) => {
  const ascii = JSON.stringify({ op: "media.upload_chunk", content_base64: "QUJD".repeat(1000) });
  t.is(bodyText(Buffer.from(ascii)), ascii);
  const mixed = JSON.stringify({ op: "x", name: "Café 東京 😀", tags: ["naïve"] });
  t.is(bodyText(Buffer.from(mixed)), mixed);
  t.deepEqual(parseRequestBody(Buffer.from(mixed)), JSON.parse(mixed));
  // Latin-1 bytes are not UTF-8: the ASCII path must not take them (it would strip the high bit).
  t.throws(() => bodyText(Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xe9, 0x22, 0x7d])), { message: /UTF-8/ });
  t.throws(() => bodyText(Buffer.from([0xc3])), { message: /UTF-8/ }, "a truncated sequence");
});

test("parser errors map to the contract's status and a sentence", async (t) => {
  const { clientErrorAnswer } = await import("../src/http/client-errors.js");
  t.is(clientErrorAnswer("HPE_HEADER_OVERFLOW").status, 431);
  t.is(clientErrorAnswer("ERR_HTTP_REQUEST_TIMEOUT").status, 408);
  t.regex(clientErrorAnswer("HPE_INVALID_EOF_STATE").detail, /ended before/);
  t.regex(clientErrorAnswer("HPE_INVALID_CHUNK_SIZE").detail, /chunked/);
  t.is(clientErrorAnswer("HPE_INVALID_HEADER_TOKEN").status, 400);
  t.is(clientErrorAnswer(undefined).status, 400);
});
