/**
 * The encoders of the typed responses, rendered the way the gateway renders them (after a binary
 * round trip, as over the wire): which keys are null, which are left out, and in what order.
 */
import test from "ava";
import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import {
  AcceptInviteResponseSchema, DeleteCollectionResponseSchema, GetCollectionResponseSchema, GetCollectionUploadUrlResponseSchema,
  ListCollaboratorsResponseSchema, ListCollectionsResponseSchema, ListReceivedInvitesResponseSchema, ListSentInvitesResponseSchema,
  RestoreCollectionResponseSchema, SearchCollectionsResponseSchema,
} from "@cms/contracts/collections/v1/collections_pb";
import { renderObject } from "@cms/gateway/render";
import type { CollectionRow } from "../src/domain/collection-json.js";
import type { CollaboratorRow } from "../src/domain/invites.js";
import {
  collaboratorMessage, collectionMessage, deleteResponse, inviteMessage, listResponse, receivedInviteMessage, restoreResponse, searchResponse,
  sentInviteMessage, uploadTargetsMessage,
} from "../src/rpc/encode.js";

const APP = "https://app.example";
const T0 = new Date("2026-11-20T10:00:00.123Z");
const T1 = new Date("2026-11-27T10:00:00.000Z");
const OWNER = { is_owner: true, can_read: true, can_upload: true, can_edit: true, can_delete: true };

function render<D extends DescMessage>(schema: D, init: MessageInitShape<D>): Record<string, any> {
  const wire = toBinary(schema, create(schema, init));
  return renderObject(schema, fromBinary(schema, wire));
}

function row(over: Partial<CollectionRow> = {}): CollectionRow {
  return {
    id: 7, user_id: "u-1", name: "Trip", description: null, tags: [], thumbnail_url: null, cover_thumbnail_url: null, is_nsfw: false,
    share_access_level: "private", share_access_configured: false, searchable: false, is_published: false, published_at: null,
    share_slug: null, share_id: "s-1", publish_alias_id: null, publish_handle: null, open_fullscreen: false, playback_prefs: null,
    position: 0, is_archived: false, is_deleted: false, deleted_at: null, deleted_with: null, parent_id: null, views: 0, likes: 0,
    created_at: T0, updated_at: T0, ...over,
  };
}

const COLLECTION_KEYS = [
  "id", "name", "description", "tags", "thumbnail_url", "cover_thumbnail_url", "is_nsfw", "share_access_level", "searchable", "is_published",
  "share_slug", "share_url", "created_with_username", "publish_handle", "open_fullscreen", "playback_prefs", "position", "is_archived",
  "is_deleted", "deleted_at", "is_subcollection", "parent_collection_id", "share_id", "user_id", "created_at", "updated_at",
];

test("a collection: every key present, unset ones null, viewer_permissions only when given", (t) => {
  const c = render(GetCollectionResponseSchema, { collection: collectionMessage(row(), APP) }).collection;
  t.deepEqual(Object.keys(c), COLLECTION_KEYS);
  for (const k of ["description", "thumbnail_url", "share_slug", "share_url", "created_with_username", "playback_prefs", "deleted_at", "parent_collection_id"]) {
    t.is(c[k], null, k);
  }
  t.is(c.id, 7);
  t.is(c.created_at, "2026-11-20T10:00:00.123Z");
  const withPerms = render(GetCollectionResponseSchema, { collection: collectionMessage(row(), APP, OWNER) }).collection;
  t.deepEqual(Object.keys(withPerms), [...COLLECTION_KEYS, "viewer_permissions"]);
  t.deepEqual(withPerms.viewer_permissions, OWNER);
});

