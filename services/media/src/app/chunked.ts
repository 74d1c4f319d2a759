/**
 * The chunked upload (media.upload_begin, upload_chunk, upload_finish, upload_abort). Sessions
 * and chunks are rows in PostgreSQL, so every call may land on another replica. A session row is
 * locked (FOR UPDATE) while a chunk or the finish works on it: chunks of one session serialize,
 * and two finishes cannot both create an item. The finish streams the chunks in index order into
 * the object store, verifying length and sha256 before the object becomes visible, then creates
 * the item as media.create does, all in one transaction that also marks the session finished.
 */
import { createHash, randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import type { Knex } from "knex";
import { AppError, ObjectLengthMismatchError, freshStoreKey, type Caller } from "@cms/platform";
import { mediaJson, type MediaRow } from "../domain/media-json.js";
import { checkName, normalizeTags } from "../domain/rules.js";
import {
  CHUNK_BYTES, MAX_CHUNK_BYTES, assemble, checkChunkFits, checkQuotas, decodeVerified, mimeOfFilename,
} from "../domain/transfer-rules.js";
import { authorize, type Deps } from "./deps.js";
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

export async function beginUpload(deps: Deps, caller: Caller, input: BeginInput) {
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
    upload_id: id,
    chunk_bytes: CHUNK_BYTES,
    max_chunk_bytes: MAX_CHUNK_BYTES,
    chunk_count: Math.ceil(input.contentLength / CHUNK_BYTES),
    content_length: input.contentLength,
    expires_at: expiresAt,
    next_step: `Send the file as chunks with media.upload_chunk (index 0, 1, ...; ${CHUNK_BYTES} bytes recommended, up to ${MAX_CHUNK_BYTES}), then call media.upload_finish.`,
  };
}

/** The caller's session, locked for the rest of the transaction; another user's is not found. */
async function sessionFor(trx: Knex.Transaction, caller: Caller, uploadId: string): Promise<SessionRow> {
  const s: SessionRow | undefined = await trx("upload_sessions").where({ id: uploadId }).forUpdate().first();
  if (!s || s.user_id !== caller.userId) throw new AppError("not_found", `Upload session ${uploadId} does not exist; start one with media.upload_begin.`, { field: "upload_id" });
  if (s.state === "open" && new Date(s.expires_at).getTime() <= Date.now()) {
    throw new AppError("not_found", `Upload session ${uploadId} expired at ${new Date(s.expires_at).toISOString()}; start again with media.upload_begin.`, { field: "upload_id" });
  }
  return s;
}

export interface ChunkInput { uploadId: string; index: number; contentBase64: string; contentLength: number; sha256?: string }

export async function uploadChunk(deps: Deps, caller: Caller, input: ChunkInput) {
  // Checked before anything is touched: a failing chunk is not stored.
  const bytes = decodeVerified({
    base64: input.contentBase64, contentLength: input.contentLength, sha256: input.sha256, maxBytes: MAX_CHUNK_BYTES,
    tooLarge: `A chunk carries at most ${MAX_CHUNK_BYTES} decoded bytes.`,
  });
  return deps.db.transaction(async (trx) => {
    const s = await sessionFor(trx, caller, input.uploadId);
    if (s.state !== "open") throw new AppError("invalid_request", `Upload session ${input.uploadId} is already finished (media ${s.media_id}).`, { field: "upload_id", media_id: Number(s.media_id) });
    const { rows } = await trx.raw(
      "SELECT coalesce(sum(size), 0) AS other_bytes, count(*) AS other_chunks FROM upload_chunks WHERE upload_id = ? AND idx <> ?",
      [s.id, input.index],
    );
    const otherBytes = Number(rows[0].other_bytes);
    checkChunkFits({ index: input.index, size: bytes.length, otherBytes, contentLength: Number(s.content_length) });
    await trx.raw(
      `INSERT INTO upload_chunks (upload_id, idx, size, data) VALUES (?, ?, ?, ?)
       ON CONFLICT (upload_id, idx) DO UPDATE SET size = EXCLUDED.size, data = EXCLUDED.data`,
      [s.id, input.index, bytes.length, bytes],
    );
    return {
      upload_id: s.id, index: input.index, content_length: bytes.length,
      received_chunks: Number(rows[0].other_chunks) + 1, received_bytes: otherBytes + bytes.length, expected_bytes: Number(s.content_length),
    };
  });
}

/** Up to `bytes` leading bytes of the assembled file (for MIME sniffing). */
async function leadingBytes(trx: Knex.Transaction, uploadId: string, chunks: Array<{ index: number; size: number }>, bytes: number): Promise<Buffer> {
  const wanted: number[] = [];
  let n = 0;
  for (const c of chunks) { if (n >= bytes) break; wanted.push(c.index); n += c.size; }
  const rows: Array<{ head: Buffer }> = await trx("upload_chunks").where({ upload_id: uploadId }).whereIn("idx", wanted).orderBy("idx")
    .select(trx.raw("substring(data FROM 1 FOR ?) AS head", [bytes]));
  return Buffer.concat(rows.map((r) => r.head)).subarray(0, bytes);
}

const BATCH_BYTES = 8 * 1024 * 1024;

