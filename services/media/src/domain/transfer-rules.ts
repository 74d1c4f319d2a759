/**
 * Rules of moving bytes, as plain functions: the tolerant-but-strict base64 of media.upload and
 * the chunk operations, chunk bookkeeping of chunked uploads, chunk arithmetic of chunked
 * downloads, storage quotas, and small MIME helpers.
 */
import { createHash } from "node:crypto";
import { AppError } from "@cms/platform";

// ---- limits ----------------------------------------------------------------------------------

/** media.upload: hard cap on the decoded bytes. */
export const SINGLE_UPLOAD_MAX_BYTES = 100 * 1024;
/** Recommended chunk size of chunked uploads and the chunk size of chunked downloads. */
export const CHUNK_BYTES = 16 * 1024;
/** Largest accepted upload chunk (decoded). */
export const MAX_CHUNK_BYTES = 8 * 1024 * 1024;
/** Largest file of a chunked upload or download. */
export const CHUNKED_MAX_BYTES = 25 * 1024 * 1024;

// ---- base64 ----------------------------------------------------------------------------------

/** Longest base64 text accepted (an 8 MiB chunk is 11,184,812 characters). */
export const MAX_BASE64_CHARS = 12_000_000;

const ALPHA = 1;
const SPACE = 2;
const PAD = 3;
/** Character classes of ASCII: alphabet (both alphabets), whitespace, padding; 0 is refused. */
const CLASS = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_") CLASS[c.charCodeAt(0)] = ALPHA;
for (const c of " \t\n\r\f\v") CLASS[c.charCodeAt(0)] = SPACE;
CLASS[0x3d] = PAD;

function describeChar(c: string): string {
  const code = c.codePointAt(0)!;
  return code < 0x20 || code === 0x7f || (code >= 0x80 && code < 0xa0) ? `U+${code.toString(16).toUpperCase().padStart(4, "0")}` : `"${c}"`;
}

function refuse(field: string, detail: string, character: string, position: number): never {
  throw new AppError("invalid_request", `${field} is not valid base64: ${detail}`, { field, character, position });
}

interface Scan { data: number; pads: number; firstPad: number; bad: number }

function scanBytes(b: Uint8Array): Scan {
  let data = 0;
  let pads = 0;
  let firstPad = -1;
  const n = b.length;
  for (let i = 0; i < n; i++) {
    const k = CLASS[b[i]!]!;
    if (k === ALPHA) {
      if (pads > 0) return { data, pads, firstPad, bad: i };
      data++;
    } else if (k === PAD) {
      if (pads === 0) firstPad = i;
      if (++pads > 2) return { data, pads, firstPad, bad: i };
    } else if (k !== SPACE) {
      return { data, pads, firstPad, bad: i };
    }
  }
  return { data, pads, firstPad, bad: -1 };
}

function scanChars(text: string): Scan {
  let data = 0;
  let pads = 0;
  let firstPad = -1;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    const k = code < 128 ? CLASS[code]! : 0;
    if (k === ALPHA) {
      if (pads > 0) return { data, pads, firstPad, bad: i };
      data++;
    } else if (k === PAD) {
      if (pads === 0) firstPad = i;
      if (++pads > 2) return { data, pads, firstPad, bad: i };
    } else if (k !== SPACE) {
      return { data, pads, firstPad, bad: i };
    }
  }
  return { data, pads, firstPad, bad: -1 };
}

/** The error for the character at position i (a UTF-16 index into text). */
function refuseAt(field: string, text: string, i: number, pads: number): never {
  const ch = String.fromCodePoint(text.codePointAt(i)!);
  if (ch === "=") refuse(field, `a third "=" at position ${i}; padding is at most "==".`, "=", i);
  if (pads > 0 && CLASS[ch.charCodeAt(0)] === ALPHA) refuse(field, `${describeChar(ch)} at position ${i} follows the "=" padding, which may only end the text.`, ch, i);
  refuse(field, `unexpected character ${describeChar(ch)} at position ${i}; only A-Z, a-z, 0-9, "+", "/" (or the URL-safe "-", "_"), "=" padding at the end and whitespace are accepted.`, ch, i);
}

