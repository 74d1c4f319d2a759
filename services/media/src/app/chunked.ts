/**
 * The chunked upload (media.upload_begin, upload_chunk, upload_finish, upload_abort). Sessions
 * are rows in PostgreSQL; a chunk of up to 64 KiB is kept in its row, a larger one is an object
 * in the store (upload-chunks/<upload_id>/...), so every call may land on another replica. A
 * large chunk is written outside any lock, so chunks of one session may be sent in parallel; a
 * short unit of work then locks the session row (FOR UPDATE), checks it is still open and still
 * fits, and makes the chunk the current one of its index. The finish streams the chunks in
 * index order into the final object, verifying length and sha256 before it becomes visible, and
 * prepares the item as media.create does, all outside any transaction; a short unit of work then
 * checks the session still holds the same chunks, creates the item and marks the session
 * finished (a finish that lost the race removes what it stored and answers the winner's item).
 * Chunk objects that are replaced, finished, aborted or expired are removed through the outbox
 * (media.objects.orphaned), after the rows that named them are gone.
 */
import { randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import {
  AppError, ObjectChecksumMismatchError, ObjectLengthMismatchError, STORE_PREFIX, emitObjectsOrphaned, freshStoreKey, normalizeTags, outsideCall, readObject, type Caller,
} from "@cms/platform";
import type { MediaRow } from "../domain/media-row.js";
import { checkName, itemName } from "../domain/rules.js";
import {
  CHUNK_BYTES, MAX_CHUNK_BYTES, assemble, checkChunkFits, checkQuotas, decodeVerified, mimeOfFilename,
} from "../domain/transfer-rules.js";
import type { StoredChunk, TransferStore, UploadSessionRow } from "../store/transfer-store.js";
import type { MediaAccess } from "./access.js";
import { sniffBytes, type Ingest } from "./ingest.js";
import type { MediaDeps } from "./ports.js";
import { appendRow, type PreparedItem, type StoredFiles } from "./stored-files.js";

class ChunkMissingError extends Error {
  override name = "ChunkMissingError";
  constructor(readonly chunk: StoredChunk) { super(`the stored object of chunk ${chunk.index} is missing`); }
}

/** A media.upload_begin request. */
export interface BeginInput {
  collectionId: number; filename?: string; contentType?: string; contentLength: number; sha256?: string; name?: string;
  description?: string; tags: string[];
}

/** An open upload session and how to send its chunks. */
export interface UploadSession {
  uploadId: string; chunkBytes: number; maxChunkBytes: number; chunkCount: number; contentLength: number; expiresAt: Date; nextStep: string;
}

/** A media.upload_chunk request. */
export interface ChunkInput { uploadId: string; index: number; contentBase64: string; contentLength: number; sha256?: string }

/** A chunk stored, and the session's progress (distinct indexes and their bytes). */
export interface ChunkReceipt {
  uploadId: string; index: number; contentLength: number; receivedChunks: number; receivedBytes: number; expectedBytes: number;
}

/** A media.upload_finish request: length and hash, when given, must match what the session holds. */
export interface FinishInput { uploadId: string; contentLength?: number; sha256?: string }

/** Chunks up to this size are kept inline in their row; larger ones are store objects. */
export const INLINE_CHUNK_BYTES = 64 * 1024;

/**
 * How long past its expires_at a finished session is kept: upload_finish with its upload_id must
 * keep answering the same item (a client retrying after a lost answer), so only a long-dead id goes.
 */
const FINISHED_SESSION_RETENTION_MS = 30 * 24 * 3600_000;

/** A fresh object key for one chunk of a session (a re-sent index gets a new one). */
function chunkKey(uploadId: string, index: number): string {
  return `${STORE_PREFIX}upload-chunks/${uploadId}/${index}_${randomUUID().slice(0, 8)}`;
}

function finishedError(s: UploadSessionRow): AppError {
  return new AppError("invalid_request", `Upload session ${s.id} is already finished (media ${s.media_id}).`, { field: "upload_id", media_id: Number(s.media_id) });
}

function finishFailure(detail: string, field: string, extra: Record<string, unknown> = {}): AppError {
  return new AppError("invalid_request", `${detail} The session stays open: nothing was stored.`, { field, missing_indexes: [], ...extra });
}

/** The caller's session, still usable; another user's is not found. */
function usableSession(s: UploadSessionRow | undefined, caller: Caller, uploadId: string): UploadSessionRow {
  if (!s || s.user_id !== caller.userId) throw new AppError("not_found", `Upload session ${uploadId} does not exist; start one with media.upload_begin.`, { field: "upload_id" });
  if (s.state === "open" && new Date(s.expires_at).getTime() <= Date.now()) {
    throw new AppError("not_found", `Upload session ${uploadId} expired at ${new Date(s.expires_at).toISOString()}; start again with media.upload_begin.`, { field: "upload_id" });
  }
  return s;
}

/** Whether two reads of a session's current chunks name the same rows. */
function sameChunks(a: StoredChunk[], b: StoredChunk[]): boolean {
  return a.length === b.length && a.every((c, i) => c.id === b[i]!.id);
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

/** The chunked upload use cases and the session cleanup job. */
export function createChunkedUploads(
  { stores, unitOfWork, objects, config }: Pick<MediaDeps, "stores" | "unitOfWork" | "objects" | "config">,
  { access, ingest, files }: { access: MediaAccess; ingest: Ingest; files: StoredFiles },
) {
  async function beginUpload(caller: Caller, input: BeginInput): Promise<UploadSession> {
    checkName(input.name);
    const tags = normalizeTags(input.tags, "media item");
    const { ownerUserId } = await access.authorize(caller, input.collectionId, "upload");
    const id = randomUUID();
    const expiresAt = new Date(Date.now() + config.uploadSessionTtlMs);
    await unitOfWork(async ({ transfers }) => {
      // Begins into one owner's storage serialize, so two cannot both take the last free bytes.
      await transfers.lockOwnerStorage(ownerUserId);
      const used = await transfers.storageInUse(ownerUserId, input.collectionId);
      checkQuotas({
        userBytes: used.user, userLimit: config.userStorageQuotaBytes, collectionBytes: used.collection,
        collectionLimit: config.collectionStorageQuotaBytes, requested: input.contentLength,
      });
      await transfers.insertSession({
        id, user_id: caller.userId, collection_id: input.collectionId, owner_user_id: ownerUserId, filename: input.filename ?? null,
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
   * Under the session's lock: checks the session is open and the chunk fits, then makes `row` the
   * current chunk of its index (an existing reservation, or a new inline row), replacing any earlier.
   */
  function commitChunk(caller: Caller, input: ChunkInput, size: number, row: { reservedKey: string } | { data: Buffer }): Promise<ChunkReceipt> {
    return unitOfWork(async ({ transfers }, events) => {
      const s = usableSession(await transfers.session(input.uploadId, "update"), caller, input.uploadId);
      if (s.state !== "open") throw finishedError(s);
      const others = await transfers.storedExcept(s.id, input.index);
      checkChunkFits({ index: input.index, size, otherBytes: others.bytes, contentLength: Number(s.content_length) });
      const replaced = await transfers.removeStoredChunk(s.id, input.index);
      if ("data" in row) {
        await transfers.insertInlineChunk(s.id, input.index, row.data);
      } else if (!(await transfers.markChunkStored(row.reservedKey))) {
        // Gone when a finish, an abort or the expiry job took the session's chunks meanwhile.
        throw new AppError("invalid_request", `Upload session ${s.id} changed while this chunk was being stored; send it again.`, { field: "upload_id" });
      }
      await emitObjectsOrphaned(events, replaced);
      return {
        uploadId: s.id, index: input.index, contentLength: size,
        receivedChunks: others.chunks + 1, receivedBytes: others.bytes + size, expectedBytes: Number(s.content_length),
      };
    });
  }

  async function uploadChunk(caller: Caller, input: ChunkInput): Promise<ChunkReceipt> {
    // Checked before anything is touched: a failing chunk is not stored.
    const bytes = decodeVerified({
      base64: input.contentBase64, contentLength: input.contentLength, sha256: input.sha256, maxBytes: MAX_CHUNK_BYTES,
      tooLarge: `A chunk carries at most ${MAX_CHUNK_BYTES} decoded bytes.`,
    });
    if (bytes.length <= INLINE_CHUNK_BYTES) return commitChunk(caller, input, bytes.length, { data: bytes });
    // The object's key is reserved (refusing early what cannot fit) while the bytes are written,
    // and the object becomes visible only once the reservation committed: an object a process
    // leaves when it dies before the end is always named by a row that leads to its removal. The
    // write holds no lock: chunks of one session can be sent in parallel.
    const key = chunkKey(input.uploadId, input.index);
    const reserving = unitOfWork(async ({ transfers }) => {
      const s = usableSession(await transfers.session(input.uploadId, "share"), caller, input.uploadId);
      if (s.state !== "open") throw finishedError(s);
      checkChunkFits({ index: input.index, size: bytes.length, otherBytes: (await transfers.storedExcept(s.id, input.index)).bytes, contentLength: Number(s.content_length) });
      await transfers.reserveChunk(s.id, input.index, bytes.length, key);
    });
    reserving.catch(() => {}); // observed below, once the write settled
    try {
      await objects.put(key, bytes, { contentType: "application/octet-stream", contentLength: bytes.length, visibleAfter: reserving });
      return await commitChunk(caller, input, bytes.length, { reservedKey: key });
    } catch (err) {
      // A refused reservation is the answer (it says more than the write it stopped) and left
      // nothing to undo; otherwise the object and its reservation go, outside the call (its
      // deadline may be what failed the chunk, and an ended call's unit commits nothing).
      await reserving;
      await ingest.removeObjects([key]);
      await outsideCall(() => unitOfWork(({ transfers }) => transfers.dropReservation(key))).catch(() => {});
      throw err;
    }
  }

  async function readChunkObject(c: StoredChunk, range?: { start: number; end: number }): Promise<Buffer> {
    const bytes = await readObject(objects, c.key!, { range });
    if (!bytes) throw new ChunkMissingError(c);
    return bytes;
  }

  /** Up to `bytes` leading bytes of the assembled file (for MIME sniffing). */
  async function leadingBytes(chunks: StoredChunk[], bytes: number): Promise<Buffer> {
    const parts: Buffer[] = [];
    let n = 0;
    for (const c of chunks) {
      if (n >= bytes) break;
      if (c.size === 0) continue;
      const want = Math.min(c.size, bytes - n);
      const part = c.key === null ? await stores.transfers.inlineHead(c.id, want) : await readChunkObject(c, { start: 0, end: want - 1 });
      parts.push(part);
      n += part.length;
    }
    return Buffer.concat(parts).subarray(0, bytes);
  }

  async function readSegment(seg: StoredChunk[]): Promise<Buffer[]> {
    if (seg[0]!.key !== null) return [await readChunkObject(seg[0]!)];
    const byId = await stores.transfers.inlineData(seg.map((c) => c.id));
    return seg.map((c) => byId.get(c.id) ?? Buffer.alloc(0));
  }

  /**
   * The chunks in index order. Reads run ahead of the consumer (several
   * segments in flight, a few MiB at most), so many small objects on S3 are not one round trip each.
   */
  async function* assembled(chunks: StoredChunk[]) {
    const segs = segments(chunks);
    const bytesOf = (seg: StoredChunk[]) => seg.reduce((n, c) => n + c.size, 0);
    const pending: Array<Promise<Buffer[]>> = [];
    let next = 0;
    let ahead = 0;
    for (let i = 0; i < segs.length; i++) {
      while (next < segs.length && (pending.length === 0 || ahead + bytesOf(segs[next]!) <= READ_AHEAD_BYTES)) {
        const seg = segs[next++]!;
        ahead += bytesOf(seg);
        const p = readSegment(seg);
        p.catch(() => {}); // observed when its turn comes
        pending.push(p);
      }
      const datas = await pending.shift()!;
      ahead -= bytesOf(segs[i]!);
      for (const [j, data] of datas.entries()) {
        const c = segs[i]![j]!;
        if (data.length !== c.size) throw new ObjectLengthMismatchError(`chunk ${c.index} holds ${data.length} bytes, ${c.size} were stored`);
        yield data;
      }
    }
  }

  /** The item a session finished as. */
  async function finishedItem(s: UploadSessionRow): Promise<{ row: MediaRow; uploadId: string }> {
    const row = await stores.media.byId(Number(s.media_id));
    if (!row) throw new AppError("not_found", `Upload ${s.id} finished as media ${s.media_id}, which no longer exists.`, { field: "upload_id", media_id: Number(s.media_id) });
    return { row, uploadId: s.id };
  }

  /** Streams the chunks into a fresh object (nothing is stored when length or sha256 disagree). */
  async function storeAssembled(caller: Caller, s: UploadSessionRow, chunks: StoredChunk[], expectedSha: string | undefined) {
    const mime = await sniffBytes(await leadingBytes(chunks, 4100), s.content_type ?? mimeOfFilename(s.filename ?? undefined));
    const key = freshStoreKey(caller.userId, Number(s.collection_id), s.filename ?? undefined, "upload");
    try {
      // The store hashes the bytes on the way and, when they are not the expected ones, refuses
      // them before the object is visible: nothing is stored.
      const stored = await objects.put(key, Readable.from(assembled(chunks)), { contentType: mime, contentLength: Number(s.content_length), sha256: expectedSha });
      return { key, sha256: stored.sha256 };
    } catch (err) {
      if (err instanceof ObjectChecksumMismatchError) throw finishFailure(`The assembled file has sha256 ${err.actual}, not the one expected.`, "sha256", { actual_sha256: err.actual });
      if (err instanceof ObjectLengthMismatchError) throw finishFailure(`The assembled file does not have the declared length: ${err.message}.`, "content_length");
      if (err instanceof ChunkMissingError) {
        // Lost from the store: the index must be sent again (the row goes, unless replaced meanwhile).
        await unitOfWork(async ({ transfers }, events) => {
          await transfers.removeChunk(err.chunk.id);
          await emitObjectsOrphaned(events, [err.chunk.key]);
        });
        throw finishFailure(`The stored bytes of chunk ${err.chunk.index} are gone; send that index again and finish again.`, "upload_id", { missing_indexes: [err.chunk.index] });
      }
      throw err;
    }
  }

  /**
   * Completes the session with the prepared item, if it still holds the chunks the file was
   * made of: the item, or the session as another finish left it.
   */
  function completeSession(caller: Caller, s: UploadSessionRow, chunks: StoredChunk[], item: PreparedItem) {
    return unitOfWork(async (tx, events): Promise<{ row: MediaRow } | { finished: UploadSessionRow }> => {
      const now = usableSession(await tx.transfers.session(s.id, "update"), caller, s.id);
      if (now.state === "finished") return { finished: now };
      if (!sameChunks(await tx.transfers.storedChunks(s.id), chunks)) {
        throw finishFailure("Chunks of the session changed while the file was being assembled; finish again.", "upload_id");
      }
      const row = await appendRow(tx, events, item.row);
      await tx.transfers.markFinished(s.id, Number(row.id));
      await emitObjectsOrphaned(events, await tx.transfers.discardChunks([s.id]));
      return { row };
    });
  }

  /** The item a finished session made (the same one again when it finished before). */
  async function finishUpload(caller: Caller, input: FinishInput): Promise<{ row: MediaRow; uploadId: string }> {
    const s = usableSession(await stores.transfers.session(input.uploadId), caller, input.uploadId);
    if (s.state === "finished") return finishedItem(s);
    const declared = Number(s.content_length);
    if (input.contentLength !== undefined && input.contentLength !== declared) {
      throw finishFailure(`content_length ${input.contentLength} differs from the ${declared} bytes declared at media.upload_begin.`, "content_length", { expected_bytes: declared });
    }
    if (input.sha256 !== undefined && s.sha256 !== null && input.sha256 !== s.sha256) {
      throw finishFailure(`sha256 differs from the one given at media.upload_begin.`, "sha256");
    }
    const chunks = await stores.transfers.storedChunks(s.id);
    const plan = assemble(chunks, declared);
    if (!plan.ok) {
      throw new AppError("invalid_request", `The chunks received do not make the whole file: ${plan.receivedBytes} of ${declared} bytes, ${plan.missing.length ? `indexes missing: ${plan.missing.slice(0, 20).join(", ")}${plan.missing.length > 20 ? ", ..." : ""}` : "no index missing"}. The session stays open: send the missing chunks and finish again.`, {
        field: "upload_id", missing_indexes: plan.missing, received_bytes: plan.receivedBytes, expected_bytes: declared,
      });
    }
    const { ownerUserId } = await access.authorize(caller, Number(s.collection_id), "upload");
    const stored = await storeAssembled(caller, s, chunks, input.sha256 ?? s.sha256 ?? undefined);
    let item: PreparedItem | undefined;
    try {
      item = await files.prepareItem(caller, ownerUserId, Number(s.collection_id), stored.key, {
        name: itemName(s.name ?? undefined, s.filename ?? undefined), description: s.description, tags: s.tags ?? [], sha256: stored.sha256,
      });
      const done = await completeSession(caller, s, chunks, item);
      if ("row" in done) return { row: done.row, uploadId: s.id };
      // Another finish of this session won: its item is the answer, this one's objects go.
      await ingest.removeObjects([stored.key, ...item.made]);
      return finishedItem(done.finished);
    } catch (err) {
      await ingest.removeObjects([stored.key, ...(item?.made ?? [])]);
      throw err;
    }
  }

  async function abortUpload(caller: Caller, uploadId: string): Promise<{ uploadId: string; discardedChunks: number }> {
    return unitOfWork(async ({ transfers }, events) => {
      const s = await transfers.session(uploadId, "update");
      if (!s || s.user_id !== caller.userId) throw new AppError("not_found", `Upload session ${uploadId} does not exist.`, { field: "upload_id" });
      if (s.state === "finished") {
        throw new AppError("invalid_request", `Upload ${uploadId} already finished as media ${s.media_id}; remove the item with media.delete.`, { field: "upload_id", media_id: Number(s.media_id) });
      }
      const discarded = (await transfers.storedChunks(uploadId)).length;
      await discardChunks(transfers, events, [uploadId]);
      await transfers.deleteSessions([uploadId]);
      return { uploadId, discardedChunks: discarded };
    });
  }

  /**
   * The upload_cleanup job: open upload sessions past expiry (chunks go with them), finished ones
   * past the retention above, and expired download sessions.
   */
  async function cleanupExpiredSessions(now = new Date()) {
    const uploads = await unitOfWork(async ({ transfers }, events) => {
      const ids = await transfers.expiredSessions(now, new Date(now.getTime() - FINISHED_SESSION_RETENTION_MS));
      await discardChunks(transfers, events, ids);
      return transfers.deleteSessions(ids);
    });
    const downloads = await unitOfWork(({ transfers }) => transfers.deleteExpiredDownloads(now));
    return { expired_upload_sessions: Number(uploads), expired_download_sessions: Number(downloads) };
  }

  return { beginUpload, uploadChunk, finishUpload, abortUpload, cleanupExpiredSessions };
}

/** Deletes the sessions' chunk rows, their objects going through the outbox. */
async function discardChunks(transfers: TransferStore, events: Parameters<Parameters<MediaDeps["unitOfWork"]>[0]>[1], uploadIds: string[]): Promise<void> {
  await emitObjectsOrphaned(events, await transfers.discardChunks(uploadIds));
}
