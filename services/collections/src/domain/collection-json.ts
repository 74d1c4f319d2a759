/** Collection rows, the columns they are read from, the selectable fields and the share URL. */
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

/** Field names collections.list `fields` may select (fields of collections.v1.Collection). */
export const SELECTABLE_FIELDS = [
  "id", "name", "description", "tags", "thumbnail_url", "created_at", "share_id", "user_id", "position",
  "share_access_level", "is_nsfw", "is_archived", "is_subcollection", "open_fullscreen", "viewer_permissions",
] as const;

/** What a caller may do on a collection. */
export interface ViewerPermissions {
  is_owner: boolean;
  can_read: boolean;
  can_upload: boolean;
  can_edit: boolean;
  can_delete: boolean;
}

/** {app_url}/{publish handle}/{slug} while published; null otherwise. */
export function shareUrl(appUrl: string, row: Pick<CollectionRow, "is_published" | "publish_handle" | "share_slug">): string | null {
  if (!row.is_published || !row.publish_handle || !row.share_slug) return null;
  return `${appUrl}/${encodeURIComponent(row.publish_handle)}/${encodeURIComponent(row.share_slug)}`;
}

/** collections.list `fields`: a comma-separated string or an array of names; undefined when omitted. */
export function parseFields(input: unknown): string[] | undefined {
  if (input === undefined || input === null) return undefined;
  const list = Array.isArray(input) ? input.map(String) : String(input).split(",").map((s) => s.trim()).filter(Boolean);
  return list;
}
