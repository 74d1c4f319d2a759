/** The contract's JSON shape of a collection, and the rows it is built from. */
import type { AccessLevel } from "./rules.js";

export interface CollectionRow {
  id: number;
  user_id: string;
  name: string;
  description: string | null;
  tags: string[];
  thumbnail_url: string | null;
  cover_thumbnail_url: string | null;
  is_nsfw: boolean;
  share_access_level: AccessLevel;
  share_access_configured: boolean;
  searchable: boolean;
  is_published: boolean;
  published_at: Date | null;
  share_slug: string | null;
  share_id: string;
  publish_alias_id: string | null;
  publish_handle: string | null;
  open_fullscreen: boolean;
  playback_prefs: Record<string, unknown> | null;
  position: number;
  is_archived: boolean;
  is_deleted: boolean;
  deleted_at: Date | null;
  deleted_with: number | null;
  parent_id: number | null;
  views: number;
  likes: number;
  created_at: Date;
  updated_at: Date;
}

/**
 * Columns read into a CollectionRow: everything but the generated search columns, which are
 * only used in WHERE clauses and are costly to transfer and parse (tsvector text).
 */
export const COLLECTION_COLUMNS: string[] = [
  "id", "user_id", "name", "description", "tags", "thumbnail_url", "cover_thumbnail_url", "is_nsfw",
  "share_access_level", "share_access_configured", "searchable", "is_published", "published_at", "share_slug",
  "share_id", "publish_alias_id", "publish_handle", "open_fullscreen", "playback_prefs", "position", "is_archived",
  "is_deleted", "deleted_at", "deleted_with", "parent_id", "views", "likes", "created_at", "updated_at",
];

/** The same columns qualified by a table alias, for raw SQL. */
export function columnsOf(alias: string): string {
  return COLLECTION_COLUMNS.map((c) => `${alias}.${c}`).join(", ");
}

export const SELECTABLE_FIELDS = [
  "id", "name", "description", "tags", "thumbnail_url", "created_at", "share_id", "user_id", "position",
  "share_access_level", "is_nsfw", "is_archived", "is_subcollection", "open_fullscreen", "viewer_permissions",
] as const;

export interface ViewerPermissions {
  is_owner: boolean;
  can_read: boolean;
  can_upload: boolean;
  can_edit: boolean;
  can_delete: boolean;
}

export function shareUrl(appUrl: string, row: Pick<CollectionRow, "is_published" | "publish_handle" | "share_slug">): string | null {
  if (!row.is_published || !row.publish_handle || !row.share_slug) return null;
  return `${appUrl}/${encodeURIComponent(row.publish_handle)}/${encodeURIComponent(row.share_slug)}`;
}

export function collectionJson(row: CollectionRow, appUrl: string): Record<string, unknown> {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    tags: row.tags ?? [],
    thumbnail_url: row.thumbnail_url,
    cover_thumbnail_url: row.cover_thumbnail_url,
    is_nsfw: row.is_nsfw,
    share_access_level: row.share_access_level,
    searchable: row.searchable,
    is_published: row.is_published,
    share_slug: row.share_slug,
    share_url: shareUrl(appUrl, row),
    // The publish handle when it is an alias; null means the system username.
    created_with_username: row.publish_alias_id ? row.publish_handle : null,
    publish_handle: row.publish_handle,
    open_fullscreen: row.open_fullscreen,
    playback_prefs: row.playback_prefs,
    position: row.position,
    is_archived: row.is_archived,
    is_deleted: row.is_deleted,
    deleted_at: row.deleted_at,
    is_subcollection: row.parent_id !== null,
    parent_collection_id: row.parent_id,
    share_id: row.share_id,
    user_id: row.user_id,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** Only the requested fields (collections.list `fields`), viewer_permissions computed. */
export function selectFields(row: CollectionRow, fields: readonly string[], perms: ViewerPermissions, appUrl: string): Record<string, unknown> {
  const full = collectionJson(row, appUrl);
  const out: Record<string, unknown> = {};
  for (const f of fields) out[f] = f === "viewer_permissions" ? perms : full[f];
  return out;
}

export function parseFields(input: unknown): string[] | undefined {
  if (input === undefined || input === null) return undefined;
  const list = Array.isArray(input) ? input.map(String) : String(input).split(",").map((s) => s.trim()).filter(Boolean);
  return list;
}
