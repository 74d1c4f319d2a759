/** A media row as stored (the rpc layer encodes it as media.v1.Media), and the page of a list. */

export interface MediaRow {
  id: number;
  collection_id: number;
  owner_user_id: string;
  created_by: string;
  name: string | null;
  description: string | null;
  tags: string[];
  main_url: string;
  viewer: string;
  mime_type: string | null;
  size_bytes: number | null;
  sha256: string | null;
  thumbnail_url: string | null;
  background_image_url: string | null;
  text_note: string | null;
  display_mode: string | null;
  placeholder_kind: string | null;
  linked_collection_id: number | null;
  position: number;
  is_archived: boolean;
  is_deleted: boolean;
  deleted_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** Columns of a MediaRow (the generated search_text column is left out: WHERE clauses only). */
export const MEDIA_COLUMNS = [
  "id", "collection_id", "owner_user_id", "created_by", "name", "description", "tags", "main_url", "viewer", "mime_type",
  "size_bytes", "sha256", "thumbnail_url", "background_image_url", "text_note", "display_mode", "placeholder_kind",
  "linked_collection_id", "position", "is_archived", "is_deleted", "deleted_at", "created_at", "updated_at",
];

export const LINK_VIEWER = "collection";

export function linkUrl(childCollectionId: number): string {
  return `collection://${childCollectionId}`;
}

/** The page of a list operation. */
export interface Page { limit: number; offset: number; total: number }
