/**
 * Pieces shared by every route that makes or changes rows: appending a row to its collection
 * inside a unit of work, updating one with its events in one statement, and turning a stored
 * object into a media item exactly as media.create does with an object-store key (media.upload,
 * the chunked upload, drop links).
 */
import { AppError, emitCollectionUpdated, type Caller, type EventWriter } from "@cms/platform";
import type { MediaRow } from "../domain/media-row.js";
import type { MediaPatch, NewMedia } from "../store/media-store.js";
import type { MediaStores } from "../store/stores.js";
import type { Ingest } from "./ingest.js";
import type { MediaDeps } from "./ports.js";

/** A row to append: everything but its position, which the end of its collection gives. */
export type RowToAppend = Omit<NewMedia, "position">;

/**
 * Inserts a row at the end of its collection, inside the caller's unit of work (positions stay
 * dense under concurrency: the collection is locked first), with its collection.updated.
 */
export async function appendRow({ media }: MediaStores, events: EventWriter, row: RowToAppend): Promise<MediaRow> {
  await media.lockCollections([row.collection_id]);
  const position = await media.nextPosition(row.collection_id);
  const inserted = await media.insert({ ...row, position });
  await emitCollectionUpdated(events, { collectionId: row.collection_id, kind: "media_added" });
  return inserted;
}

/** The fields a stored file's item takes from its caller rather than from its bytes. */
export interface ItemFields { name?: string | null; description?: string | null; tags: string[]; sha256: string | null }

/** A row made from a stored object, and the thumbnails made for it (to remove if the row is not written). */
export interface PreparedItem { row: RowToAppend; made: string[] }

/** Row making over the unit of work and ingesting. */
export function createStoredFiles(
  { stores, unitOfWork, oneStatementUnit }: Pick<MediaDeps, "stores" | "unitOfWork" | "oneStatementUnit">, ingest: Ingest,
) {
  /** Appends a row in a unit of its own. */
  function insertRow(row: RowToAppend): Promise<MediaRow> {
    return unitOfWork((unit, events) => appendRow(unit, events, row));
  }

  /**
   * A row's update and its events, sent as one statement (the hot writes of one row: an edit, a
   * thumbnail's finalize). The row may have been purged since it was read: not_found then.
   */
  async function updateRow(id: number, patch: MediaPatch, emit: (events: EventWriter) => Promise<void>): Promise<MediaRow> {
    const [row] = await oneStatementUnit(stores.media.updating(id, patch), emit);
    if (!row) throw new AppError("not_found", `Media ${id} does not exist or is not accessible.`);
    return row;
  }

  /**
   * The item of an object already stored under key: sniffing, viewer and thumbnails come from
   * ingestSource (as media.create with source_url=<store_key>). Nothing is written yet.
   */
  async function prepareItem(caller: Caller, ownerUserId: string, collectionId: number, key: string, fields: ItemFields): Promise<PreparedItem> {
    const ingested = await ingest.ingestSource(caller, ownerUserId, collectionId, key, undefined, true);
    return {
      row: {
        collection_id: collectionId,
        owner_user_id: ownerUserId,
        created_by: caller.userId,
        name: fields.name ?? null,
        description: fields.description ?? null,
        tags: fields.tags,
        main_url: ingested.main_url,
        viewer: ingested.viewer,
        mime_type: ingested.mime_type,
        size_bytes: ingested.size_bytes,
        sha256: fields.sha256 ?? ingested.sha256,
        thumbnail_url: ingested.thumbnail_url ?? null,
        background_image_url: ingested.background_image_url ?? null,
      },
      made: [ingested.thumbnail_url, ingested.background_image_url].filter((k): k is string => Boolean(k)),
    };
  }

  /** Creates the item of a stored object; thumbnails made for a row that then fails to insert are removed again. */
  async function createItemFromStored(caller: Caller, ownerUserId: string, collectionId: number, key: string, fields: ItemFields): Promise<MediaRow> {
    const item = await prepareItem(caller, ownerUserId, collectionId, key, fields);
    try {
      return await insertRow(item.row);
    } catch (err) {
      await ingest.removeObjects(item.made);
      throw err;
    }
  }

  return { insertRow, updateRow, prepareItem, createItemFromStored };
}

/** Row making shared by the routes that bring files in. */
export type StoredFiles = ReturnType<typeof createStoredFiles>;