test("a published sub-collection under an alias: share_url, created_with_username, parent, prefs in stored order", (t) => {
  const prefs = { loop: false, kinds: { audio: true, embed: false }, shuffle: false, interval_seconds: 5 };
  const c = render(GetCollectionResponseSchema, {
    collection: collectionMessage(row({ is_published: true, share_slug: "my trip", publish_handle: "ann-art", publish_alias_id: "a-1", parent_id: 3, playback_prefs: prefs, deleted_at: T1 }), APP),
  }).collection;
  t.is(c.share_url, "https://app.example/ann-art/my%20trip");
  t.is(c.created_with_username, "ann-art");
  t.is(c.parent_collection_id, 3);
  t.true(c.is_subcollection);
  t.deepEqual(JSON.stringify(c.playback_prefs), JSON.stringify(prefs));
  t.is(c.deleted_at, "2026-11-27T10:00:00.000Z");
});

test("collections.list: whole items without fields; with fields only those keys, in the requested order", (t) => {
  const page = { limit: 100, offset: 0, total: 1 };
  const whole = render(ListCollectionsResponseSchema, listResponse({ items: [{ row: row() }], page }, APP));
  t.deepEqual(Object.keys(whole), ["collections", "pagination"]);
  t.deepEqual(Object.keys(whole.collections[0]), COLLECTION_KEYS);
  t.deepEqual(whole.pagination, page);

  const sel = render(ListCollectionsResponseSchema, listResponse({ items: [{ row: row(), perms: OWNER }], fields: ["viewer_permissions", "name", "description", "id"], page }, APP));
  t.deepEqual(Object.keys(sel), ["collections", "pagination"]);
  t.deepEqual(sel.collections, [{ viewer_permissions: OWNER, name: "Trip", description: null, id: 7 }]);

  const none = render(ListCollectionsResponseSchema, listResponse({ items: [{ row: row() }, { row: row({ id: 8 }) }], fields: [], page }, APP));
  t.deepEqual(none.collections, [{}, {}]);
});

test("collections.search: isOwn on every hit; also_in_public and hint only when set", (t) => {
  const page = { limit: 20, offset: 0, total: 1 };
  const hit = render(SearchCollectionsResponseSchema, searchResponse({ hits: [{ row: row(), isOwn: true }], scope: ["own", "shared"], page }, APP));
  t.deepEqual(Object.keys(hit), ["collections", "scope", "pagination"]);
  t.deepEqual(Object.keys(hit.collections[0]), [...COLLECTION_KEYS, "isOwn"]);
  t.true(hit.collections[0].isOwn);
  const zero = render(SearchCollectionsResponseSchema, searchResponse({ hits: [], scope: ["public"], page: { ...page, total: 0 }, alsoInPublic: 0, hint: "No collection" }, APP));
  t.deepEqual(zero, { collections: [], scope: ["public"], pagination: { limit: 20, offset: 0, total: 0 }, also_in_public: 0, hint: "No collection" });
  const past = render(SearchCollectionsResponseSchema, searchResponse({ hits: [], scope: ["own"], page: { limit: 20, offset: 40, total: 3 }, hint: "The offset" }, APP));
  t.deepEqual(Object.keys(past), ["collections", "scope", "pagination", "hint"]);
});

test("collections.delete: the preview, soft and hard shapes", (t) => {
  t.deepEqual(render(DeleteCollectionResponseSchema, deleteResponse({ kind: "preview", mode: "hard", collectionIds: [4, 5], mediaCount: 3 })), {
    dry_run: true, mode: "hard", would_delete: { collection_ids: [4, 5], collections: 2, media_count: 3 },
  });
  t.deepEqual(render(DeleteCollectionResponseSchema, deleteResponse({ kind: "preview", mode: "soft", collectionIds: [4], mediaCount: 1, restorableUntil: T1, blocked: "collection_not_empty: x" })), {
    dry_run: true, mode: "soft", would_delete: { collection_ids: [4], collections: 1, media_count: 1 }, restorable_until: T1.toISOString(), blocked: "collection_not_empty: x",
  });
  t.deepEqual(render(DeleteCollectionResponseSchema, deleteResponse({ kind: "soft", collectionId: 4, collectionIds: [4, 5], media: 2, restorableUntil: T1 })), {
    deleted: true, mode: "soft", collection_id: 4, deleted_collection_ids: [4, 5], deleted_media: 2, restorable_until: T1.toISOString(),
  });
  t.deepEqual(JSON.stringify(render(DeleteCollectionResponseSchema, deleteResponse({ kind: "hard", collectionId: 4, collectionIds: [4], media: 0 }))),
    JSON.stringify({ deleted: true, mode: "hard", collection_id: 4, removed_collection_ids: [4], removed_media: 0 }));
});

