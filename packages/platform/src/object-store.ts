/**
 * The object store: the S3 API when S3_ENDPOINT is set, a folder under DATA_DIR otherwise.
 * Keys are the path part of a store key (`store://<user_id>/<collection_id>/<ts>_<name>` is
 * stored as `<user_id>/<collection_id>/<ts>_<name>`). Writes are all-or-nothing: a failed or
 * short write leaves no object behind.
 */
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdir, readFile, readdir, rename, rm, stat, unlink, writeFile, open, type FileHandle } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import { randomUUID, createHash } from "node:crypto";
import { PassThrough, Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { S3Config } from "./config.js";
import { traceOutbound } from "./telemetry.js";
import { idleBounded } from "./idle-bound.js";
import { statusClass } from "./metrics.js";

export interface ObjectInfo {
  contentType: string;
  size: number;
  etag: string;
}

export interface PutOptions {
  contentType: string;
  /** When given, a body of any other length is refused and nothing is stored. */
  contentLength?: number;
  /** Upper bound enforced while streaming. */
  maxBytes?: number;
  /** When given (lower-case hex), a body with another SHA-256 is refused and nothing is stored. */
  sha256?: string;
  /**
   * The object becomes visible only once this settles: when it rejects, nothing is stored and
   * put rejects with its reason. The bytes are written (and synced) meanwhile where the store can
   * keep them out of sight (a temporary file or key), so a caller can record what it is about to
   * store at the same time as it is written.
   */
  visibleAfter?: Promise<unknown>;
}

export interface ObjectStore {
  readonly kind: "fs" | "s3";
  put(key: string, body: Buffer | Readable, opts: PutOptions): Promise<ObjectInfo & { sha256: string }>;
  /** Reads an object, optionally a byte range [start, end] inclusive. */
  get(key: string, range?: { start: number; end: number }): Promise<{ body: Readable; info: ObjectInfo } | undefined>;
  head(key: string): Promise<ObjectInfo | undefined>;
  delete(keys: string[]): Promise<void>;
  /**
   * A presigned PUT URL for the S3 store; undefined on the filesystem store. Without a
   * contentLength the signature does not bind the length (S3 then accepts any).
   */
  presignPut(key: string, opts: { contentType: string; contentLength?: number; expiresInSeconds: number }): Promise<string | undefined>;
  close(): void;
}

/**
 * An object, or a byte range of it, read whole into memory; undefined when it does not exist.
 * With maxBytes, a larger object is refused (ObjectTooLargeError) before its body is read.
 */
export async function readObject(store: ObjectStore, key: string, opts: { range?: { start: number; end: number }; maxBytes?: number } = {}): Promise<Buffer | undefined> {
  const obj = await store.get(key, opts.range);
  if (!obj) return undefined;
  if (opts.maxBytes !== undefined && obj.info.size > opts.maxBytes) {
    // Dropped unread: whatever the body still does (an S3 response's socket let go half-way)
    // must not fail where nobody hears it, an uncaught error.
    obj.body.on("error", () => {});
    obj.body.destroy();
    throw new ObjectTooLargeError(`object exceeds ${opts.maxBytes} bytes`);
  }
  const parts: Buffer[] = [];
  for await (const part of obj.body) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

export class ObjectTooLargeError extends Error {
  override name = "ObjectTooLargeError";
}
export class ObjectLengthMismatchError extends Error {
  override name = "ObjectLengthMismatchError";
}
export class ObjectChecksumMismatchError extends Error {
  override name = "ObjectChecksumMismatchError";
  constructor(readonly actual: string) { super(`body has sha256 ${actual}`); }
}

export const STORE_PREFIX = "store://";

/**
 * A filename safe inside a store key: the last path segment, percent-decoded, accents folded,
 * anything but letters, digits, dot, dash and underscore turned into "_", no leading dots.
 */
export function safeFilename(name: string | undefined, fallback: string): string {
  const base = (name ?? "").split("/").pop() ?? "";
  let decoded = base;
  try { decoded = decodeURIComponent(base); } catch { /* keep it encoded */ }
  const clean = decoded.normalize("NFKD").replace(/\p{M}/gu, "").replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^[._]+/, "").slice(0, 120);
  return clean || fallback;
}

let lastStamp = 0;

/**
 * A new store key of the contract's form `store://<user_id>/<collection_id>/<timestamp>_<filename>`.
 * The timestamp is in microseconds and strictly increases within the process, so two objects of
 * one name stored in the same millisecond never share a key.
 */
export function freshStoreKey(userId: string, collectionId: number, filename: string | undefined, fallback: string): string {
  lastStamp = Math.max(Date.now() * 1000, lastStamp + 1);
  return `${STORE_PREFIX}${userId}/${collectionId}/${lastStamp}_${safeFilename(filename, fallback)}`;
}

// The processed images of a collection cover. The names are shared so the media service can
// tell a key that cannot be a cover without asking the collections service.
const COVER_NAMES = { main: "cover.webp", thumbnail: "cover_thumb.webp" } as const;

/** Fresh keys for a collection cover's main image and thumbnail. */
export function freshCoverKeys(userId: string, collectionId: number): { main: string; thumbnail: string } {
  return {
    main: freshStoreKey(userId, collectionId, COVER_NAMES.main, COVER_NAMES.main),
    thumbnail: freshStoreKey(userId, collectionId, COVER_NAMES.thumbnail, COVER_NAMES.thumbnail),
  };
}

/** Whether a key has a cover's name (every cover key has; a file named so may too). */
export function mayBeCoverKey(key: string): boolean {
  return key.endsWith(`_${COVER_NAMES.main}`) || key.endsWith(`_${COVER_NAMES.thumbnail}`);
}

export function isStoreKey(value: string): boolean {
  return value.startsWith(STORE_PREFIX);
}

/** `store://a/b/c` -> `a/b/c`, refusing anything that could escape the key space. */
export function objectKeyOf(storeKey: string): string {
  const key = storeKey.startsWith(STORE_PREFIX) ? storeKey.slice(STORE_PREFIX.length) : storeKey;
  // Segments starting with "." are refused: the filesystem store keeps metadata and temporary
  // files under dot-folders that keys must not reach.
  if (!key || key.startsWith("/") || key.split("/").some((p) => p === "" || p.startsWith(".")) || key.includes("\\") || key.includes("\0")) {
    throw new Error(`invalid object key "${storeKey}"`);
  }
  return key;
}

/** Counts, hashes and bounds a stream on its way to the store. */
function meter(opts: PutOptions): Transform & { bytes: number; sha256: () => string } {
  const hash = createHash("sha256");
  let bytes = 0;
  const t = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bytes += chunk.length;
      const limit = opts.contentLength ?? opts.maxBytes;
      if (limit !== undefined && bytes > limit) {
        cb(opts.contentLength !== undefined ? new ObjectLengthMismatchError(`body is longer than the declared ${opts.contentLength} bytes`) : new ObjectTooLargeError(`body exceeds ${opts.maxBytes} bytes`));
        return;
      }
      hash.update(chunk);
      cb(null, chunk);
    },
    flush(cb) {
      if (opts.contentLength !== undefined && bytes !== opts.contentLength) {
        cb(new ObjectLengthMismatchError(`body has ${bytes} bytes, declared ${opts.contentLength}`));
        return;
      }
      if (opts.sha256 !== undefined && t.sha256() !== opts.sha256) {
        cb(new ObjectChecksumMismatchError(t.sha256()));
        return;
      }
      cb();
    },
  }) as Transform & { bytes: number; sha256: () => string };
  Object.defineProperty(t, "bytes", { get: () => bytes });
  let digest: string | undefined;
  t.sha256 = () => (digest ??= hash.digest("hex"));
  return t;
}

