/** The CSV form of collections.export: one row of media metadata per item. */
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Media } from "@cms/contracts/media/v1/resources_pb";

export const EXPORT_COLUMNS = ["id", "name", "description", "viewer", "main_url", "thumbnail_url", "tags", "position", "is_archived", "size_bytes", "created_at"];

/** The cells of one item under EXPORT_COLUMNS (toCsv quotes and joins them). */
export function exportCells(m: Media): Record<string, unknown> {
  return {
    id: m.id,
    name: m.name,
    description: m.description,
    viewer: m.viewer,
    main_url: m.mainUrl,
    thumbnail_url: m.thumbnailUrl,
    tags: m.tags,
    position: m.position,
    is_archived: m.isArchived,
    size_bytes: m.sizeBytes,
    created_at: m.createdAt ? timestampDate(m.createdAt) : undefined,
  };
}
