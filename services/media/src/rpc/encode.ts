/**
 * The application's values as the typed messages of the contract: media rows as media.v1.Media,
 * and the responses whose keys depend on the outcome (present only when set, null when empty).
 * The gateway renders these messages as the contract's JSON.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { PaginationSchema, StoredObjectSchema } from "@cms/contracts/common/v1/common_pb";
import type {
  BeginDownloadResponseSchema, BeginUploadResponseSchema, CheckDropGrantResponseSchema, CreateDropLinkResponseSchema,
  DeleteMediaResponseSchema, DeleteTextNoteResponseSchema, DescribeMediaResponseSchema, DownloadChunkResponseSchema, FinalizeThumbnailResponseSchema,
  GetDownloadUrlResponseSchema, GetMediaUploadUrlResponseSchema, GetTextNoteResponseSchema, ListMediaResponseSchema,
  ObjectUploadedResponseSchema, SearchMediaResponseSchema, UploadChunkResponseSchema, UploadTargetsSchema,
} from "@cms/contracts/media/v1/media_pb";
import type { Media } from "@cms/contracts/media/v1/resources_pb";
import { timestampOf } from "@cms/platform";
import type { UploadTargets } from "@cms/platform/upload-urls";
import type { MediaRow, Page } from "../domain/media-row.js";
import type { DeleteOutcome, Described, ListPage, SearchPage } from "../app/catalogue.js";
import type { NoteDeleteOutcome } from "../app/text-notes.js";
import type { MintedUpload } from "../app/uploads.js";
import type { UploadReport } from "../app/pending-uploads.js";
import type { ChunkReceipt, UploadSession } from "../app/chunked.js";
import type { DownloadLink, DownloadSession, DownloadedChunk, ObjectRef } from "../app/downloads.js";
import type { DropLink, DropTarget } from "../app/drop-links.js";

const big = (n: number | string | null | undefined) => (n === null || n === undefined ? undefined : BigInt(n));
const opt = <T>(v: T | null | undefined): T | undefined => (v === null ? undefined : v);
const ts = (d: Date | string): Timestamp => timestampOf(d);

/** A complete Media message (lists carry hundreds: no create() copy). */
export function mediaMessage(row: MediaRow): Media {
  return {
    $typeName: "media.v1.Media",
    id: BigInt(row.id),
    collectionId: BigInt(row.collection_id),
    name: opt(row.name),
    description: opt(row.description),
    tags: row.tags ?? [],
    mainUrl: row.main_url,
    viewer: row.viewer,
    mimeType: opt(row.mime_type),
    sizeBytes: big(row.size_bytes),
    sha256: opt(row.sha256),
    thumbnailUrl: opt(row.thumbnail_url),
    backgroundImageUrl: opt(row.background_image_url),
    note: row.text_note !== null ? { $typeName: "media.v1.TextNote", textNote: row.text_note, displayMode: opt(row.display_mode), placeholderKind: opt(row.placeholder_kind) } : undefined,
    linkedCollectionId: big(row.linked_collection_id),
    position: row.position,
    isArchived: row.is_archived,
    isDeleted: row.is_deleted,
    createdBy: row.created_by,
    createdAt: timestampOf(row.created_at),
    updatedAt: timestampOf(row.updated_at),
  };
}

/** A list's page as common.v1.Pagination. */
export function paginationMessage(p: Page): MessageInitShape<typeof PaginationSchema> {
  return { limit: p.limit, offset: p.offset, total: BigInt(p.total) };
}

/** A stored object to stream; an unknown type or hash is null in the message (left unset). */
export function storedObjectMessage(ref: ObjectRef): MessageInitShape<typeof StoredObjectSchema> {
  return { storeKey: ref.storeKey, contentType: opt(ref.contentType), filename: ref.filename, sha256: opt(ref.sha256) };
}

/** media.describe: the row, what it is, and where its bytes are. */
export function describeMessage(d: Described): MessageInitShape<typeof DescribeMediaResponseSchema> {
  return {
    media: mediaMessage(d.row),
    kind: d.kind,
    inferredViewer: d.inferredViewer,
    proxyUrls: { mainUrl: d.proxyUrls.mainUrl, thumbnailUrl: opt(d.proxyUrls.thumbnailUrl), backgroundImageUrl: opt(d.proxyUrls.backgroundImageUrl) },
    proxyNote: d.proxyNote,
    downloadable: d.downloadable,
  };
}

/** media.list: the hint keys are left out unless the (empty) page needs them. */
export function listMessage(p: ListPage): MessageInitShape<typeof ListMediaResponseSchema> {
  return {
    media: p.rows.map(mediaMessage),
    pagination: paginationMessage(p.pagination),
    alsoWithoutFilters: p.hint.also_without_filters,
    alsoArchived: p.hint.also_archived,
    hint: p.hint.hint,
  };
}

/** media.search: the counts and the hint are left out unless set. */
export function searchMessage(p: SearchPage): MessageInitShape<typeof SearchMediaResponseSchema> {
  return {
    media: p.rows.map(mediaMessage),
    query: p.query,
    pagination: paginationMessage(p.pagination),
    alsoArchived: p.alsoArchived,
    alsoInOtherCollections: p.alsoInOtherCollections,
    hint: p.hint,
  };
}

/** media.delete: {dry_run, mode, would_delete} for a preview, {deleted, mode, media_ids, count} once done. */
export function deleteMessage(o: DeleteOutcome): MessageInitShape<typeof DeleteMediaResponseSchema> {
  const ids = o.mediaIds.map(BigInt);
  return o.dryRun
    ? { outcome: { case: "preview", value: { dryRun: true, mode: o.mode, wouldDelete: { mediaIds: ids, count: ids.length } } } }
    : { outcome: { case: "deleted", value: { deleted: true, mode: o.mode, mediaIds: ids, count: ids.length } } };
}

