/**
 * Domain values as the typed messages of the contract (collections.v1 resources and responses).
 * The gateway renders them; which keys are null and which are left out follows from the
 * (common.v1.field) options of the messages and from what these encoders leave unset.
 */
import type { DescMessage, JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import type { PaginationSchema } from "@cms/contracts/common/v1/common_pb";
import { timestampOf } from "@cms/platform";
import type {
  CollaboratorSchema, Collection, CollectionHitSchema, InviteSchema, ReceivedInviteSchema, SentInviteSchema, UploadTargetsSchema,
} from "@cms/contracts/collections/v1/resources_pb";
import type {
  DeleteCollectionResponseSchema, ListCollectionsResponseSchema, RestoreCollectionResponseSchema, SearchCollectionsResponseSchema,
} from "@cms/contracts/collections/v1/collections_pb";
import type { UploadTargets } from "@cms/platform/upload-urls";
import { shareUrl, type CollectionRow, type ViewerPermissions } from "../domain/collection-json.js";
import type { CollectionList, Page } from "../app/crud.js";
import type { Hit, SearchResult } from "../app/discovery.js";
import type { DeleteOutcome, RestoreOutcome } from "../app/lifecycle.js";
import type { CollaboratorRow } from "../domain/invites.js";

type Init<T extends DescMessage> = MessageInitShape<T>;

const opt = <T>(v: T | null): T | undefined => (v === null ? undefined : v);
const ts = (d: Date | string) => timestampOf(d);
const optTs = (d: Date | string | null | undefined) => (d === null || d === undefined ? undefined : ts(d));

/** A complete Collection message (lists carry hundreds: no create() copy). */
export function collectionMessage(row: CollectionRow, appUrl: string, perms?: ViewerPermissions): Collection {
  return {
    $typeName: "collections.v1.Collection",
    id: BigInt(row.id),
    name: row.name,
    description: opt(row.description),
    tags: row.tags ?? [],
    thumbnailUrl: opt(row.thumbnail_url),
    coverThumbnailUrl: opt(row.cover_thumbnail_url),
    isNsfw: row.is_nsfw,
    shareAccessLevel: row.share_access_level,
    searchable: row.searchable,
    isPublished: row.is_published,
    shareSlug: opt(row.share_slug),
    shareUrl: opt(shareUrl(appUrl, row)),
    createdWithUsername: row.publish_alias_id ? opt(row.publish_handle) : undefined,
    publishHandle: opt(row.publish_handle),
    openFullscreen: row.open_fullscreen,
    playbackPrefs: opt(row.playback_prefs as JsonObject | null),
    position: row.position,
    isArchived: row.is_archived,
    isDeleted: row.is_deleted,
    deletedAt: row.deleted_at ? timestampOf(row.deleted_at) : undefined,
    isSubcollection: row.parent_id !== null,
    parentCollectionId: row.parent_id === null ? undefined : BigInt(row.parent_id),
    shareId: row.share_id,
    userId: row.user_id,
    createdAt: timestampOf(row.created_at),
    updatedAt: timestampOf(row.updated_at),
    viewerPermissions: perms ? {
      $typeName: "collections.v1.ViewerPermissions", isOwner: perms.is_owner, canRead: perms.can_read, canUpload: perms.can_upload, canEdit: perms.can_edit, canDelete: perms.can_delete,
    } : undefined,
  };
}

export function paginationMessage(page: Page): Init<typeof PaginationSchema> {
  return { limit: page.limit, offset: page.offset, total: BigInt(page.total) };
}

/**
 * collections.list: whole collections without viewer_permissions; with `fields`, the mask that
 * makes the renderer show only those fields in that order, and viewer_permissions set on the
 * items only when it is selected.
 */
export function listResponse(list: CollectionList, appUrl: string): Init<typeof ListCollectionsResponseSchema> {
  return {
    collections: list.items.map((i) => collectionMessage(i.row, appUrl, i.perms)),
    pagination: paginationMessage(list.page),
    fields: list.fields ? { paths: list.fields } : undefined,
  };
}

export function hitMessage(hit: Hit, appUrl: string): Init<typeof CollectionHitSchema> {
  return { collection: collectionMessage(hit.row, appUrl), isOwn: hit.isOwn };
}

/** collections.search: also_in_public and hint only when the search set them. */
export function searchResponse(res: SearchResult, appUrl: string): Init<typeof SearchCollectionsResponseSchema> {
  return {
    collections: res.hits.map((h) => hitMessage(h, appUrl)),
    scope: res.scope,
    pagination: paginationMessage(res.page),
    alsoInPublic: res.alsoInPublic,
    hint: res.hint,
  };
}

/** collections.delete: the preview, soft or hard shape. */
export function deleteResponse(out: DeleteOutcome): Init<typeof DeleteCollectionResponseSchema> {
  const ids = out.collectionIds.map(BigInt);
  switch (out.kind) {
    case "preview":
      return {
        outcome: {
          case: "preview",
          value: {
            dryRun: true,
            mode: out.mode,
            wouldDelete: { collectionIds: ids, collections: ids.length, mediaCount: BigInt(out.mediaCount) },
            restorableUntil: optTs(out.restorableUntil),
            blocked: out.blocked,
          },
        },
      };
    case "soft":
      return {
        outcome: {
          case: "soft",
          value: { deleted: true, mode: "soft", collectionId: BigInt(out.collectionId), deletedCollectionIds: ids, deletedMedia: BigInt(out.media), restorableUntil: ts(out.restorableUntil) },
        },
      };
    case "hard":
      return {
        outcome: {
          case: "hard",
          value: { deleted: true, mode: "hard", collectionId: BigInt(out.collectionId), removedCollectionIds: ids, removedMedia: BigInt(out.media) },
        },
      };
  }
}

/** collections.restore: the preview or the restore. */
export function restoreResponse(out: RestoreOutcome, appUrl: string): Init<typeof RestoreCollectionResponseSchema> {
  if (out.kind === "preview") {
    return { outcome: { case: "preview", value: { dryRun: true, restorableUntil: ts(out.restorableUntil), collection: collectionMessage(out.row, appUrl) } } };
  }
  return {
    outcome: {
      case: "restored",
      value: { restored: true, collection: collectionMessage(out.row, appUrl), restoredCollectionIds: out.collectionIds.map(BigInt), restorableUntil: ts(out.restorableUntil) },
    },
  };
}

export function uploadTargetsMessage(t: UploadTargets): Init<typeof UploadTargetsSchema> {
  return {
    uploadUrl: t.upload_url,
    byteUploadUrl: t.byte_upload_url,
    storeKey: t.store_key,
    method: t.method,
    headers: t.headers,
    expiresAt: ts(t.expires_at),
    maxBytes: BigInt(t.max_bytes),
  };
}

/** The invite part every invite view shares; responded_at null while pending. */
export function inviteMessage(r: CollaboratorRow): Init<typeof InviteSchema> {
  return {
    collectionId: BigInt(r.collection_id),
    userId: r.user_id,
    inviterUserId: r.inviter_user_id,
    status: r.status,
    canUpload: r.can_upload,
    canEdit: r.can_edit,
    canDelete: r.can_delete,
    createdAt: ts(r.created_at),
    respondedAt: optTs(r.responded_at),
  };
}

/** A pending invite the caller sent: username null when auth does not know the invited user. */
export function sentInviteMessage(i: { row: CollaboratorRow; username: string | null; collectionName: string }): Init<typeof SentInviteSchema> {
  return { invite: inviteMessage(i.row), username: opt(i.username), collectionName: i.collectionName };
}

/** A pending invite the caller received: inviter_username null when auth does not know the inviter. */
export function receivedInviteMessage(i: { row: CollaboratorRow; collectionName: string; inviterUsername: string | null }): Init<typeof ReceivedInviteSchema> {
  return { invite: inviteMessage(i.row), collectionName: i.collectionName, inviterUsername: opt(i.inviterUsername) };
}

/** An accepted collaborator; username null when unknown, accepted_at is when the invite was accepted. */
export function collaboratorMessage(r: CollaboratorRow, username: string | null): Init<typeof CollaboratorSchema> {
  return {
    userId: r.user_id,
    username: opt(username),
    canUpload: r.can_upload,
    canEdit: r.can_edit,
    canDelete: r.can_delete,
    acceptedAt: optTs(r.responded_at),
  };
}
