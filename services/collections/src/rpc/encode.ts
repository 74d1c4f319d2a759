/** Collection rows as the typed messages of the contract (collections.v1.Collection). */
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { CollectionSchema } from "@cms/contracts/collections/v1/resources_pb";
import { shareUrl, type CollectionRow, type ViewerPermissions } from "../domain/collection-json.js";

const opt = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

export function collectionMessage(row: CollectionRow, appUrl: string, perms?: ViewerPermissions): MessageInitShape<typeof CollectionSchema> {
  return {
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
    deletedAt: row.deleted_at ? timestampFromDate(new Date(row.deleted_at)) : undefined,
    isSubcollection: row.parent_id !== null,
    parentCollectionId: row.parent_id === null ? undefined : BigInt(row.parent_id),
    shareId: row.share_id,
    userId: row.user_id,
    createdAt: timestampFromDate(new Date(row.created_at)),
    updatedAt: timestampFromDate(new Date(row.updated_at)),
    viewerPermissions: perms ? { isOwner: perms.is_owner, canRead: perms.can_read, canUpload: perms.can_upload, canEdit: perms.can_edit, canDelete: perms.can_delete } : undefined,
  };
}