/**
 * The number of bytes a base64 text decodes to, after checking it: the standard and the
 * URL-safe alphabets (mixed too) and whitespace anywhere are accepted, "=" padding is optional
 * but, when present, only at the end and completing the last 4-character group. Anything else
 * is refused with 400 naming the character and its 0-based position in the text.
 */
export function checkBase64(text: string, field = "content_base64"): number {
  if (!text.length) throw new AppError("invalid_request", `${field} must not be empty.`, { field });
  if (text.length > MAX_BASE64_CHARS) throw new AppError("invalid_request", `${field} is longer than ${MAX_BASE64_CHARS} characters.`, { field });
  // ASCII text (the usual case) is scanned as bytes; other text char by char (it will fail).
  const scan = isAsciiText(text) ? scanBytes(Buffer.from(text, "latin1")) : scanChars(text);
  if (scan.bad >= 0) refuseAt(field, text, scan.bad, scan.pads);
  const { data, pads, firstPad } = scan;
  if (data % 4 === 1) {
    const last = lastDataPosition(text);
    refuse(field, `it ends with a lone character (${describeChar(text[last] ?? "")} at position ${last}): ${data} base64 characters cannot encode whole bytes.`, text[last] ?? "", last);
  }
  if (pads > 0 && (data + pads) % 4 !== 0) {
    refuse(field, `the "=" padding at position ${firstPad} does not complete a 4-character group.`, "=", firstPad);
  }
  return Math.floor((data * 3) / 4);
}

function lastDataPosition(text: string): number {
  for (let i = text.length - 1; i >= 0; i--) {
    const code = text.charCodeAt(i);
    if (code >= 128 || CLASS[code] === ALPHA) return i;
  }
  return 0;
}

/** Whether every character of text is ASCII (its UTF-8 form is one byte a character). */
function isAsciiText(text: string): boolean {
  return Buffer.byteLength(text, "utf8") === text.length;
}

/**
 * The bytes a padded base64 text of ASCII characters decodes to when every character is one
 * of the alphabets' and "=" only pads the end; -1 when the text cannot be such a text.
 */
function paddedDecodedSize(text: string): number {
  if (text.length % 4 !== 0 || !isAsciiText(text)) return -1;
  const pads = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  return (text.length / 4) * 3 - pads;
}

/**
 * Checks and decodes base64. Node's decoder skips every character it cannot read (whitespace,
 * characters outside both alphabets, "=" before the end), so padded ASCII text that decodes to
 * the full size its length promises held none of them: what encoders produce is accepted at the
 * cost of the decoding, with no scan in JavaScript and no re-encoded copy to compare with (for a
 * 1 MiB chunk, 1.4 MB more of garbage and 0.4 ms more of CPU). Anything else is scanned by
 * checkBase64, and Node's decoder reads the tolerated forms (whitespace, the URL-safe alphabet,
 * missing padding) the same way. (The ASCII condition matters: the decoder reads a character
 * beyond Latin-1 by its low byte, so "ī" would pass for "+".)
 */
export function decodeBase64(text: string, field = "content_base64"): Buffer {
  // Refused by checkBase64 before any decoding: empty text, and text over the limit.
  if (!text.length || text.length > MAX_BASE64_CHARS) checkBase64(text, field);
  const bytes = Buffer.from(text, "base64");
  if (bytes.length !== paddedDecodedSize(text)) checkBase64(text, field);
  return bytes;
}

/** Hex SHA-256 of bytes in memory. */
export function sha256Hex(bytes: Buffer): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * Decodes a base64 payload and verifies it against its declared decoded length (and optional
 * hex sha256), refusing anything over maxBytes (413) before decoding it.
 */
