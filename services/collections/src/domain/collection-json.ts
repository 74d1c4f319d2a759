/** Collection rows, the selectable fields, viewer permissions and the share URL. */
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

/** An accepted collaborator's flags on a collection. */
export interface Membership { can_upload: boolean; can_edit: boolean; can_delete: boolean }

/** What `userId` may do on the collection: everything as its owner, the flags as a collaborator, else nothing. */
export function permissionsOf(row: Pick<CollectionRow, "user_id">, userId: string | undefined, m: Membership | undefined): ViewerPermissions {
  if (userId && row.user_id === userId) return { is_owner: true, can_read: true, can_upload: true, can_edit: true, can_delete: true };
  if (m) return { is_owner: false, can_read: true, ...m };
  return { is_owner: false, can_read: false, can_upload: false, can_edit: false, can_delete: false };
}

/**
 * Whether a published collection shows at its share URL to a viewer: to anyone when public, to
 * any signed-in user when registered, otherwise only to the owner and collaborators.
 */
export function visibleOnPage(row: Pick<CollectionRow, "share_access_level">, perms: ViewerPermissions, signedIn: boolean): boolean {
  return perms.can_read || row.share_access_level === "public" || (row.share_access_level === "registered" && signedIn);
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
