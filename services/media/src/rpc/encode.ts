/** Media rows as the typed messages of the contract (media.v1.Media). */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { MediaSchema } from "@cms/contracts/media/v1/resources_pb";
import type { MediaRow } from "../domain/media-json.js";

const big = (n: number | string | null | undefined) => (n === null || n === undefined ? undefined : BigInt(n));
const opt = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

export function mediaMessage(row: MediaRow): MessageInitShape<typeof MediaSchema> {
  return {
    id: BigInt(row.id),
    collectionId: BigInt(row.collection_id),
    name: opt(row.name),
    description: opt(row.description),
    tags: row.tags ?? [],
    mainUrl: row.main_url,
    viewer: row.viewer,
    mimeType: opt(row.mime_type),
    sizeBytes: big(row.size_bytes),
    sha256: opt(row.sha256),
    thumbnailUrl: opt(row.thumbnail_url),
    backgroundImageUrl: opt(row.background_image_url),
    note: row.text_note !== null ? { textNote: row.text_note, displayMode: opt(row.display_mode), placeholderKind: opt(row.placeholder_kind) } : undefined,
    linkedCollectionId: big(row.linked_collection_id),
    position: row.position,
    isArchived: row.is_archived,
    isDeleted: row.is_deleted,
    createdBy: row.created_by,
    createdAt: timestampFromDate(new Date(row.created_at)),
    updatedAt: timestampFromDate(new Date(row.updated_at)),
  };
}
