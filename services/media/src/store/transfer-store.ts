/**
 * The rows of moving bytes behind the TransferStore port: chunked upload sessions and their
 * chunks (small ones inline, large ones as store objects named by their row), and chunked
 * download sessions. Works on the pool and on a unit of work's transaction alike.
 */
import type { Queryable } from "@cms/platform";

/** A chunked upload session (media.upload_begin ... upload_finish). */
export interface UploadSessionRow {
  id: string; user_id: string; collection_id: number; owner_user_id: string; filename: string | null; content_type: string | null;
  content_length: number; sha256: string | null; name: string | null; description: string | null; tags: string[];
  state: "open" | "finished"; media_id: number | null; created_at: Date; expires_at: Date;
}

/** A session to open (open, with no item yet). */
export type NewUploadSession = Omit<UploadSessionRow, "state" | "media_id" | "created_at">;

/** A current chunk of a session: inline (its bytes are in its row) or a store object. */
export interface StoredChunk { id: number; index: number; size: number; key: string | null }

/** A chunked download session (media.download_begin ... download_chunk). */
export interface DownloadSessionRow {
  id: string; user_id: string; media_id: number; store_key: string; content_type: string; content_length: number; sha256: string;
  chunk_bytes: number; expires_at: Date;
}

/** The rows of chunked uploads and downloads, as the use cases read and write them. */
export interface TransferStore {
  /** Serialises begins into one owner's storage until the end of the transaction. */
  lockOwnerStorage(ownerUserId: string): Promise<void>;
  /** Stored bytes (each object once) and open uploads of an owner and of a collection. */
  storageInUse(ownerUserId: string, collectionId: number): Promise<{ user: number; collection: number }>;
  insertSession(s: NewUploadSession): Promise<void>;
  /** A session, locked for the transaction when asked (FOR UPDATE, or FOR SHARE). */
  session(id: string, lock?: "update" | "share"): Promise<UploadSessionRow | undefined>;
  markFinished(id: string, mediaId: number): Promise<void>;
  deleteSessions(ids: string[]): Promise<number>;
  /** Open sessions past expiry and finished ones expired before `finishedBefore`, locked. */
  expiredSessions(now: Date, finishedBefore: Date): Promise<string[]>;

  /** Bytes and count of the session's current chunks other than `index`. */
  storedExcept(uploadId: string, index: number): Promise<{ bytes: number; chunks: number }>;
  /** The session's current chunks in index order. */
  storedChunks(uploadId: string): Promise<StoredChunk[]>;
  insertInlineChunk(uploadId: string, index: number, data: Buffer): Promise<void>;
  /** A row for a chunk object about to be written ("writing"), so that its object can always be found. */
  reserveChunk(uploadId: string, index: number, size: number, storeKey: string): Promise<void>;
  /** Makes a reserved chunk current; false when its reservation is gone. */
  markChunkStored(storeKey: string): Promise<boolean>;
  dropReservation(storeKey: string): Promise<void>;
  /** Removes the current chunk of an index; the store keys of what went. */
  removeStoredChunk(uploadId: string, index: number): Promise<Array<string | null>>;
  /** Removes one chunk row (still the current one only if its id is). */
  removeChunk(id: number): Promise<void>;
  /** Removes every chunk row of the sessions; the store keys of what went. */
  discardChunks(uploadIds: string[]): Promise<Array<string | null>>;
  /** The first `bytes` bytes of an inline chunk. */
  inlineHead(id: number, bytes: number): Promise<Buffer>;
  /** The bytes of inline chunks by id. */
  inlineData(ids: number[]): Promise<Map<number, Buffer>>;

  insertDownload(d: DownloadSessionRow): Promise<void>;
  download(id: string): Promise<DownloadSessionRow | undefined>;
  deleteExpiredDownloads(now: Date): Promise<number>;
}