export function decodeVerified(input: { base64: string; contentLength: number; sha256?: string; maxBytes: number; tooLarge: string }): Buffer {
  // Longer than the canonical text of maxBytes: count exactly (whitespace does not count).
  if (input.base64.length > 4 * Math.ceil(input.maxBytes / 3)) {
    const size = checkBase64(input.base64);
    if (size > input.maxBytes) throw new AppError("invalid_request", input.tooLarge, { field: "content_base64", max_bytes: input.maxBytes, decoded_bytes: size });
  }
  const bytes = decodeBase64(input.base64);
  if (bytes.length > input.maxBytes) throw new AppError("invalid_request", input.tooLarge, { field: "content_base64", max_bytes: input.maxBytes, decoded_bytes: bytes.length });
  if (bytes.length !== input.contentLength) {
    throw new AppError("invalid_request", `content_base64 decodes to ${bytes.length} bytes but content_length says ${input.contentLength}.`, { field: "content_length", decoded_bytes: bytes.length });
  }
  if (input.sha256 !== undefined) {
    const actual = sha256Hex(bytes);
    if (actual !== input.sha256) throw new AppError("invalid_request", `The decoded bytes have sha256 ${actual}, not the ${input.sha256} given.`, { field: "sha256", actual_sha256: actual });
  }
  return bytes;
}

// ---- chunked upload ----------------------------------------------------------------------------

/**
 * A chunk may be stored when, with the other chunks already held, the session stays within its
 * declared total: each chunk carries at least one byte, so index content_length or beyond can
 * never be part of a valid file.
 */
export function checkChunkFits(input: { index: number; size: number; otherBytes: number; contentLength: number }): void {
  if (input.index >= input.contentLength) {
    throw new AppError("invalid_request", `index ${input.index} is beyond any chunk of a ${input.contentLength}-byte file.`, { field: "index" });
  }
  if (input.otherBytes + input.size > input.contentLength) {
    throw new AppError("invalid_request", `With this chunk the session would hold ${input.otherBytes + input.size} bytes, more than the ${input.contentLength} declared at media.upload_begin.`, {
      field: "content_length", held_bytes: input.otherBytes, declared_bytes: input.contentLength,
    });
  }
}

/** Whether the chunks make the whole file, and if not what is missing. */
export type Assembly =
  | { ok: true; chunkCount: number }
  | { ok: false; missing: number[]; receivedBytes: number };

/**
 * Whether the chunks held make the whole file: indexes contiguous from 0 and the declared total.
 * When they do not, the missing indexes: the gaps below the highest index received, plus the
 * indexes still expected after it (predicted from the size of chunk 0, at least one).
 */
export function assemble(chunks: ReadonlyArray<{ index: number; size: number }>, contentLength: number): Assembly {
  const sorted = [...chunks].sort((a, b) => a.index - b.index);
  const have = new Set(sorted.map((c) => c.index));
  const received = sorted.reduce((n, c) => n + c.size, 0);
  const top = sorted.length ? sorted[sorted.length - 1]!.index : -1;
  const missing: number[] = [];
  for (let i = 0; i <= top; i++) if (!have.has(i)) missing.push(i);
  if (received < contentLength) {
    const unit = sorted.find((c) => c.index === 0)?.size ?? sorted[0]?.size ?? CHUNK_BYTES;
    // With no gap, at least the index after the highest is missing; a gap may be the shortfall.
    const expectedCount = Math.max(missing.length ? top + 1 : top + 2, Math.ceil(contentLength / Math.max(1, unit)));
    for (let i = top + 1; i < expectedCount && missing.length < 10_000; i++) missing.push(i);
  }
  if (!missing.length && received === contentLength) return { ok: true, chunkCount: sorted.length };
  return { ok: false, missing, receivedBytes: received };
}

// ---- chunked download --------------------------------------------------------------------------

export function chunkCount(size: number, chunkBytes = CHUNK_BYTES): number {
  return Math.max(1, Math.ceil(size / chunkBytes));
}

/**
 * Inclusive byte range of chunk `index`; an index past the last chunk is refused. null for the
 * one chunk of an empty file: it holds no bytes, and no inclusive range can say so.
 */
export function chunkRange(index: number, size: number, chunkBytes = CHUNK_BYTES): { start: number; end: number } | null {
  const count = chunkCount(size, chunkBytes);
  if (index >= count) throw new AppError("invalid_request", `index ${index} is past the last chunk; this download has ${count} chunk(s), indexes 0 to ${count - 1}.`, { field: "index", chunk_count: count });
  if (size === 0) return null;
  const start = index * chunkBytes;
  return { start, end: Math.min(size, start + chunkBytes) - 1 };
}