test("collections.restore: the preview has restorable_until before the collection, the restore after", (t) => {
  const preview = render(RestoreCollectionResponseSchema, restoreResponse({ kind: "preview", restorableUntil: T1, row: row({ is_deleted: true, deleted_at: T0 }) }, APP));
  t.deepEqual(Object.keys(preview), ["dry_run", "restorable_until", "collection"]);
  t.true(preview.dry_run);
  t.true(preview.collection.is_deleted);
  const done = render(RestoreCollectionResponseSchema, restoreResponse({ kind: "restored", row: row(), collectionIds: [7, 9], restorableUntil: T1 }, APP));
  t.deepEqual(Object.keys(done), ["restored", "collection", "restored_collection_ids", "restorable_until"]);
  t.deepEqual(done.restored_collection_ids, [7, 9]);
});

const pending: CollaboratorRow = {
  collection_id: 7, user_id: "u-2", inviter_user_id: "u-1", status: "pending", can_upload: true, can_edit: false, can_delete: false,
  created_at: T0, responded_at: null,
};
const INVITE_KEYS = ["collection_id", "user_id", "inviter_user_id", "status", "can_upload", "can_edit", "can_delete", "created_at", "responded_at"];

test("invites: responded_at null while pending; the names each view adds, null when unknown, absent where the view has none", (t) => {
  const sent = render(ListSentInvitesResponseSchema, { invites: [sentInviteMessage({ row: pending, username: null, collectionName: "Trip" })] }).invites[0];
  t.deepEqual(Object.keys(sent), [...INVITE_KEYS, "username", "collection_name"]);
  t.is(sent.responded_at, null);
  t.is(sent.username, null);
  const received = render(ListReceivedInvitesResponseSchema, { invites: [receivedInviteMessage({ row: pending, collectionName: "Trip", inviterUsername: null })] }).invites[0];
  t.deepEqual(Object.keys(received), [...INVITE_KEYS, "collection_name", "inviter_username"]);
  t.is(received.inviter_username, null);
  const accepted = render(AcceptInviteResponseSchema, {
    invite: { invite: inviteMessage({ ...pending, status: "accepted", responded_at: T1 }), username: "bob", collectionName: "Trip" },
  }).invite;
  t.deepEqual(Object.keys(accepted), [...INVITE_KEYS, "username", "collection_name"]);
  t.is(accepted.responded_at, T1.toISOString());
});

test("collaborators.list: username null when unknown; accepted_at is when the invite was accepted", (t) => {
  const list = render(ListCollaboratorsResponseSchema, { collaborators: [collaboratorMessage({ ...pending, status: "accepted", responded_at: T1 }, null)] });
  t.deepEqual(list.collaborators, [{ user_id: "u-2", username: null, can_upload: true, can_edit: false, can_delete: false, accepted_at: T1.toISOString() }]);
});

test("collections.get_upload_url: the upload targets' keys in order, then next_step", (t) => {
  const res = render(GetCollectionUploadUrlResponseSchema, {
    targets: uploadTargetsMessage({
      upload_url: "https://s3/x", byte_upload_url: "https://api/storage/v1/upload/t", store_key: "store://u/7/k.png", method: "PUT",
      headers: { "Content-Type": "image/png", "Content-Length": "12" }, expires_at: T1, max_bytes: 20971520,
    }),
    nextStep: "PUT the bytes",
  });
  t.is(JSON.stringify(res), JSON.stringify({
    upload_url: "https://s3/x", byte_upload_url: "https://api/storage/v1/upload/t", store_key: "store://u/7/k.png", method: "PUT",
    headers: { "Content-Type": "image/png", "Content-Length": "12" }, expires_at: T1.toISOString(), max_bytes: 20971520, next_step: "PUT the bytes",
  }));
});
