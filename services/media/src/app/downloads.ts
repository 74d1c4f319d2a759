/**
 * Reading stored files: media.download (the gateway streams the object this answers with),
 * media.download_url (a signed GET link on the API origin), the chunked download
 * (media.download_begin / download_chunk, sessions in PostgreSQL) and the objects behind
 * describe's proxy URLs. Only object-store-backed files are downloadable.
 */
import { randomUUID } from "node:crypto";
import { AppError, downloadLink, isStoreKey, readObject, type Caller } from "@cms/platform";
import type { MediaRow } from "../domain/media-row.js";
import { TEXT_NOTE_URL } from "../domain/rules.js";
import { CHUNK_BYTES, CHUNKED_MAX_BYTES, chunkCount, chunkRange, filenameOfKey } from "../domain/transfer-rules.js";
import type { MediaAccess } from "./access.js";
import type { Ingest } from "./ingest.js";
import type { PendingUploads } from "./pending-uploads.js";
import type { MediaDeps } from "./ports.js";

/** What the gateway streams: one stored object and how to label it. */
export interface ObjectRef { storeKey: string; contentType: string | null; filename: string; sha256: string | null }

/** A signed download link and what it serves. */
export interface DownloadLink {
  url: string; expiresAt: Date; mediaId: number; filename: string; contentType: string | null; sizeBytes: number | null; hint: string;
}

/** An open download session and the whole file's facts. */
export interface DownloadSession {
  downloadId: string; mediaId: number; contentType: string; contentLength: number; sha256: string; chunkBytes: number; chunkCount: number;
  expiresAt: Date; filename: string;
}

/** One chunk of a download session. */
export interface DownloadedChunk { downloadId: string; index: number; bytes: Buffer; chunkCount: number; isLast: boolean }

const PART_COLUMN = { main: "main_url", thumbnail: "thumbnail_url", background: "background_image_url" } as const;