/** The chunks in index order, read in batches of about 8 MiB, hashed on the way. */
async function* assembled(trx: Knex.Transaction, uploadId: string, chunks: Array<{ index: number; size: number }>, expectedSha: string | undefined) {
  const hash = expectedSha === undefined ? undefined : createHash("sha256");
  let i = 0;
  while (i < chunks.length) {
    let j = i;
    let bytes = 0;
    while (j < chunks.length && (j === i || bytes + chunks[j]!.size <= BATCH_BYTES)) { bytes += chunks[j]!.size; j++; }
    const rows: Array<{ data: Buffer }> = await trx("upload_chunks").where({ upload_id: uploadId })
      .whereBetween("idx", [chunks[i]!.index, chunks[j - 1]!.index]).orderBy("idx").select("data");
    for (const r of rows) { hash?.update(r.data); yield r.data; }
    i = j;
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

export async function finishUpload(deps: Deps, caller: Caller, input: FinishInput) {
  let storedKey: string | undefined;
  try {
    const out = await deps.db.transaction(async (trx) => {
      const s = await sessionFor(trx, caller, input.uploadId);
      if (s.state === "finished") {
        const row: MediaRow | undefined = await trx("media").where({ id: s.media_id }).first();
        if (!row) throw new AppError("not_found", `Upload ${s.id} finished as media ${s.media_id}, which no longer exists.`, { field: "upload_id", media_id: Number(s.media_id) });
        return { media: mediaJson(row), chunked_upload: true, upload_id: s.id };
      }
      const declared = Number(s.content_length);
      if (input.contentLength !== undefined && input.contentLength !== declared) {
        throw finishFailure(`content_length ${input.contentLength} differs from the ${declared} bytes declared at media.upload_begin.`, "content_length", { expected_bytes: declared });
      }
      if (input.sha256 !== undefined && s.sha256 !== null && input.sha256 !== s.sha256) {
        throw finishFailure(`sha256 differs from the one given at media.upload_begin.`, "sha256");
      }
      const chunks: Array<{ index: number; size: number }> = (await trx("upload_chunks").where({ upload_id: s.id }).orderBy("idx").select("idx", "size"))
        .map((r: { idx: number; size: number }) => ({ index: Number(r.idx), size: Number(r.size) }));
      const plan = assemble(chunks, declared);
      if (!plan.ok) {
        throw new AppError("invalid_request", `The chunks received do not make the whole file: ${plan.receivedBytes} of ${declared} bytes, ${plan.missing.length ? `indexes missing: ${plan.missing.slice(0, 20).join(", ")}${plan.missing.length > 20 ? ", ..." : ""}` : "no index missing"}. The session stays open: send the missing chunks and finish again.`, {
          field: "upload_id", missing_indexes: plan.missing, received_bytes: plan.receivedBytes, expected_bytes: declared,
        });
      }
      const access = await authorize(deps, caller, Number(s.collection_id), "upload");
      const mime = await sniffBytes(await leadingBytes(trx, s.id, chunks, 4100), s.content_type ?? mimeOfFilename(s.filename ?? undefined));
      const key = freshStoreKey(caller.userId, Number(s.collection_id), s.filename ?? undefined, "upload");
      let stored;
      try {
        stored = await deps.ctx.store.put(key, Readable.from(assembled(trx, s.id, chunks, input.sha256 ?? s.sha256 ?? undefined)), { contentType: mime, contentLength: declared });
      } catch (err) {
        if (err instanceof ChecksumMismatchError) throw finishFailure(`The assembled file has sha256 ${err.actual}, not the one expected.`, "sha256", { actual_sha256: err.actual });
        if (err instanceof ObjectLengthMismatchError) throw finishFailure(`The assembled file does not have the declared length: ${err.message}.`, "content_length");
        throw err;
      }
      storedKey = key;
      const row = await createItemFromStored(withTrx(deps, trx), caller, access.ownerUserId, Number(s.collection_id), key, {
        name: itemName(s.name ?? undefined, s.filename ?? undefined), description: s.description, tags: s.tags ?? [], sha256: stored.sha256,
      });
      await trx("upload_sessions").where({ id: s.id }).update({ state: "finished", media_id: row.id });
      await trx("upload_chunks").where({ upload_id: s.id }).delete();
      return { media: mediaJson(row), chunked_upload: true, upload_id: s.id };
    });
    deps.ctx.bus.flush();
    return out;
  } catch (err) {
    if (storedKey) await removeObjects(deps, [storedKey]);
    throw err;
  }
}

export async function abortUpload(deps: Deps, caller: Caller, uploadId: string) {
  return deps.db.transaction(async (trx) => {
    const s = await trx("upload_sessions").where({ id: uploadId }).forUpdate().first() as SessionRow | undefined;
    if (!s || s.user_id !== caller.userId) throw new AppError("not_found", `Upload session ${uploadId} does not exist.`, { field: "upload_id" });
    if (s.state === "finished") {
      throw new AppError("invalid_request", `Upload ${uploadId} already finished as media ${s.media_id}; remove the item with media.delete.`, { field: "upload_id", media_id: Number(s.media_id) });
    }
    const [{ n }] = await trx("upload_chunks").where({ upload_id: uploadId }).count<{ n: number }[]>("* as n");
    await trx("upload_sessions").where({ id: uploadId }).delete();
    return { upload_id: uploadId, aborted: true, discarded_chunks: Number(n) };
  });
}

/** The upload_cleanup job: expired upload sessions (chunks go with them) and download sessions. */
export async function cleanupExpiredSessions(deps: Deps, now = new Date()) {
  const uploads = await deps.db("upload_sessions").where("expires_at", "<", now).delete();
  const downloads = await deps.db("download_sessions").where("expires_at", "<", now).delete();
  return { expired_upload_sessions: Number(uploads), expired_download_sessions: Number(downloads) };
}
