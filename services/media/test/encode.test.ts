/**
 * The encoders of the media service, rendered as the gateway renders them: which keys are null,
 * which are left out, and in which order they come (the contract's JSON of today).
 */
import test from "ava";
import { create, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import {
  DeleteMediaResponseSchema, DeleteTextNoteResponseSchema, DescribeMediaResponseSchema, FinalizeThumbnailResponseSchema,
  GetDownloadUrlResponseSchema, GetMediaUploadUrlResponseSchema, GetTextNoteResponseSchema, ListMediaResponseSchema,
  SearchMediaResponseSchema,
} from "@cms/contracts/media/v1/media_pb";
import { MediaSchema } from "@cms/contracts/media/v1/resources_pb";
import { renderObject } from "@cms/gateway/render";
import type { MediaRow } from "../src/domain/media-row.js";
import {
  deleteMessage, describeMessage, downloadLinkMessage, finalizeMessage, listMessage, mediaMessage, noteDeleteMessage, searchMessage,
  textNoteMessage, uploadUrlMessage,
} from "../src/rpc/encode.js";

const render = <D extends DescMessage>(schema: D, init: MessageInitShape<D>) => renderObject(schema, create(schema, init));

const at = new Date("2026-11-24T06:21:15.123Z");

function row(over: Partial<MediaRow> = {}): MediaRow {
  return {
    id: 7, collection_id: 3, owner_user_id: "u1", created_by: "u1", name: null, description: null, tags: [], main_url: "https://e.com/a",
    viewer: "website", mime_type: null, size_bytes: null, sha256: null, thumbnail_url: null, background_image_url: null, thumbnail_source: null, text_note: null,
    display_mode: null, placeholder_kind: null, linked_collection_id: null, position: 0, is_archived: false, is_deleted: false,
    deleted_at: null, created_at: at, updated_at: at, ...over,
  };
}

const MEDIA_KEYS = [
  "id", "collection_id", "name", "description", "tags", "main_url", "viewer", "mime_type", "size_bytes", "sha256", "thumbnail_url",
  "background_image_url", "position", "is_archived", "is_deleted", "created_by", "created_at", "updated_at",
];

test("media: unset columns are null; the note keys and linked_collection_id are left out unless set", (t) => {
  const json = render(MediaSchema, mediaMessage(row({ size_bytes: 12 })));
  t.deepEqual(Object.keys(json), MEDIA_KEYS);
  t.is(json.name, null);
  t.is(json.size_bytes, 12);
  t.is(json.created_at, "2026-11-24T06:21:15.123Z");
  t.deepEqual(json.tags, []);

  const note = render(MediaSchema, mediaMessage(row({ main_url: "inline://text-note", text_note: "", display_mode: "plain", placeholder_kind: null })));
  t.deepEqual(Object.keys(note), [...MEDIA_KEYS.slice(0, 12), "text_note", "display_mode", "placeholder_kind", ...MEDIA_KEYS.slice(12)]);
  t.is(note.text_note, "");
  t.is(note.placeholder_kind, null);

  const link = render(MediaSchema, mediaMessage(row({ main_url: "collection://9", viewer: "collection", linked_collection_id: 9 })));
  t.deepEqual(Object.keys(link), [...MEDIA_KEYS.slice(0, 12), "linked_collection_id", ...MEDIA_KEYS.slice(12)]);
  t.is(link.linked_collection_id, 9);
});

test("media.list: the hint keys only on an empty page, each only when it applies", (t) => {
  const page = { limit: 100, offset: 0, total: 1 };
  t.deepEqual(Object.keys(render(ListMediaResponseSchema, listMessage({ rows: [row()], pagination: page, hint: {} }))), ["media", "pagination"]);
  const archived = render(ListMediaResponseSchema, listMessage({ rows: [], pagination: { ...page, total: 0 }, hint: { also_archived: 2, hint: "h" } }));
  t.deepEqual(archived, { media: [], pagination: { limit: 100, offset: 0, total: 0 }, also_archived: 2, hint: "h" });
  const filtered = render(ListMediaResponseSchema, listMessage({ rows: [], pagination: { ...page, total: 0 }, hint: { also_without_filters: 1, hint: "h" } }));
  t.deepEqual(Object.keys(filtered), ["media", "pagination", "also_without_filters", "hint"]);
});

test("media.search: counts and hint left out unless set", (t) => {
  const page = { limit: 10, offset: 0, total: 0 };
  t.deepEqual(Object.keys(render(SearchMediaResponseSchema, searchMessage({ rows: [row()], query: "q", pagination: { ...page, total: 1 } }))), ["media", "query", "pagination"]);
  const none = render(SearchMediaResponseSchema, searchMessage({ rows: [], query: "q", pagination: page, alsoInOtherCollections: 3, hint: "h" }));
  t.deepEqual(Object.keys(none), ["media", "query", "pagination", "also_in_other_collections", "hint"]);
});

test("media.describe: proxy URLs of absent images are null", (t) => {
  const json = render(DescribeMediaResponseSchema, describeMessage({
    row: row(), kind: "external_link", inferredViewer: "website", proxyNote: "n", downloadable: false,
    proxyUrls: { mainUrl: "https://e.com/a", thumbnailUrl: null, backgroundImageUrl: null },
  }));
  t.deepEqual(Object.keys(json), ["media", "kind", "inferred_viewer", "proxy_urls", "proxy_note", "downloadable"]);
  t.deepEqual(json.proxy_urls, { main_url: "https://e.com/a", thumbnail_url: null, background_image_url: null });
});

test("media.delete and media.text_note.delete: a preview or the deletion, never both", (t) => {
  t.deepEqual(render(DeleteMediaResponseSchema, deleteMessage({ dryRun: true, mode: "hard", mediaIds: [1, 2] })),
    { dry_run: true, mode: "hard", would_delete: { media_ids: [1, 2], count: 2 } });
  t.deepEqual(render(DeleteMediaResponseSchema, deleteMessage({ dryRun: false, mode: "soft", mediaIds: [1] })),
    { deleted: true, mode: "soft", media_ids: [1], count: 1 });
  t.deepEqual(render(DeleteTextNoteResponseSchema, noteDeleteMessage({ dryRun: true, row: row() })),
    { dry_run: true, would_delete: { media_id: 7, name: null, collection_id: 3 } });
  t.deepEqual(render(DeleteTextNoteResponseSchema, noteDeleteMessage({ dryRun: false, row: row() })), { deleted: true, media_id: 7 });
});

test("media.thumbnail_finalize: noop only when nothing was done", (t) => {
  t.deepEqual(Object.keys(render(FinalizeThumbnailResponseSchema, finalizeMessage({ row: row(), noop: false }))), ["media"]);
  t.is(render(FinalizeThumbnailResponseSchema, finalizeMessage({ row: row(), noop: true })).noop, true);
});

test("media.text_note.get: text_note and display_mode beside the row", (t) => {
  const json = render(GetTextNoteResponseSchema, textNoteMessage(row({ main_url: "inline://text-note", text_note: "hi", display_mode: "markdown" })));
  t.deepEqual(Object.keys(json), ["media", "text_note", "display_mode"]);
  t.is(json.display_mode, "markdown");
});

test("media.get_upload_url: the targets first; flow only for purpose=media, media only in the one-call flow", (t) => {
  const targets = {
    upload_url: "u", byte_upload_url: "b", store_key: "store://k", method: "PUT" as const, headers: { "Content-Type": "image/png", "Content-Length": "5" },
    expires_at: at, max_bytes: 104857600,
  };
  const thumb = render(GetMediaUploadUrlResponseSchema, uploadUrlMessage({ targets, purpose: "thumbnail", nextStep: "s" }));
  t.deepEqual(thumb, {
    upload_url: "u", byte_upload_url: "b", store_key: "store://k", method: "PUT", headers: { "Content-Type": "image/png", "Content-Length": "5" },
    expires_at: "2026-11-24T06:21:15.123Z", max_bytes: 104857600, purpose: "thumbnail", next_step: "s",
  });
  const classic = render(GetMediaUploadUrlResponseSchema, uploadUrlMessage({ targets, purpose: "media", flow: "classic", nextStep: "s" }));
  t.deepEqual(Object.keys(classic).slice(7), ["purpose", "flow", "next_step"]);
  const oneCall = render(GetMediaUploadUrlResponseSchema, uploadUrlMessage({ targets, purpose: "media", flow: "one_call", row: row(), nextStep: "s" }));
  t.deepEqual(Object.keys(oneCall).slice(7), ["purpose", "flow", "media", "next_step"]);
});

test("media.download_url: unknown content type and size are null", (t) => {
  const json = render(GetDownloadUrlResponseSchema, downloadLinkMessage({
    url: "u", expiresAt: at, mediaId: 7, filename: "a.bin", contentType: null, sizeBytes: null, hint: "h",
  }));
  t.deepEqual(json, { url: "u", method: "GET", expires_at: "2026-11-24T06:21:15.123Z", media_id: 7, filename: "a.bin", content_type: null, size_bytes: null, hint: "h" });
});
