/**
 * The chunked upload (media.upload_begin, upload_chunk, upload_finish, upload_abort). Sessions
 * are rows in PostgreSQL; a chunk of up to 64 KiB is kept in its row, a larger one is an object
 * in the store (upload-chunks/<upload_id>/...), so every call may land on another replica. A
 * large chunk is written outside any lock, so chunks of one session may be sent in parallel; a
 * short transaction then locks the session row (FOR UPDATE), checks it is still open and still
 * fits, and makes the chunk the current one of its index. The finish streams the chunks in index order into
 * the final object, verifying length and sha256 before it becomes visible, then creates the item
 * as media.create does, all in one transaction that also marks the session finished. Chunk
 * objects that are replaced, finished, aborted or expired are removed through the outbox
 * (media.objects.orphaned), after the rows that named them are gone.
 */
import { createHash, randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import type { Knex } from "knex";
import { AppError, EVENTS, ObjectLengthMismatchError, STORE_PREFIX, freshStoreKey, readObject, type Caller } from "@cms/platform";
import type { MediaRow } from "../domain/media-json.js";
import { checkName, normalizeTags } from "../domain/rules.js";
import {
  CHUNK_BYTES, MAX_CHUNK_BYTES, assemble, checkChunkFits, checkQuotas, decodeVerified, mimeOfFilename,
} from "../domain/transfer-rules.js";
import { authorize, type Db, type Deps } from "./deps.js";
import { createItemFromStored, itemName, removeObjects, withTrx } from "./stored-files.js";
import { sniffBytes } from "./ingest.js";

interface SessionRow {
  id: string; user_id: string; collection_id: number; owner_user_id: string; filename: string | null; content_type: string | null;
  content_length: number; sha256: string | null; name: string | null; description: string | null; tags: string[];
  state: "open" | "finished"; media_id: number | null; created_at: Date; expires_at: Date;
}

class ChecksumMismatchError extends Error {
  override name = "ChecksumMismatchError";
  constructor(readonly actual: string) { super(`assembled bytes have sha256 ${actual}`); }
}

export interface BeginInput {
  collectionId: number; filename?: string; contentType?: string; contentLength: number; sha256?: string; name?: string;
  description?: string; tags: string[];
}

/** Stored bytes (each object once) and open uploads of an owner and of a collection. */
async function storageInUse(db: Knex, ownerUserId: string, collectionId: number): Promise<{ user: number; collection: number }> {
  const { rows } = await db.raw(
    `SELECT
       (SELECT coalesce(sum(size_bytes), 0) FROM (SELECT DISTINCT ON (main_url) size_bytes FROM media WHERE owner_user_id = ? AND main_url LIKE 'store://%') u)
     + (SELECT coalesce(sum(content_length), 0) FROM upload_sessions WHERE owner_user_id = ? AND state = 'open' AND expires_at > now()) AS user_bytes,
       (SELECT coalesce(sum(size_bytes), 0) FROM (SELECT DISTINCT ON (main_url) size_bytes FROM media WHERE collection_id = ? AND main_url LIKE 'store://%') c)
     + (SELECT coalesce(sum(content_length), 0) FROM upload_sessions WHERE collection_id = ? AND state = 'open' AND expires_at > now()) AS collection_bytes`,
    [ownerUserId, ownerUserId, collectionId, collectionId],
  );
  return { user: Number(rows[0].user_bytes), collection: Number(rows[0].collection_bytes) };
}

/** An open upload session and how to send its chunks. */
export interface UploadSession {
  uploadId: string; chunkBytes: number; maxChunkBytes: number; chunkCount: number; contentLength: number; expiresAt: Date; nextStep: string;
}

export async function beginUpload(deps: Deps, caller: Caller, input: BeginInput): Promise<UploadSession> {
  checkName(input.name);
  const tags = normalizeTags(input.tags);
  const access = await authorize(deps, caller, input.collectionId, "upload");
  const { config } = deps.ctx;
  const id = randomUUID();
  const expiresAt = new Date(Date.now() + config.uploadSessionTtlMs);
  await deps.db.transaction(async (trx) => {
    // Begins into one owner's storage serialize, so two cannot both take the last free bytes.
    await trx.raw("SELECT pg_advisory_xact_lock(?, hashtext(?))", [0x75706c64, access.ownerUserId]);
    const used = await storageInUse(trx as unknown as Knex, access.ownerUserId, input.collectionId);
    checkQuotas({
      userBytes: used.user, userLimit: config.userStorageQuotaBytes, collectionBytes: used.collection,
      collectionLimit: config.collectionStorageQuotaBytes, requested: input.contentLength,
    });
    await trx("upload_sessions").insert({
      id, user_id: caller.userId, collection_id: input.collectionId, owner_user_id: access.ownerUserId, filename: input.filename ?? null,
      content_type: input.contentType?.toLowerCase() ?? null, content_length: input.contentLength, sha256: input.sha256 ?? null,
      name: input.name ?? null, description: input.description ?? null, tags, expires_at: expiresAt,
    });
  });
  return {
    uploadId: id,
    chunkBytes: CHUNK_BYTES,
    maxChunkBytes: MAX_CHUNK_BYTES,
    chunkCount: Math.ceil(input.contentLength / CHUNK_BYTES),
    contentLength: input.contentLength,
    expiresAt,
    nextStep: `Send the file as chunks with media.upload_chunk (index 0, 1, ...; ${CHUNK_BYTES} bytes recommended, up to ${MAX_CHUNK_BYTES}), then call media.upload_finish.`,
  };
}

/**
 * The caller's session, locked for the rest of the transaction (FOR UPDATE, or FOR SHARE with
 * exclusive: false, which lets chunk reservations run side by side); another user's is not found.
 */
async function sessionFor(trx: Knex.Transaction, caller: Caller, uploadId: string, opts: { exclusive?: boolean } = {}): Promise<SessionRow> {
  const q = trx("upload_sessions").where({ id: uploadId }).first();
  const s: SessionRow | undefined = await (opts.exclusive === false ? q.forShare() : q.forUpdate());
  if (!s || s.user_id !== caller.userId) throw new AppError("not_found", `Upload session ${uploadId} does not exist; start one with media.upload_begin.`, { field: "upload_id" });
  if (s.state === "open" && new Date(s.expires_at).getTime() <= Date.now()) {
    throw new AppError("not_found", `Upload session ${uploadId} expired at ${new Date(s.expires_at).toISOString()}; start again with media.upload_begin.`, { field: "upload_id" });
  }
  return s;
}

export interface ChunkInput { uploadId: string; index: number; contentBase64: string; contentLength: number; sha256?: string }

/** A chunk stored, and the session's progress (distinct indexes and their bytes). */
export interface ChunkReceipt {
  uploadId: string; index: number; contentLength: number; receivedChunks: number; receivedBytes: number; expectedBytes: number;
}

/** Chunks up to this size are kept inline in their row; larger ones are store objects. */
export const INLINE_CHUNK_BYTES = 64 * 1024;

/** A fresh object key for one chunk of a session (a re-sent index gets a new one). */
function chunkKey(uploadId: string, index: number): string {
  return `${STORE_PREFIX}upload-chunks/${uploadId}/${index}_${randomUUID().slice(0, 8)}`;
}

function finishedError(s: SessionRow): AppError {
  return new AppError("invalid_request", `Upload session ${s.id} is already finished (media ${s.media_id}).`, { field: "upload_id", media_id: Number(s.media_id) });
}

/** Chunk objects whose rows go in this transaction, handed to the outbox for removal. */
async function orphanChunkObjects(deps: Deps, trx: Db, keys: Array<string | null>): Promise<void> {
  const list = keys.filter((k): k is string => k !== null);
  if (list.length) await deps.ctx.bus.enqueue(trx, EVENTS.objectsOrphaned, { store_keys: list });
}

/** Deletes the sessions' chunk rows, their objects going through the outbox, in one statement. */
async function discardChunks(deps: Deps, trx: Db, uploadIds: string[]): Promise<void> {
  if (!uploadIds.length) return;
  const gone: Array<{ store_key: string | null }> = await trx("upload_chunks").whereIn("upload_id", uploadIds).delete().returning("store_key");
  await orphanChunkObjects(deps, trx, gone.map((r) => r.store_key));
}

/** Bytes and count of the session's current chunks other than `index`. */
async function storedExcept(trx: Db, uploadId: string, index: number): Promise<{ bytes: number; chunks: number }> {
  const { rows } = await trx.raw("SELECT coalesce(sum(size), 0) AS bytes, count(*) AS chunks FROM upload_chunks WHERE upload_id = ? AND state = 'stored' AND idx <> ?", [uploadId, index]);
  return { bytes: Number(rows[0].bytes), chunks: Number(rows[0].chunks) };
}

/**
 * Under the session's lock: checks the session is open and the chunk fits, then makes `row` the
 * current chunk of its index (an existing reservation, or a new inline row), replacing any earlier.
 */
async function commitChunk(deps: Deps, trx: Knex.Transaction, caller: Caller, input: ChunkInput, size: number, row: { reservedKey: string } | { data: Buffer }): Promise<ChunkReceipt> {
  const s = await sessionFor(trx, caller, input.uploadId);
  if (s.state !== "open") throw finishedError(s);
  const others = await storedExcept(trx, s.id, input.index);
  checkChunkFits({ index: input.index, size, otherBytes: others.bytes, contentLength: Number(s.content_length) });
  const replaced: Array<{ store_key: string | null }> = await trx("upload_chunks").where({ upload_id: s.id, idx: input.index, state: "stored" }).delete().returning("store_key");
  if ("data" in row) {
    await trx("upload_chunks").insert({ upload_id: s.id, idx: input.index, size, state: "stored", data: row.data });
  } else {
    // Gone when a finish, an abort or the expiry job took the session's chunks meanwhile.
    const updated = await trx("upload_chunks").where({ store_key: row.reservedKey }).update({ state: "stored" });
    if (!updated) throw new AppError("invalid_request", `Upload session ${s.id} changed while this chunk was being stored; send it again.`, { field: "upload_id" });
  }
  await orphanChunkObjects(deps, trx, replaced.map((r) => r.store_key));
  return {
    uploadId: s.id, index: input.index, contentLength: size,
    receivedChunks: others.chunks + 1, receivedBytes: others.bytes + size, expectedBytes: Number(s.content_length),
  };
}

export async function uploadChunk(deps: Deps, caller: Caller, input: ChunkInput): Promise<ChunkReceipt> {
  // Checked before anything is touched: a failing chunk is not stored.
  const bytes = decodeVerified({
    base64: input.contentBase64, contentLength: input.contentLength, sha256: input.sha256, maxBytes: MAX_CHUNK_BYTES,
    tooLarge: `A chunk carries at most ${MAX_CHUNK_BYTES} decoded bytes.`,
  });
  if (bytes.length <= INLINE_CHUNK_BYTES) {
    const out = await deps.db.transaction((trx) => commitChunk(deps, trx, caller, input, bytes.length, { data: bytes }));
    deps.ctx.bus.flush();
    return out;
  }
  // Reserve the object's key first (refusing early what cannot fit), so that an object written
  // by a process that dies before the end still has a row that leads to its removal. The write
  // itself holds no lock: chunks of one session can be sent in parallel.
  const key = chunkKey(input.uploadId, input.index);
  await deps.db.transaction(async (trx) => {
    const s = await sessionFor(trx, caller, input.uploadId, { exclusive: false });
    if (s.state !== "open") throw finishedError(s);
    checkChunkFits({ index: input.index, size: bytes.length, otherBytes: (await storedExcept(trx, s.id, input.index)).bytes, contentLength: Number(s.content_length) });
    await trx("upload_chunks").insert({ store_key: key, upload_id: s.id, idx: input.index, size: bytes.length, state: "writing" });
  });
  let committed = false;
  try {
    await deps.ctx.store.put(key, bytes, { contentType: "application/octet-stream", contentLength: bytes.length });
    const out = await deps.db.transaction((trx) => commitChunk(deps, trx, caller, input, bytes.length, { reservedKey: key }));
    committed = true;
    deps.ctx.bus.flush();
    return out;
  } finally {
    if (!committed) {
      await removeObjects(deps, [key]);
      await deps.db("upload_chunks").where({ store_key: key }).delete().catch(() => {});
    }
  }
}

/** A current chunk: inline (its bytes are read from the row) or a store object. */
interface StoredChunk { id: number; index: number; size: number; key: string | null }

class ChunkMissingError extends Error {
  override name = "ChunkMissingError";
  constructor(readonly index: number) { super(`the stored object of chunk ${index} is missing`); }
}

async function readChunkObject(deps: Deps, c: StoredChunk, range?: { start: number; end: number }): Promise<Buffer> {
  const bytes = await readObject(deps.ctx.store, c.key!, { range });
  if (!bytes) throw new ChunkMissingError(c.index);
  return bytes;
}

/** Up to `bytes` leading bytes of the assembled file (for MIME sniffing). */
async function leadingBytes(deps: Deps, trx: Db, chunks: StoredChunk[], bytes: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let n = 0;
  for (const c of chunks) {
    if (n >= bytes) break;
    if (c.size === 0) continue;
    const want = Math.min(c.size, bytes - n);
    const part = c.key === null
      ? (await trx("upload_chunks").where({ id: c.id }).first(trx.raw("substring(data FROM 1 FOR ?) AS head", [want]))).head as Buffer
      : await readChunkObject(deps, c, { start: 0, end: want - 1 });
    parts.push(part);
    n += part.length;
  }
  return Buffer.concat(parts).subarray(0, bytes);
}

/** Reads ahead of the writer: up to this many bytes in flight (at least one segment). */
const READ_AHEAD_BYTES = 8 * 1024 * 1024;

/**
 * The chunks in index order as segments read with one request each: a run of inline chunks
 * (one query, up to READ_AHEAD_BYTES) or one chunk object.
 */
function segments(chunks: StoredChunk[]): StoredChunk[][] {
  const out: StoredChunk[][] = [];
  let run: StoredChunk[] = [];
  let runBytes = 0;
  const close = () => { if (run.length) out.push(run); run = []; runBytes = 0; };
  for (const c of chunks) {
    if (c.key !== null) { close(); out.push([c]); continue; }
    if (run.length && runBytes + c.size > READ_AHEAD_BYTES) close();
    run.push(c);
    runBytes += c.size;
  }
  close();
  return out;
}

async function readSegment(deps: Deps, trx: Db, seg: StoredChunk[]): Promise<Buffer[]> {
  if (seg[0]!.key !== null) return [await readChunkObject(deps, seg[0]!)];
  const rows: Array<{ id: number; data: Buffer }> = await trx("upload_chunks").whereIn("id", seg.map((c) => c.id)).select("id", "data");
  const byId = new Map(rows.map((r) => [Number(r.id), r.data]));
  return seg.map((c) => byId.get(c.id) ?? Buffer.alloc(0));
}

/**
 * The chunks in index order, hashed on the way. Reads run ahead of the consumer (several
 * segments in flight, a few MiB at most), so many small objects on S3 are not one round trip each.
 */
async function* assembled(deps: Deps, trx: Db, chunks: StoredChunk[], expectedSha: string | undefined) {
  const hash = expectedSha === undefined ? undefined : createHash("sha256");
  const segs = segments(chunks);
  const bytesOf = (seg: StoredChunk[]) => seg.reduce((n, c) => n + c.size, 0);
  const pending: Array<Promise<Buffer[]>> = [];
  let next = 0;
  let ahead = 0;
  for (let i = 0; i < segs.length; i++) {
    while (next < segs.length && (pending.length === 0 || ahead + bytesOf(segs[next]!) <= READ_AHEAD_BYTES)) {
      const seg = segs[next++]!;
      ahead += bytesOf(seg);
      const p = readSegment(deps, trx, seg);
      p.catch(() => {}); // observed when its turn comes
      pending.push(p);
    }
    const datas = await pending.shift()!;
    ahead -= bytesOf(segs[i]!);
    for (const [j, data] of datas.entries()) {
      const c = segs[i]![j]!;
      if (data.length !== c.size) throw new ObjectLengthMismatchError(`chunk ${c.index} holds ${data.length} bytes, ${c.size} were stored`);
      hash?.update(data);
      yield data;
    }
  }
  // Failing here, before the end, makes the store discard what it wrote: nothing is stored.
  if (hash) {
    const actual = hash.digest("hex");
    if (actual !== expectedSha) throw new ChecksumMismatchError(actual);
  }
}

export interface FinishInput { uploadId: string; contentLength?: number; sha256?: string }

function finishFailure(detail: string, field: string, extra: Record<string, unknown> = {}): AppError {
  return new AppError("invalid_request", `${detail} The session stays open: nothing was stored.`, { field, missing_indexes: [], ...extra });
}

/** The item a finished session made (the same one again when it finished before). */
export async function finishUpload(deps: Deps, caller: Caller, input: FinishInput): Promise<{ row: MediaRow; uploadId: string }> {
  let storedKey: string | undefined;
  try {
    const out = await deps.db.transaction(async (trx) => {
      const s = await sessionFor(trx, caller, input.uploadId);
      if (s.state === "finished") {
        const row: MediaRow | undefined = await trx("media").where({ id: s.media_id }).first();
        if (!row) throw new AppError("not_found", `Upload ${s.id} finished as media ${s.media_id}, which no longer exists.`, { field: "upload_id", media_id: Number(s.media_id) });
        return { row, uploadId: s.id };
      }
      const declared = Number(s.content_length);
      if (input.contentLength !== undefined && input.contentLength !== declared) {
        throw finishFailure(`content_length ${input.contentLength} differs from the ${declared} bytes declared at media.upload_begin.`, "content_length", { expected_bytes: declared });
      }
      if (input.sha256 !== undefined && s.sha256 !== null && input.sha256 !== s.sha256) {
        throw finishFailure(`sha256 differs from the one given at media.upload_begin.`, "sha256");
      }
      const chunks: StoredChunk[] = (await trx("upload_chunks").where({ upload_id: s.id, state: "stored" }).orderBy("idx").select("id", "idx", "size", "store_key"))
        .map((r: { id: number; idx: number; size: number; store_key: string | null }) => ({ id: Number(r.id), index: Number(r.idx), size: Number(r.size), key: r.store_key }));
      const plan = assemble(chunks, declared);
      if (!plan.ok) {
        throw new AppError("invalid_request", `The chunks received do not make the whole file: ${plan.receivedBytes} of ${declared} bytes, ${plan.missing.length ? `indexes missing: ${plan.missing.slice(0, 20).join(", ")}${plan.missing.length > 20 ? ", ..." : ""}` : "no index missing"}. The session stays open: send the missing chunks and finish again.`, {
          field: "upload_id", missing_indexes: plan.missing, received_bytes: plan.receivedBytes, expected_bytes: declared,
        });
      }
      const access = await authorize(deps, caller, Number(s.collection_id), "upload");
      const mime = await sniffBytes(await leadingBytes(deps, trx, chunks, 4100), s.content_type ?? mimeOfFilename(s.filename ?? undefined));
      const key = freshStoreKey(caller.userId, Number(s.collection_id), s.filename ?? undefined, "upload");
      let stored;
      try {
        stored = await deps.ctx.store.put(key, Readable.from(assembled(deps, trx, chunks, input.sha256 ?? s.sha256 ?? undefined)), { contentType: mime, contentLength: declared });
      } catch (err) {
        if (err instanceof ChecksumMismatchError) throw finishFailure(`The assembled file has sha256 ${err.actual}, not the one expected.`, "sha256", { actual_sha256: err.actual });
        if (err instanceof ObjectLengthMismatchError) throw finishFailure(`The assembled file does not have the declared length: ${err.message}.`, "content_length");
        if (err instanceof ChunkMissingError) {
          // Lost from the store: the index must be sent again.
          await trx("upload_chunks").where({ upload_id: s.id, idx: err.index, state: "stored" }).delete();
          throw finishFailure(`The stored bytes of chunk ${err.index} are gone; send that index again and finish again.`, "upload_id", { missing_indexes: [err.index] });
        }
        throw err;
      }
      storedKey = key;
      const row = await createItemFromStored(withTrx(deps, trx), caller, access.ownerUserId, Number(s.collection_id), key, {
        name: itemName(s.name ?? undefined, s.filename ?? undefined), description: s.description, tags: s.tags ?? [], sha256: stored.sha256,
      });
      await trx("upload_sessions").where({ id: s.id }).update({ state: "finished", media_id: row.id });
      await discardChunks(deps, trx, [s.id]);
      return { row, uploadId: s.id };
    });
    deps.ctx.bus.flush();
    return out;
  } catch (err) {
    if (storedKey) await removeObjects(deps, [storedKey]);
    throw err;
  }
}

export async function abortUpload(deps: Deps, caller: Caller, uploadId: string): Promise<{ uploadId: string; discardedChunks: number }> {
  return deps.db.transaction(async (trx) => {
    const s = await trx("upload_sessions").where({ id: uploadId }).forUpdate().first() as SessionRow | undefined;
    if (!s || s.user_id !== caller.userId) throw new AppError("not_found", `Upload session ${uploadId} does not exist.`, { field: "upload_id" });
    if (s.state === "finished") {
      throw new AppError("invalid_request", `Upload ${uploadId} already finished as media ${s.media_id}; remove the item with media.delete.`, { field: "upload_id", media_id: Number(s.media_id) });
    }
    const [{ n }] = await trx("upload_chunks").where({ upload_id: uploadId, state: "stored" }).count<{ n: number }[]>("* as n");
    await discardChunks(deps, trx, [uploadId]);
    await trx("upload_sessions").where({ id: uploadId }).delete();
    return { uploadId, discardedChunks: Number(n) };
  }).finally(() => deps.ctx.bus.flush());
}

/**
 * How long past its expires_at a finished session is kept: upload_finish with its upload_id must
 * keep answering the same item (a client retrying after a lost answer), so only a long-dead id goes.
 */
const FINISHED_SESSION_RETENTION_MS = 30 * 24 * 3600_000;

/**
 * The upload_cleanup job: open upload sessions past expiry (chunks go with them), finished ones
 * past the retention above, and expired download sessions.
 */
export async function cleanupExpiredSessions(deps: Deps, now = new Date()) {
  const uploads = await deps.db.transaction(async (trx) => {
    const expired: Array<{ id: string }> = await trx("upload_sessions")
      .where((q) => q.where({ state: "open" }).andWhere("expires_at", "<", now))
      .orWhere((q) => q.where({ state: "finished" }).andWhere("expires_at", "<", new Date(now.getTime() - FINISHED_SESSION_RETENTION_MS)))
      .forUpdate().select("id");
    const ids = expired.map((r) => r.id);
    await discardChunks(deps, trx, ids);
    return ids.length ? trx("upload_sessions").whereIn("id", ids).delete() : 0;
  });
  deps.ctx.bus.flush();
  const downloads = await deps.db("download_sessions").where("expires_at", "<", now).delete();
  return { expired_upload_sessions: Number(uploads), expired_download_sessions: Number(downloads) };
}