/** The knex adapter of TransferStore, on the pool or on a unit of work's transaction. */
export function createTransferStore(q: Queryable): TransferStore {
  const chunks = () => q("upload_chunks");
  return {
    async lockOwnerStorage(ownerUserId) {
      await q.raw("SELECT pg_advisory_xact_lock(?, hashtext(?))", [0x75706c64, ownerUserId]);
    },
    async storageInUse(ownerUserId, collectionId) {
      const { rows } = await q.raw(
        `SELECT
           (SELECT coalesce(sum(size_bytes), 0) FROM (SELECT DISTINCT ON (main_url) size_bytes FROM media WHERE owner_user_id = ? AND main_url LIKE 'store://%') u)
         + (SELECT coalesce(sum(content_length), 0) FROM upload_sessions WHERE owner_user_id = ? AND state = 'open' AND expires_at > now()) AS user_bytes,
           (SELECT coalesce(sum(size_bytes), 0) FROM (SELECT DISTINCT ON (main_url) size_bytes FROM media WHERE collection_id = ? AND main_url LIKE 'store://%') c)
         + (SELECT coalesce(sum(content_length), 0) FROM upload_sessions WHERE collection_id = ? AND state = 'open' AND expires_at > now()) AS collection_bytes`,
        [ownerUserId, ownerUserId, collectionId, collectionId],
      );
      return { user: Number(rows[0].user_bytes), collection: Number(rows[0].collection_bytes) };
    },
    async insertSession(s) {
      await q("upload_sessions").insert(s);
    },
    async session(id, lock) {
      const qb = q("upload_sessions").where({ id }).first();
      if (lock === "update") qb.forUpdate();
      if (lock === "share") qb.forShare();
      return qb;
    },
    async markFinished(id, mediaId) {
      await q("upload_sessions").where({ id }).update({ state: "finished", media_id: mediaId });
    },
    async deleteSessions(ids) {
      return ids.length ? q("upload_sessions").whereIn("id", ids).delete() : 0;
    },
    async expiredSessions(now, finishedBefore) {
      const rows: Array<{ id: string }> = await q("upload_sessions")
        .where((w) => w.where({ state: "open" }).andWhere("expires_at", "<", now))
        .orWhere((w) => w.where({ state: "finished" }).andWhere("expires_at", "<", finishedBefore))
        .forUpdate().select("id");
      return rows.map((r) => r.id);
    },

    async storedExcept(uploadId, index) {
      const { rows } = await q.raw("SELECT coalesce(sum(size), 0) AS bytes, count(*) AS chunks FROM upload_chunks WHERE upload_id = ? AND state = 'stored' AND idx <> ?", [uploadId, index]);
      return { bytes: Number(rows[0].bytes), chunks: Number(rows[0].chunks) };
    },
    async storedChunks(uploadId) {
      const rows: Array<{ id: number; idx: number; size: number; store_key: string | null }> = await chunks().where({ upload_id: uploadId, state: "stored" })
        .orderBy("idx").select("id", "idx", "size", "store_key");
      return rows.map((r) => ({ id: Number(r.id), index: Number(r.idx), size: Number(r.size), key: r.store_key }));
    },
    async insertInlineChunk(uploadId, index, data) {
      await chunks().insert({ upload_id: uploadId, idx: index, size: data.length, state: "stored", data });
    },
    async reserveChunk(uploadId, index, size, storeKey) {
      await chunks().insert({ store_key: storeKey, upload_id: uploadId, idx: index, size, state: "writing" });
    },
    async markChunkStored(storeKey) {
      return (await chunks().where({ store_key: storeKey }).update({ state: "stored" })) > 0;
    },
    async dropReservation(storeKey) {
      await chunks().where({ store_key: storeKey }).delete();
    },
    async removeStoredChunk(uploadId, index) {
      const gone: Array<{ store_key: string | null }> = await chunks().where({ upload_id: uploadId, idx: index, state: "stored" }).delete().returning("store_key");
      return gone.map((r) => r.store_key);
    },
    async removeChunk(id) {
      await chunks().where({ id }).delete();
    },
    async discardChunks(uploadIds) {
      if (!uploadIds.length) return [];
      const gone: Array<{ store_key: string | null }> = await chunks().whereIn("upload_id", uploadIds).delete().returning("store_key");
      return gone.map((r) => r.store_key);
    },
    async inlineHead(id, bytes) {
      const row = await chunks().where({ id }).first(q.raw("substring(data FROM 1 FOR ?) AS head", [bytes]));
      return (row?.head as Buffer | undefined) ?? Buffer.alloc(0);
    },
    async inlineData(ids) {
      const rows: Array<{ id: number; data: Buffer }> = await chunks().whereIn("id", ids).select("id", "data");
      return new Map(rows.map((r) => [Number(r.id), r.data]));
    },

    async insertDownload(d) {
      await q("download_sessions").insert(d);
    },
    async download(id) {
      return q("download_sessions").where({ id }).first();
    },
    async deleteExpiredDownloads(now) {
      return q("download_sessions").where("expires_at", "<", now).delete();
    },
  };
}
