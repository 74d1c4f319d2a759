/** Unit tests of the byte-moving rules: base64, chunk bookkeeping, download chunks, quotas, MIME. */
import test from "ava";
import { createHash } from "node:crypto";
import { AppError } from "@cms/platform";
import {
  assemble, checkBase64, checkChunkFits, checkQuotas, chunkCount, chunkRange, decodeBase64, decodeVerified, filenameOfKey,
  mimeOfFilename, mimeOfUnsignedBytes,
} from "../src/domain/transfer-rules.ts";

function refused(t: import("ava").ExecutionContext, fn: () => unknown): AppError {
  const err = t.throws(fn) as AppError;
  t.true(err instanceof AppError);
  return err;
}

test("standard base64, with or without padding, decodes", (t) => {
  const bytes = Buffer.from("hello, bytes!");
  const b64 = bytes.toString("base64");
  t.deepEqual(decodeBase64(b64), bytes);
  t.deepEqual(decodeBase64(b64.replace(/=+$/, "")), bytes);
  t.is(refused(t, () => checkBase64("")).extra.field, "content_base64");
  t.regex(refused(t, () => checkBase64("A".repeat(12_000_004))).detail, /longer than 12000000/);
  t.is(checkBase64("QQ=="), 1);
  t.is(checkBase64("QQ"), 1);
  t.is(checkBase64("QUI"), 2);
});

test("decodeBase64 accepts and reads exactly what checkBase64 accepts, one character changed anywhere", (t) => {
  // The fast path trusts the decoded length of padded ASCII text; this compares it with the
  // scanning check for every Latin-1 character (and some beyond, which Node's decoder reads by
  // their low byte) in every position of padded and unpadded texts.
  const bases = ["QUJDREVG", "QUJDRA==", "QUJDREU=", "QUJDREV", "QUJDRA", "QUJD"];
  const chars = [...Array.from({ length: 256 }, (_, c) => String.fromCharCode(c)), "\u012b", "\u012f", "\u0141", "\uff21", "\u{1F600}"];
  let compared = 0;
  for (const base of bases) {
    for (let i = 0; i < base.length; i++) {
      for (const ch of chars) {
        const text = base.slice(0, i) + ch + base.slice(i + 1);
        let expected: Buffer | undefined;
        try { checkBase64(text); expected = Buffer.from(text, "base64"); } catch { expected = undefined; }
        if (expected) t.deepEqual(decodeBase64(text), expected, JSON.stringify(text));
        else t.throws(() => decodeBase64(text), { instanceOf: AppError }, JSON.stringify(text));
        compared++;
      }
    }
  }
  t.true(compared > 10_000);
});

test("whitespace anywhere and the URL-safe alphabet (even mixed) are tolerated", (t) => {
  const bytes = Buffer.from([0xfb, 0xff, 0xbf, 0x00, 0x3e, 0x3f, 0xfa]);
  const std = bytes.toString("base64");
  const url = bytes.toString("base64url");
  t.deepEqual(decodeBase64(url), bytes);
  const mixed = std.slice(0, 4) + url.slice(4);
  t.deepEqual(decodeBase64(mixed), bytes);
  const spaced = ` ${std.slice(0, 3)}\n${std.slice(3, 6)}\r\n\t${std.slice(6)} `;
  t.deepEqual(decodeBase64(spaced), bytes);
  t.is(checkBase64(spaced), bytes.length);
});

test("any other character is refused naming it and its 0-based position", (t) => {
  const err = refused(t, () => checkBase64("QUJD*EVG"));
  t.is(err.code, "invalid_request");
  t.is(err.extra.field, "content_base64");
  t.is(err.extra.character, "*");
  t.is(err.extra.position, 4);
  t.regex(err.detail, /"\*" at position 4/);
  const dot = refused(t, () => checkBase64("QU JD.EVG"));
  t.is(dot.extra.position, 5);
  const ctrl = refused(t, () => checkBase64("QUJD\u0000"));
  t.regex(ctrl.detail, /U\+0000 at position 4/);
  const accent = refused(t, () => checkBase64("QUJDé"));
  t.is(accent.extra.character, "é");
  t.is(accent.extra.position, 4);
  t.is(refused(t, () => checkBase64("QU!D", "data")).extra.field, "data");
});

test("padding only at the end, at most two, completing the group", (t) => {
  const mid = refused(t, () => checkBase64("QQ==QUJD"));
  t.is(mid.extra.character, "Q");
  t.is(mid.extra.position, 4);
  const third = refused(t, () => checkBase64("Q==="));
  t.is(third.extra.position, 3);
  const short = refused(t, () => checkBase64("QUJDQUI=="));
  t.is(short.extra.character, "=");
  t.is(short.extra.position, 7);
  const lone = refused(t, () => checkBase64("QUJDR"));
  t.is(lone.extra.character, "R");
  t.is(lone.extra.position, 4);
  t.is(checkBase64("QUJD QQ= ="), 4);
});

