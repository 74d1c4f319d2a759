/**
 * A media row as the application sees it (the store reads and writes it, the rpc layer encodes
 * it as media.v1.Media), sub-collection link rows, and the page of a list.
 */

/** One media row: a file, a link, a text note or a sub-collection link row. */
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
  /** The object-store key the thumbnail pair was made from (no longer stored), else null. */
  thumbnail_source: string | null;
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

/** The viewer of a sub-collection's link row. */
export const LINK_VIEWER = "collection";

/** The main_url of the link row that shows a sub-collection inside its parent. */
export function linkUrl(childCollectionId: number): string {
  return `collection://${childCollectionId}`;
}

/** The page of a list operation. */
export interface Page { limit: number; offset: number; total: number }