/** The checks of PutOptions on a whole buffer, before anything is written; its sha256. */
function checkedBuffer(body: Buffer, opts: PutOptions): string {
  if (opts.contentLength !== undefined && body.length !== opts.contentLength) throw new ObjectLengthMismatchError(`body has ${body.length} bytes, declared ${opts.contentLength}`);
  if (opts.maxBytes !== undefined && body.length > opts.maxBytes) throw new ObjectTooLargeError(`body exceeds ${opts.maxBytes} bytes`);
  const sha256 = createHash("sha256").update(body).digest("hex");
  if (opts.sha256 !== undefined && sha256 !== opts.sha256) throw new ObjectChecksumMismatchError(sha256);
  return sha256;
}

// Reads and writes move 1 MiB at a time: with node's defaults (64 KiB reads, 16 KiB of write
// buffer) a file served or stored over HTTP spends more time in per-chunk round trips through
// the thread pool than in the disk (bench/transfers.ts: about 2.5x the download rate).
const FS_IO_BYTES = 1024 * 1024;

/** A temporary file untouched this long belongs to a write that died with its process. */
export const STALE_TEMPORARY_MS = 60 * 60 * 1000;

/**
 * Removes the fs store's temporary files that nothing has written to for `olderThanMs`: what a
 * process left when it died mid-write (a live write touches its file with every block). The
 * names of the removed files.
 */