test("decodeVerified checks the cap, the declared length and the sha256", (t) => {
  const bytes = Buffer.alloc(300, 7);
  const b64 = bytes.toString("base64");
  const sha = createHash("sha256").update(bytes).digest("hex");
  t.deepEqual(decodeVerified({ base64: b64, contentLength: 300, sha256: sha, maxBytes: 300, tooLarge: "big" }), bytes);
  const big = refused(t, () => decodeVerified({ base64: b64, contentLength: 300, maxBytes: 299, tooLarge: "too big" }));
  t.is(big.code, "invalid_request");
  t.is(big.status, 400);
  t.is(big.extra.field, "content_base64");
  const len = refused(t, () => decodeVerified({ base64: b64, contentLength: 301, maxBytes: 1000, tooLarge: "x" }));
  t.is(len.extra.field, "content_length");
  t.is(len.extra.decoded_bytes, 300);
  const bad = refused(t, () => decodeVerified({ base64: b64, contentLength: 300, sha256: "0".repeat(64), maxBytes: 1000, tooLarge: "x" }));
  t.is(bad.extra.field, "sha256");
  t.is(bad.extra.actual_sha256, sha);
});

test("a chunk must fit the declared total; indexes beyond any possible chunk are refused", (t) => {
  t.notThrows(() => checkChunkFits({ index: 0, size: 10, otherBytes: 0, contentLength: 10 }));
  t.notThrows(() => checkChunkFits({ index: 2, size: 4, otherBytes: 6, contentLength: 10 }));
  t.is(refused(t, () => checkChunkFits({ index: 1, size: 5, otherBytes: 6, contentLength: 10 })).extra.field, "content_length");
  t.is(refused(t, () => checkChunkFits({ index: 10, size: 1, otherBytes: 0, contentLength: 10 })).extra.field, "index");
});

test("assembly needs contiguous indexes from 0 and the exact total; missing indexes are listed", (t) => {
  t.deepEqual(assemble([{ index: 1, size: 4 }, { index: 0, size: 4 }, { index: 2, size: 2 }], 10), { ok: true, chunkCount: 3 });
  t.deepEqual(assemble([{ index: 0, size: 4 }, { index: 2, size: 2 }], 10), { ok: false, missing: [1], receivedBytes: 6 });
  // The tail is predicted from chunk 0's size: 10 bytes in chunks of 4 make indexes 0..2.
  t.deepEqual(assemble([{ index: 0, size: 4 }], 10), { ok: false, missing: [1, 2], receivedBytes: 4 });
  t.deepEqual(assemble([], 5), { ok: false, missing: [0], receivedBytes: 0 });
  t.deepEqual(assemble([{ index: 1, size: 3 }], 6), { ok: false, missing: [0], receivedBytes: 3 });
  t.deepEqual(assemble([{ index: 1, size: 3 }], 9), { ok: false, missing: [0, 2], receivedBytes: 3 });
  // Contiguous but short: at least the next index is missing.
  t.deepEqual(assemble([{ index: 0, size: 4 }, { index: 1, size: 1 }], 10), { ok: false, missing: [2], receivedBytes: 5 });
});

test("download chunks: count, ranges, the last one shorter, past the end refused", (t) => {
  t.is(chunkCount(0), 1);
  t.is(chunkCount(16384), 1);
  t.is(chunkCount(16385), 2);
  t.deepEqual(chunkRange(0, 40000), { start: 0, end: 16383 });
  t.deepEqual(chunkRange(2, 40000), { start: 32768, end: 39999 });
  const past = refused(t, () => chunkRange(3, 40000));
  t.is(past.extra.field, "index");
  t.is(past.extra.chunk_count, 3);
});

test("download chunks of an empty file: one chunk with no byte range; index 1 refused", (t) => {
  t.is(chunkCount(0), 1);
  t.is(chunkRange(0, 0), null);
  t.is(refused(t, () => chunkRange(1, 0)).extra.chunk_count, 1);
  t.deepEqual(chunkRange(0, 1), { start: 0, end: 0 });
  t.deepEqual(chunkRange(0, 16384), { start: 0, end: 16383 });
});

test("quotas: per user and per collection, at the limit allowed", (t) => {
  t.notThrows(() => checkQuotas({ userBytes: 90, userLimit: 100, collectionBytes: 0, collectionLimit: 50, requested: 10 }));
  const user = refused(t, () => checkQuotas({ userBytes: 91, userLimit: 100, collectionBytes: 0, collectionLimit: 50, requested: 10 }));
  t.is(user.code, "invalid_request");
  t.is(user.extra.field, "content_length");
  t.is(user.extra.quota, "user_storage");
  const coll = refused(t, () => checkQuotas({ userBytes: 0, userLimit: 100, collectionBytes: 45, collectionLimit: 50, requested: 10 }));
  t.is(coll.extra.quota, "collection_storage");
  t.is(coll.extra.used_bytes, 45);
});

test("MIME helpers: by extension, unsigned bytes as text, filenames of keys", (t) => {
  t.is(mimeOfFilename("Notes.MD"), "text/markdown");
  t.is(mimeOfFilename("a.jpeg"), "image/jpeg");
  t.is(mimeOfFilename("noext"), undefined);
  t.is(mimeOfUnsignedBytes(Buffer.from("plain words\n"), undefined), "text/plain");
  t.is(mimeOfUnsignedBytes(Buffer.from("# title"), "text/markdown"), "text/markdown");
  t.is(mimeOfUnsignedBytes(Buffer.from([0, 1, 2, 3, 200]), undefined), "application/octet-stream");
  // A multi-byte character cut by the sample boundary is still text.
  t.is(mimeOfUnsignedBytes(Buffer.from("héllo é").subarray(0, 8), undefined), "text/plain");
  t.is(filenameOfKey("store://u/1/1700000000000-ab12cd34_photo.jpg"), "photo.jpg");
  t.is(filenameOfKey("store://u/1/1700000000000_photo.jpg"), "photo.jpg");
});