// ---- quotas ----------------------------------------------------------------------------------

export interface QuotaUse { userBytes: number; userLimit: number; collectionBytes: number; collectionLimit: number; requested: number }

/** Refuses a new upload that would take the owner or the collection over its storage quota. */
export function checkQuotas(q: QuotaUse): void {
  if (q.userBytes + q.requested > q.userLimit) {
    throw new AppError("invalid_request", `This upload of ${q.requested} bytes would exceed the owner's storage quota: ${q.userBytes} of ${q.userLimit} bytes are in use. Delete files or ask the owner to free space.`, {
      field: "content_length", quota: "user_storage", limit_bytes: q.userLimit, used_bytes: q.userBytes, requested_bytes: q.requested,
    });
  }
  if (q.collectionBytes + q.requested > q.collectionLimit) {
    throw new AppError("invalid_request", `This upload of ${q.requested} bytes would exceed the collection's storage quota: ${q.collectionBytes} of ${q.collectionLimit} bytes are in use.`, {
      field: "content_length", quota: "collection_storage", limit_bytes: q.collectionLimit, used_bytes: q.collectionBytes, requested_bytes: q.requested,
    });
  }
}

// ---- MIME and names ----------------------------------------------------------------------------

const MIME_OF_EXTENSION: Record<string, string> = {
  jpg: "image/jpeg", jpeg: "image/jpeg", png: "image/png", gif: "image/gif", webp: "image/webp", avif: "image/avif", heic: "image/heic",
  svg: "image/svg+xml", tif: "image/tiff", tiff: "image/tiff", bmp: "image/bmp",
  mp4: "video/mp4", webm: "video/webm", mov: "video/quicktime", mkv: "video/x-matroska",
  mp3: "audio/mpeg", wav: "audio/wav", ogg: "audio/ogg", m4a: "audio/mp4", flac: "audio/flac",
  pdf: "application/pdf", txt: "text/plain", md: "text/markdown", markdown: "text/markdown", csv: "text/csv", html: "text/html",
  json: "application/json", xml: "application/xml", zip: "application/zip",
};

/** The MIME type a filename suggests (the declared type when no Content-Type is given). */
export function mimeOfFilename(filename: string | undefined): string | undefined {
  const ext = /\.([A-Za-z0-9]+)$/.exec(filename ?? "")?.[1]?.toLowerCase();
  return ext ? MIME_OF_EXTENSION[ext] : undefined;
}

/**
 * The type of bytes whose signature says nothing: the declared text type, plain text when the
 * first bytes decode as UTF-8 without control characters, else the declared type or
 * application/octet-stream (the rule media.create's sniffing applies).
 */
export function mimeOfUnsignedBytes(head: Buffer, declared: string | undefined): string {
  const d = (declared ?? "").split(";")[0]!.trim().toLowerCase();
  if (d.startsWith("text/") || d === "application/json") return d;
  // A multi-byte character cut at the end of the sample is not a decoding error.
  const text = head.subarray(0, utf8Boundary(head)).toString("utf8");
  if (head.length && !text.includes("\uFFFD") && !/[\u0000-\u0008\u000E-\u001F]/.test(text)) return "text/plain";
  return d || "application/octet-stream";
}

function utf8Boundary(b: Buffer): number {
  let i = b.length;
  // Step back over at most 3 continuation bytes to the start of the last character.
  for (let k = 0; k < 3 && i > 0 && (b[i - 1]! & 0xc0) === 0x80; k++) i--;
  if (i > 0 && b[i - 1]! >= 0xc0) {
    const lead = b[i - 1]!;
    const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
    if (b.length - (i - 1) < need) return i - 1;
  }
  return b.length;
}

/** The filename part of a store key (`<ms>[-<random>]_<name>` without the prefix). */
export function filenameOfKey(key: string): string {
  const last = key.split("/").pop() ?? "file";
  return last.replace(/^\d+(-[0-9a-f]+)?_/, "") || "file";
}