export async function removeStaleTemporaries(root: string, olderThanMs = STALE_TEMPORARY_MS): Promise<string[]> {
  const dir = join(resolve(root), ".tmp");
  const names = await readdir(dir).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const name of names) {
    const p = join(dir, name);
    const st = await stat(p).catch(() => undefined);
    if (!st?.isFile() || Date.now() - st.mtimeMs < olderThanMs) continue;
    await rm(p, { force: true });
    removed.push(name);
  }
  return removed;
}

/**
 * The fs store keeps an object's metadata (content type, etag) in one of two layouts, chosen
 * when the store opens:
 *
 * - trailer (every store created without a `.meta` folder): the object's file is its bytes,
 *   then the metadata as JSON, the JSON's length (u32, big-endian) and TRAILER_MAGIC. One file
 *   per object: a put is one file written and renamed, a read of a small object one read, a
 *   delete one unlink. With a metadata file beside each object these were about twice as many
 *   file operations and new inodes, a third of what a thumbnail cost beyond sharp.
 * - sidecar (stores written before the trailer, recognised by their `.meta` folder): the file
 *   is the bytes alone and `.meta/<key>.json` holds the metadata. Such a store keeps that layout
 *   for every object, old and new, so nothing in it has to be rewritten.
 *
 * The layout is written down in `.layout` the first time a store opens, and read from there
 * afterwards: a `.meta` folder that an older version made later in a trailer store (run against
 * the same DATA_DIR after a downgrade) does not turn it into a sidecar store whose every object
 * would then be read with its trailer as data; such an object is refused instead.
 */
export type FsStoreLayout = "trailer" | "sidecar";

/** The layout of the store at `base` (its metadata folder `metaBase`), recorded in `.layout` on first sight. */
function fsStoreLayout(base: string, metaBase: string): FsStoreLayout {
  const file = join(base, ".layout");
  const recorded = () => {
    try {
      const v = readFileSync(file, "utf8").trim();
      return v === "trailer" || v === "sidecar" ? v : undefined;
    } catch {
      return undefined;
    }
  };
  const known = recorded();
  if (known) return known;
  const layout: FsStoreLayout = existsSync(metaBase) ? "sidecar" : "trailer";
  try {
    mkdirSync(base, { recursive: true });
    writeFileSync(file, `${layout}\n`, { flag: "wx" });
  } catch (err) {
    // Another process opening the same new store wrote it first: its word stands. A root this
    // process cannot write (a service that never stores an object) is opened all the same; the
    // first process that can write there records the layout.
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return recorded() ?? layout;
  }
  return layout;
}

const TRAILER_MAGIC = Buffer.from("\0cms-obj", "latin1");
/** Length and magic at the very end of a trailer-layout file. */
const TRAILER_END_BYTES = 4 + TRAILER_MAGIC.length;
/** What a read of a small object takes in one call: the whole file when it is at most this. */
const SMALL_OBJECT_BYTES = 64 * 1024;
/** The end of a larger file read to find its trailer (a content type is rarely longer). */
const TRAILER_READ_BYTES = 4 * 1024;

interface StoredMeta { contentType: string; etag: string }

export function encodeTrailer(meta: StoredMeta): Buffer {
  const json = Buffer.from(JSON.stringify({ contentType: meta.contentType, etag: meta.etag }));
  const out = Buffer.allocUnsafe(json.length + TRAILER_END_BYTES);
  json.copy(out, 0);
  out.writeUInt32BE(json.length, json.length);
  TRAILER_MAGIC.copy(out, json.length + 4);
  return out;
}

/**
 * The metadata and content size of a trailer-layout file of `fileSize` bytes, from `tail`, the
 * file's last bytes; `{ need }` when the trailer is longer than the tail (read that many).
 * A file without a valid trailer is an error: it was not written by this layout.
 */