/** media.text_note.delete: {dry_run, would_delete} for a preview, {deleted, media_id} once done. */
export function noteDeleteMessage(o: NoteDeleteOutcome): MessageInitShape<typeof DeleteTextNoteResponseSchema> {
  const mediaId = BigInt(o.row.id);
  return o.dryRun
    ? { outcome: { case: "preview", value: { dryRun: true, wouldDelete: { mediaId, name: opt(o.row.name), collectionId: BigInt(o.row.collection_id) } } } }
    : { outcome: { case: "deleted", value: { deleted: true, mediaId } } };
}

/** media.thumbnail_finalize: noop only when nothing was done. */
export function finalizeMessage(r: { row: MediaRow; noop: boolean }): MessageInitShape<typeof FinalizeThumbnailResponseSchema> {
  return { media: mediaMessage(r.row), noop: r.noop ? true : undefined };
}

/** media.text_note.get: the row with its text and display mode beside it. */
export function textNoteMessage(row: MediaRow): MessageInitShape<typeof GetTextNoteResponseSchema> {
  return { media: mediaMessage(row), textNote: opt(row.text_note), displayMode: opt(row.display_mode) };
}

/** Where and how to PUT the bytes of an upload URL. */
export function uploadTargetsMessage(t: UploadTargets): MessageInitShape<typeof UploadTargetsSchema> {
  return {
    uploadUrl: t.upload_url, byteUploadUrl: t.byte_upload_url, storeKey: t.store_key, method: t.method, headers: { ...t.headers },
    expiresAt: ts(t.expires_at), maxBytes: BigInt(t.max_bytes),
  };
}

/** media.get_upload_url: flow only for purpose=media, media only in the one-call flow. */
export function uploadUrlMessage(m: MintedUpload): MessageInitShape<typeof GetMediaUploadUrlResponseSchema> {
  return {
    targets: uploadTargetsMessage(m.targets), purpose: m.purpose, flow: m.flow, media: m.row ? mediaMessage(m.row) : undefined, nextStep: m.nextStep,
  };
}

/** ObjectUploaded: whether a one-call row was finalized, or the bytes removed. */
export function objectUploadedMessage(r: UploadReport): MessageInitShape<typeof ObjectUploadedResponseSchema> {
  return { finalized: r.finalized, media: r.row ? mediaMessage(r.row) : undefined, removed: r.removed };
}

/** media.upload_begin: the session and how to send its chunks. */
export function uploadSessionMessage(s: UploadSession): MessageInitShape<typeof BeginUploadResponseSchema> {
  return {
    uploadId: s.uploadId, chunkBytes: s.chunkBytes, maxChunkBytes: s.maxChunkBytes, chunkCount: s.chunkCount,
    contentLength: BigInt(s.contentLength), expiresAt: ts(s.expiresAt), nextStep: s.nextStep,
  };
}

/** media.upload_chunk: the chunk stored and the session's progress. */
export function chunkReceiptMessage(r: ChunkReceipt): MessageInitShape<typeof UploadChunkResponseSchema> {
  return {
    uploadId: r.uploadId, index: r.index, contentLength: r.contentLength, receivedChunks: r.receivedChunks,
    receivedBytes: BigInt(r.receivedBytes), expectedBytes: BigInt(r.expectedBytes),
  };
}

/** media.download_url: an unknown content type or size is null. */
export function downloadLinkMessage(l: DownloadLink): MessageInitShape<typeof GetDownloadUrlResponseSchema> {
  return {
    url: l.url, method: "GET", expiresAt: ts(l.expiresAt), mediaId: BigInt(l.mediaId), filename: l.filename,
    contentType: opt(l.contentType), sizeBytes: big(l.sizeBytes), hint: l.hint,
  };
}

/** media.download_begin: the session and the whole file's facts. */
export function downloadSessionMessage(s: DownloadSession): MessageInitShape<typeof BeginDownloadResponseSchema> {
  return {
    downloadId: s.downloadId, mediaId: BigInt(s.mediaId), contentType: s.contentType, contentLength: BigInt(s.contentLength), sha256: s.sha256,
    chunkBytes: s.chunkBytes, chunkCount: s.chunkCount, expiresAt: ts(s.expiresAt), filename: s.filename,
  };
}

/** media.download_chunk: one chunk's bytes as base64. */
export function downloadChunkMessage(c: DownloadedChunk): MessageInitShape<typeof DownloadChunkResponseSchema> {
  return {
    downloadId: c.downloadId, index: c.index, contentBase64: c.bytes.toString("base64"), contentLength: c.bytes.length,
    chunkCount: c.chunkCount, isLast: c.isLast,
  };
}

/** media.drop_link: the link and its limits. */
export function dropLinkMessage(l: DropLink): MessageInitShape<typeof CreateDropLinkResponseSchema> {
  return {
    url: l.url, collectionId: BigInt(l.collectionId), expiresAt: ts(l.expiresAt), expiresInSeconds: l.expiresInSeconds,
    maxBytes: BigInt(l.maxBytes), hint: l.hint,
  };
}

/** CheckDropGrant: where the files dropped through the link go. */
export function dropTargetMessage(t: DropTarget): MessageInitShape<typeof CheckDropGrantResponseSchema> {
  return { collectionId: BigInt(t.collectionId), keyPrefix: t.keyPrefix, expiresAt: ts(t.expiresAt), maxBytes: BigInt(t.maxBytes) };
}