/** The download use cases. */
export function createDownloads(
  { stores, unitOfWork, objects, config }: Pick<MediaDeps, "stores" | "unitOfWork" | "objects" | "config">,
  { access, ingest, pending }: { access: MediaAccess; ingest: Ingest; pending: PendingUploads },
) {
  /** The row's stored file, refusing text notes, sub-collection links, links and missing bytes. */
  async function storedFileOf(row: MediaRow): Promise<{ row: MediaRow; ref: ObjectRef }> {
    if (row.linked_collection_id !== null) {
      throw new AppError("invalid_request", `Media ${row.id} is a sub-collection link, not a file; open collection ${row.linked_collection_id} with collections.get.`, { field: "media_id", kind: "collection_link" });
    }
    if (row.main_url === TEXT_NOTE_URL) {
      throw new AppError("invalid_request", `Media ${row.id} is an inline text note, not a stored file; read it with media.text_note.get.`, { field: "media_id", kind: "text_note" });
    }
    if (!isStoreKey(row.main_url)) {
      throw new AppError("invalid_request", `Media ${row.id} is an external link (${row.main_url}), not a stored file; fetch main_url directly.`, { field: "media_id", kind: "external_link", main_url: row.main_url });
    }
    const { row: current, pending: waiting } = await pending.finalizedRow(row);
    if (waiting) throw new AppError("invalid_request", `The file of media ${row.id} has not been uploaded yet: PUT it to the upload URL media.get_upload_url returned.`, { field: "media_id" });
    return { row: current, ref: { storeKey: current.main_url, contentType: current.mime_type, filename: filenameOfKey(current.main_url), sha256: current.sha256 } };
  }

  async function downloadMedia(caller: Caller, id: number): Promise<{ object: ObjectRef; mediaId: number }> {
    const { row } = await access.mediaFor(caller, id, "read");
    const { ref } = await storedFileOf(row);
    return { object: ref, mediaId: id };
  }

  async function downloadUrl(caller: Caller, id: number): Promise<DownloadLink> {
    const { row } = await access.mediaFor(caller, id, "read");
    const { row: current, ref } = await storedFileOf(row);
    const expiresAt = new Date(Date.now() + config.downloadUrlTtlMs);
    const object = { key: ref.storeKey, content_type: ref.contentType, filename: ref.filename, media_id: id };
    return {
      url: downloadLink(config.grantSecret!, config.baseUrl, object, expiresAt.getTime()),
      expiresAt,
      mediaId: id,
      filename: ref.filename,
      contentType: ref.contentType,
      sizeBytes: current.size_bytes,
      hint: "GET the url with no Authorization header before expires_at; it supports Range requests.",
    };
  }

  async function beginDownload(caller: Caller, id: number): Promise<DownloadSession> {
    const { row } = await access.mediaFor(caller, id, "read");
    const { row: current, ref } = await storedFileOf(row);
    const info = await objects.head(ref.storeKey);
    if (!info) throw new AppError("not_found", `The stored file of media ${id} is missing.`, { field: "media_id" });
    if (info.size > CHUNKED_MAX_BYTES) {
      throw new AppError("invalid_request", `The file has ${info.size} bytes; the chunked download takes files up to ${CHUNKED_MAX_BYTES} bytes. Use media.download or media.download_url.`, { field: "media_id", size_bytes: info.size });
    }
    let sha256 = current.sha256;
    if (!sha256) {
      const hashed = await ingest.hashObject(ref.storeKey);
      if (!hashed) throw new AppError("not_found", `The stored file of media ${id} is missing.`, { field: "media_id" });
      sha256 = hashed.sha256;
      // Remembered on the row: the object under a key never changes.
      await unitOfWork(({ media }) => media.rememberSha256(id, ref.storeKey, sha256!));
    }
    const downloadId = randomUUID();
    const expiresAt = new Date(Date.now() + config.uploadSessionTtlMs);
    const contentType = ref.contentType ?? info.contentType;
    await unitOfWork(({ transfers }) => transfers.insertDownload({
      id: downloadId, user_id: caller.userId, media_id: id, store_key: ref.storeKey, content_type: contentType, content_length: info.size,
      sha256: sha256!, chunk_bytes: CHUNK_BYTES, expires_at: expiresAt,
    }));
    return {
      downloadId, mediaId: id, contentType, contentLength: info.size, sha256, chunkBytes: CHUNK_BYTES,
      chunkCount: chunkCount(info.size), expiresAt, filename: ref.filename,
    };
  }

  async function downloadChunk(caller: Caller, downloadId: string, index: number): Promise<DownloadedChunk> {
    const s = await stores.transfers.download(downloadId);
    if (!s || s.user_id !== caller.userId || new Date(s.expires_at).getTime() <= Date.now()) {
      throw new AppError("not_found", `Download ${downloadId} does not exist or expired; open one with media.download_begin.`, { field: "download_id" });
    }
    // Permission is checked on every chunk: a revoked reader is refused at once.
    const { row } = await access.mediaFor(caller, Number(s.media_id), "read");
    if (row.main_url !== s.store_key) throw new AppError("invalid_request", `Media ${s.media_id} was replaced after the download began; begin again.`, { field: "download_id" });
    const size = Number(s.content_length);
    const range = chunkRange(index, size, Number(s.chunk_bytes));
    const missing = () => new AppError("not_found", `The stored file of media ${s.media_id} is missing.`, { field: "download_id" });
    let bytes: Buffer = Buffer.alloc(0);
    if (range) {
      const read = await readObject(objects, s.store_key, { range });
      if (!read) throw missing();
      bytes = read;
    } else if (!(await objects.head(s.store_key))) {
      // An empty file's one chunk: nothing to read (no store takes an empty range), but it must still be there.
      throw missing();
    }
    const count = chunkCount(size, Number(s.chunk_bytes));
    return { downloadId, index, bytes, chunkCount: count, isLast: index === count - 1 };
  }

  /** The object behind a describe proxy URL (/storage/v1/media/<id>/<part>). */
  async function resolveMediaObject(caller: Caller, id: number, part: keyof typeof PART_COLUMN): Promise<ObjectRef> {
    const { row } = await access.mediaFor(caller, id, "read");
    if (part === "main") {
      const { ref } = await storedFileOf(row);
      return ref;
    }
    const key = row[PART_COLUMN[part]];
    if (!key || !isStoreKey(key)) throw new AppError("not_found", `Media ${id} has no stored ${part} image.`, { field: "part" });
    return { storeKey: key, contentType: null, filename: filenameOfKey(key), sha256: null };
  }

  return { downloadMedia, downloadUrl, beginDownload, downloadChunk, resolveMediaObject };
}