export function decodeTrailer(fileSize: number, tail: Buffer, what: string): { meta: StoredMeta; size: number } | { need: number } {
  const bad = (why: string) => new Error(`stored object ${what} has no valid metadata trailer (${why})`);
  if (tail.length < TRAILER_END_BYTES || !tail.subarray(tail.length - TRAILER_MAGIC.length).equals(TRAILER_MAGIC)) throw bad("no magic");
  const jsonBytes = tail.readUInt32BE(tail.length - TRAILER_END_BYTES);
  const trailerBytes = jsonBytes + TRAILER_END_BYTES;
  if (trailerBytes > fileSize) throw bad("length beyond the file");
  if (trailerBytes > tail.length) return { need: trailerBytes };
  let meta: StoredMeta;
  try {
    meta = JSON.parse(tail.toString("utf8", tail.length - trailerBytes, tail.length - TRAILER_END_BYTES)) as StoredMeta;
  } catch {
    throw bad("unreadable JSON");
  }
  if (typeof meta?.contentType !== "string" || typeof meta.etag !== "string") throw bad("fields missing");
  return { meta, size: fileSize - trailerBytes };
}

/** [start, end] of a read, inside an object of `size` bytes; undefined when nothing is in it. */
function clampRange(size: number, range: { start: number; end: number } | undefined): { start: number; end: number } | undefined {
  const start = range?.start ?? 0;
  const end = Math.min(range?.end ?? size - 1, size - 1);
  return start <= end ? { start, end } : undefined;
}

/** What writeAll needs of a file handle (node:fs/promises' FileHandle has it). */
export interface PositionalWriter {
  writev(buffers: Buffer[], position: number): Promise<{ bytesWritten: number }>;
}

/**
 * Writes `parts` from the file's start, whole. A write may take fewer bytes than it was given
 * (a disk filling up writes what fits): the rest is written again from where it stopped, so the
 * file system's own error says why it cannot go on (ENOSPC, EDQUOT), which callers answer as a
 * full disk, instead of a short count. Exported for its tests.
 */
export async function writeAll(fh: PositionalWriter, parts: Buffer[]): Promise<void> {
  const total = parts.reduce((n, b) => n + b.length, 0);
  let written = 0;
  while (written < total) {
    let skip = written;
    const rest: Buffer[] = [];
    for (const b of parts) {
      if (skip >= b.length) { skip -= b.length; continue; }
      rest.push(skip ? b.subarray(skip) : b);
      skip = 0;
    }
    const { bytesWritten } = await fh.writev(rest, written);
    // No progress and no error: nothing says a retry would differ.
    if (bytesWritten <= 0) throw new Error(`the object store's file took no bytes at ${written} of ${total}`);
    written += bytesWritten;
  }
}

// EISDIR: a key can name a folder of the store (a user's or a collection's), which is no object.
const isMissing = (err: unknown) => ["ENOENT", "ENOTDIR", "EISDIR"].includes((err as NodeJS.ErrnoException).code ?? "");

export function createFsObjectStore(root: string): ObjectStore & { readonly layout: FsStoreLayout } {
  const base = resolve(root);
  const metaBase = join(base, ".meta");
  const tmpBase = join(base, ".tmp");
  const layout = fsStoreLayout(base, metaBase);
  // Every process that opens the store clears what dead writers left; a crash means a restart.
  removeStaleTemporaries(base).catch(() => {});
  const pathOf = (key: string) => {
    const p = resolve(base, objectKeyOf(key));
    if (!p.startsWith(base + sep)) throw new Error(`invalid object key "${key}"`);
    return p;
  };
  const metaOf = (key: string) => join(metaBase, `${objectKeyOf(key)}.json`);
  // Folders already made by this process: most puts land in a folder that exists (one per
  // user and collection), so mkdir is skipped. Nothing removes folders, so the set stays true.
  const madeDirs = new Set<string>();
  const ensureDir = async (dir: string) => {
    if (madeDirs.has(dir)) return;
    await mkdir(dir, { recursive: true });
    if (madeDirs.size > 100_000) madeDirs.clear();
    madeDirs.add(dir);
  };

  /** A sidecar-layout object's metadata; its size from `fh` when the file is open. */
  async function sidecarInfo(key: string, fh?: FileHandle): Promise<ObjectInfo | undefined> {
    try {
      const [st, meta] = await Promise.all([fh ? fh.stat() : stat(pathOf(key)), readFile(metaOf(key), "utf8")]);
      const m = JSON.parse(meta) as StoredMeta;
      return { size: st.size, contentType: m.contentType, etag: m.etag };
    } catch {
      return undefined;
    }
  }

  /** The trailer of an open file, read from its end. */
  async function readTrailer(fh: FileHandle, key: string): Promise<ObjectInfo> {
    const { size: fileSize } = await fh.stat();
    let want = Math.min(fileSize, TRAILER_READ_BYTES);
    for (;;) {
      const tail = Buffer.allocUnsafe(want);
      const { bytesRead } = await fh.read(tail, 0, want, fileSize - want);
      const found = decodeTrailer(fileSize, tail.subarray(0, bytesRead), key);
      if ("meta" in found) return { size: found.size, contentType: found.meta.contentType, etag: found.meta.etag };
      want = found.need;
    }
  }

  /** The object's file, open for reading; undefined when there is none. */
  async function openObjectFile(key: string): Promise<FileHandle | undefined> {
    try {
      return await open(pathOf(key), "r");
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  /**
   * An object of the trailer layout, opened: its metadata, and its bytes when the file is small
   * enough to have come whole with the first read (then the file is closed already).
   */
  async function openTrailerObject(key: string, wantBytes: boolean): Promise<{ info: ObjectInfo; bytes?: Buffer; fh?: FileHandle } | undefined> {
    const fh = await openObjectFile(key);
    if (!fh) return undefined;
    try {
      if (wantBytes) {
        const first = Buffer.allocUnsafe(SMALL_OBJECT_BYTES);
        const { bytesRead } = await fh.read(first, 0, first.length, 0);
        if (bytesRead < first.length) {
          const found = decodeTrailer(bytesRead, first.subarray(0, bytesRead), key);
          if (!("meta" in found)) throw new Error(`stored object ${key} has a trailer longer than its file`);
          await fh.close();
          // Copied out: the 64 KiB buffer is not kept alive by a small object.
          return { info: { size: found.size, contentType: found.meta.contentType, etag: found.meta.etag }, bytes: Buffer.from(first.subarray(0, found.size)) };
        }
      }
      return { info: await readTrailer(fh, key), fh };
    } catch (err) {
      await fh.close().catch(() => {});
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async function info(key: string): Promise<ObjectInfo | undefined> {
    if (layout === "sidecar") return sidecarInfo(key);
    const opened = await openTrailerObject(key, false);
    await opened?.fh?.close();
    return opened?.info;
  }

  async function putFile(key: string, body: Buffer | Readable, opts: PutOptions): Promise<ObjectInfo & { sha256: string }> {
    const p = pathOf(key);
    const metaFile = layout === "sidecar" ? metaOf(key) : undefined;
    await Promise.all([ensureDir(dirname(p)), metaFile && ensureDir(dirname(metaFile)), ensureDir(tmpBase)]);
    const tmp = join(tmpBase, `${randomUUID()}.tmp`);
    try {
      let size: number;
      let sha256: string;
      // The trailer goes after the bytes, in the same file, before it is synced.
      const trailerOf = (hash: string) => (metaFile ? undefined : encodeTrailer({ contentType: opts.contentType, etag: hash.slice(0, 32) }));
      if (Buffer.isBuffer(body)) {
        // A buffer is checked whole and written with one call: a thumbnail's put costs a
        // third of the CPU of the stream path.
        sha256 = checkedBuffer(body, opts);
        const trailer = trailerOf(sha256);
        const fh = await open(tmp, "w");
        try {
          await writeAll(fh, trailer ? [body, trailer] : [body]);
          await fh.sync();
        } finally {
          await fh.close();
        }
        size = body.length;
      } else {
        const m = meter(opts);
        const file = createWriteStream(tmp, { highWaterMark: FS_IO_BYTES });
        // The meter has checked and hashed the whole body when this flushes.
        const stages = metaFile ? [m] : [m, new Transform({ transform: (chunk, _enc, cb) => cb(null, chunk), flush(cb) { cb(null, trailerOf(m.sha256())); } })];
        try {
          await pipeline([body, ...stages, file]);
        } catch (err) {
          // pipeline rejects as soon as a stream fails, while the file may still be opening
          // (seen with the body failing first, or the meter refusing it): removed before the
          // open creates it, the temporary would be left behind. A destroyed file stream
          // closes once its open is done.
          if (!file.closed) await new Promise<void>((resolve) => file.once("close", () => resolve()));
          throw err;
        }
        const fh = await open(tmp, "r");
        await fh.sync();
        await fh.close();
        size = m.bytes;
        sha256 = m.sha256();
      }
      await opts.visibleAfter;
      const etag = sha256.slice(0, 32);
      if (metaFile) await writeFile(metaFile, JSON.stringify({ contentType: opts.contentType, etag }));
      await rename(tmp, p);
      return { contentType: opts.contentType, size, etag, sha256 };
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  return {
    kind: "fs",
    layout,
    put(key, body, opts) {
      if (Buffer.isBuffer(body)) return putFile(key, body, opts);
      // A stream can fail before putFile's pipeline reads it (while its folders are made): heard
      // from the call on, that failure is put's rejection (the pipeline finds the stream failed)
      // instead of an uncaught exception, which would end the process.
      const heard = () => {};
      body.on("error", heard);
      return putFile(key, body, opts).finally(() => body.off("error", heard));
    },
    async get(key, range) {
      if (layout === "sidecar") {
        // Opened before get answers, as a trailer-layout object is: an object removed meanwhile
        // is still read whole, and a body dropped unread (a HEAD) has no open pending whose
        // late ENOENT nobody would hear, an uncaught exception.
        const fh = await openObjectFile(key);
        if (!fh) return undefined;
        const i = await sidecarInfo(key, fh);
        if (!i) {
          await fh.close();
          return undefined;
        }
        // The end is always given (the size is known): without it every read of the stream
        // allocates a whole 1 MiB buffer, then copies a short one out of it, and the read of the
        // end of the file allocates another 1 MiB for nothing. A 200 KB image cost 2.2 MiB of
        // buffers, enough to drive V8's collections (external memory pressure) in a thumbnail run.
        const whole = i.size > 0 ? { start: 0, end: i.size - 1 } : {};
        return { body: fh.createReadStream({ ...(range ?? whole), highWaterMark: FS_IO_BYTES }), info: i };
      }
      const opened = await openTrailerObject(key, true);
      if (!opened) return undefined;
      const span = clampRange(opened.info.size, range);
      if (opened.bytes) {
        return { body: Readable.from(span ? [opened.bytes.subarray(span.start, span.end + 1)] : [], { objectMode: false }), info: opened.info };
      }
      // Always with an end inside the object's bytes: past it is the trailer.
      if (!span) {
        await opened.fh!.close();
        return { body: Readable.from([], { objectMode: false }), info: opened.info };
      }
      return { body: opened.fh!.createReadStream({ ...span, highWaterMark: FS_IO_BYTES }), info: opened.info };
    },
    async head(key) {
      return info(key);
    },
    async delete(keys) {
      // unlink, not rm: no lstat first, and a key that is already gone is no error. Eight at a
      // time, so a hard-deleted collection's thousand files do not wait on each other.
      const gone = (file: string) => unlink(file).catch((err: NodeJS.ErrnoException) => { if (err.code !== "ENOENT") throw err; });
      const paths = keys.map((k) => (layout === "sidecar" ? [pathOf(k), metaOf(k)] : [pathOf(k)]));
      for (let i = 0; i < paths.length; i += 8) {
        await Promise.all(paths.slice(i, i + 8).flat().map(gone));
      }
    },
    async presignPut() {
      return undefined;
    },
    close() {},
  };
}

/**
 * How long the S3 client waits for a connection, and for the answer to a request whose body no
 * client of ours paces (every call but a streamed PUT, answered only after the last byte an
 * uploader sends). Without them a black-holed endpoint, or a kept-alive socket a middlebox forgot,
 * holds a call until TCP gives up (minutes): past the gateway's 60 s call timeout, and for ever on
 * a download, which the gateway streams without one. The SDK makes three attempts, so a call
 * fails within 3 x 15 s, answered 503 (isTransientFailure). Once a download's answer began, its
 * body fails when nothing of it arrives for `bodyIdleMs` while its reader waits for more
 * (watchedBody): a reader that is slow is never the reason.
 */
export interface S3Timeouts { connectMs: number; answerMs: number; bodyIdleMs: number }
const S3_TIMEOUTS: S3Timeouts = { connectMs: 5_000, answerMs: 15_000, bodyIdleMs: 30_000 };

/**
 * A download's body that fails (ETIMEDOUT: transient) once `idleMs` pass with nothing arriving
 * while its reader waits for more: the store stopped sending mid-object, or a middlebox dropped
 * the connection without a word, and the reader (a client the gateway streams to, a hash, a
 * thumbnail) would wait for ever; a reader that is behind is never the reason (idleBounded).
 */
function watchedBody(body: Readable, idleMs: number): Readable {
  return idleBounded(body, idleMs, {
    stalled: () => Object.assign(new Error(`The object store sent nothing more of the object for ${idleMs} ms while it was being read.`), { code: "ETIMEDOUT" }),
  });
}

export async function createS3ObjectStore(cfg: S3Config, timeouts: S3Timeouts = S3_TIMEOUTS): Promise<ObjectStore> {
  const s3 = await import("@aws-sdk/client-s3");
  const { getSignedUrl } = await import("@aws-sdk/s3-request-presigner");
  const { Upload } = await import("@aws-sdk/lib-storage");
  const common = {
    region: cfg.region,
    forcePathStyle: cfg.forcePathStyle,
    credentials: { accessKeyId: cfg.accessKeyId, secretAccessKey: cfg.secretAccessKey },
    // Plain bodies: without these the SDK frames streamed bodies as aws-chunked, which
    // S3-compatible servers store verbatim (TOOLCHAIN.md).
    requestChecksumCalculation: "WHEN_REQUIRED" as const,
    responseChecksumValidation: "WHEN_REQUIRED" as const,
  };
  const client = new s3.S3Client({
    ...common,
    endpoint: cfg.endpoint,
    requestHandler: {
      connectionTimeout: timeouts.connectMs,
      requestTimeout: timeouts.answerMs,
      // An answer's timeout is then an error, not a warning.
      throwOnRequestTimeout: true,
      // The SDK's agent allows 50 sockets to the endpoint: a download holds one for as long as its
      // client takes to read it (and an upload while its client sends), so 50 slow readers held up
      // every other call of the process (a HEAD, a thumbnail's read, a chunk's write) behind them.
      // The client connections the gateway serves already bound how many run at once.
      httpAgent: { maxSockets: Infinity },
      httpsAgent: { maxSockets: Infinity },
    },
  });
  // Every request to the object store is a CLIENT span and a counted outbound call ("s3" peer,
  // the command as operation), retries included.
  client.middlewareStack.add((next, ctx) => (args) => traceOutbound("s3", String(ctx.commandName ?? "command").replace(/Command$/, ""), {
    attributes: { "aws.s3.bucket": cfg.bucket, "server.address": cfg.endpoint },
    outcomeOf: (out) => ({ status: (out.response as { statusCode?: number }).statusCode ?? 200 }),
    failureOf: (err) => {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      return status ? statusClass(status) : "network";
    },
  }, () => next(args)), { step: "initialize", name: "cmsTelemetry" });
  const presigner = new s3.S3Client({ ...common, endpoint: cfg.publicEndpoint });
  try {
    await client.send(new s3.HeadBucketCommand({ Bucket: cfg.bucket }));
  } catch {
    await client.send(new s3.CreateBucketCommand({ Bucket: cfg.bucket })).catch(async (err) => {
      if (!/BucketAlready/.test(String((err as Error).name))) throw err;
    });
  }
  const Bucket = cfg.bucket;
  const toInfo = (o: { ContentType?: string; ContentLength?: number; ETag?: string }): ObjectInfo => ({
    contentType: o.ContentType ?? "application/octet-stream",
    size: o.ContentLength ?? 0,
    etag: (o.ETag ?? "").replaceAll('"', ""),
  });
  return {
    kind: "s3",
    async put(key, body, opts) {
      const Key = objectKeyOf(key);
      if (Buffer.isBuffer(body)) {
        // A buffer is checked whole before anything is sent.
        const sha256 = checkedBuffer(body, opts);
        // A PUT is visible when it answers: nothing is sent before the gate.
        await opts.visibleAfter;
        const res = await client.send(new s3.PutObjectCommand({ Bucket, Key, Body: body, ContentType: opts.contentType, ContentLength: body.length }));
        return { contentType: opts.contentType, size: body.length, etag: (res.ETag ?? "").replaceAll('"', ""), sha256 };
      }
      // A stream can fail half-way, and some S3-compatible servers keep what they received of an
      // aborted PUT: stream into a temporary key and copy it into place only once it verified.
      // The key has no "folder": servers that keep keys as files (s3rver) remove a folder when
      // its last key goes, and a PUT into that folder at the same moment failed.
      const TmpKey = `.tmp-${randomUUID()}`;
      const m = meter(opts);
      const pass = new PassThrough({ highWaterMark: 1024 * 1024 });
      const abort = new AbortController();
      // The body's and the meter's errors end the pipeline and abort the S3 request.
      const piped = pipeline(body, m, pass).catch((err) => { abort.abort(err); throw err; });
      const send = opts.contentLength !== undefined
        // Answered after the uploader's last byte, however slowly it sends: no answer's timeout.
        ? client.send(new s3.PutObjectCommand({ Bucket, Key: TmpKey, Body: pass, ContentType: opts.contentType, ContentLength: opts.contentLength }), { abortSignal: abort.signal, requestTimeout: 0 })
        : new Upload({ client, params: { Bucket, Key: TmpKey, Body: pass, ContentType: opts.contentType }, abortController: abort }).done();
      const [pipeResult, sendResult] = await Promise.allSettled([piped, send]);
      if (pipeResult.status === "rejected" || sendResult.status === "rejected") {
        await client.send(new s3.DeleteObjectCommand({ Bucket, Key: TmpKey })).catch(() => {});
        throw pipeResult.status === "rejected" ? pipeResult.reason : (sendResult as PromiseRejectedResult).reason;
      }
      try {
        await opts.visibleAfter;
        const copied = await client.send(new s3.CopyObjectCommand({
          Bucket, Key, CopySource: `${Bucket}/${TmpKey}`, ContentType: opts.contentType, MetadataDirective: "REPLACE",
        }));
        const etag = (copied.CopyObjectResult?.ETag ?? "").replaceAll('"', "");
        return { contentType: opts.contentType, size: m.bytes, etag, sha256: m.sha256() };
      } finally {
        await client.send(new s3.DeleteObjectCommand({ Bucket, Key: TmpKey })).catch(() => {});
      }
    },
    async get(key, range) {
      try {
        const res = await client.send(new s3.GetObjectCommand({
          Bucket, Key: objectKeyOf(key), Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }));
        const info = toInfo(res);
        if (range) {
          const total = /\/(\d+)$/.exec(res.ContentRange ?? "")?.[1];
          if (total) info.size = Number(total);
        }
        return { body: watchedBody(res.Body as Readable, timeouts.bodyIdleMs), info };
      } catch (err) {
        if ((err as Error).name === "NoSuchKey" || (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return undefined;
        throw err;
      }
    },
    async head(key) {
      try {
        return toInfo(await client.send(new s3.HeadObjectCommand({ Bucket, Key: objectKeyOf(key) })));
      } catch (err) {
        if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404 || (err as Error).name === "NotFound") return undefined;
        throw err;
      }
    },
    async delete(keys) {
      for (let i = 0; i < keys.length; i += 1000) {
        const batch = keys.slice(i, i + 1000).map((k) => ({ Key: objectKeyOf(k) }));
        if (batch.length === 1) await client.send(new s3.DeleteObjectCommand({ Bucket, Key: batch[0]!.Key }));
        else if (batch.length) await client.send(new s3.DeleteObjectsCommand({ Bucket, Delete: { Objects: batch } }));
      }
    },
    async presignPut(key, opts) {
      return getSignedUrl(presigner, new s3.PutObjectCommand({
        Bucket, Key: objectKeyOf(key), ContentType: opts.contentType, ContentLength: opts.contentLength,
      }), { expiresIn: opts.expiresInSeconds });
    },
    close() {
      client.destroy();
      presigner.destroy();
    },
  };
}

export async function createObjectStore(cfg: { s3?: S3Config; dataDir: string }): Promise<ObjectStore> {
  return cfg.s3 ? createS3ObjectStore(cfg.s3) : createFsObjectStore(join(cfg.dataDir, "objects"));
}
