/**
 * Pieces shared by every route that makes or changes rows: appending a row to its collection
 * inside a unit of work, updating one with its events in one statement, and turning a stored
 * object into a media item exactly as media.create does with an object-store key (media.upload,
 * the chunked upload, drop links).
 */
import { AppError, emitCollectionUpdated, emitObjectsOrphaned, type Caller, type EventWriter, type ObjectStore } from "@cms/platform";
import type { MediaRow } from "../domain/media-row.js";
import { OBJECT_COLUMNS, storeKeysOf, type MediaPatch, type NewMedia, type ObjectColumnValues } from "../store/media-store.js";
import type { MediaStores } from "../store/stores.js";
import { mediaNotFound } from "./access.js";
import type { Ingest } from "./ingest.js";
import type { MediaDeps } from "./ports.js";

/**
 * How many times updateRow writes over a row whose stored objects other writes keep replacing
 * before it answers conflict. An attempt fails only when another write was applied meanwhile, so
 * of n writes of one row at once the last applies at its n-th attempt at worst.
 */
const UPDATE_ATTEMPTS = 20;

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

/**
 * Deletes rows inside the caller's unit of work and hands what they named as they went to
 * media.objects.orphaned (objects no other row, pending upload nor cover uses are removed after
 * the commit). What the rows named is the DELETE's own answer, not an earlier read: a thumbnail
 * finalized since is not left behind.
 */
export async function removeRows({ media }: MediaStores, events: EventWriter, ids: number[]): Promise<void> {
  await emitObjectsOrphaned(events, storeKeysOf(await media.remove(ids)));
}

/**
 * Inside the caller's unit of work, before a row is made to name an object already stored under
 * `key` (media.create or media.replace with an object-store key): the key is locked against the
 * object cleanup until the commit, and the object must still be there. Without it, a hard delete
 * of the last row naming it, and the cleanup after it, could run between ingesting's read of the
 * object and the commit, and the new row would name an object that is gone.
 */
export async function adoptStoredObject({ media }: MediaStores, objects: ObjectStore, key: string): Promise<void> {
  await media.lockStoreKeys([key], "share");
  if (!(await objects.head(key))) {
    throw new AppError("invalid_request", "source_url names an object that was removed meanwhile: the last item naming it was deleted.", { field: "source_url" });
  }
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
   * thumbnail's finalize), over the row `cur` is a read of. The stored objects the patch replaces
   * (cur's values of the object columns it sets) and `orphaned` go to media.objects.orphaned, then
   * `emit` adds the write's own events. The update applies only while those columns still hold
   * cur's values: when another write replaced them since cur was read (two finalizes of one item),
   * it is made again over the row as it now is, or the objects that write stored would be named by
   * no row and by no event. The row may have been purged since it was read: not_found then.
   */
  async function updateRow(cur: MediaRow, patch: MediaPatch, emit: (events: EventWriter) => Promise<void>, orphaned: Array<string | null | undefined> = []): Promise<MediaRow> {
    const id = Number(cur.id);
    const columns = OBJECT_COLUMNS.filter((c) => patch[c] !== undefined);
    for (let attempt = 1, read = cur; ; attempt++) {
      const unchanged: ObjectColumnValues = Object.fromEntries(columns.map((c) => [c, read[c]]));
      const [row] = await oneStatementUnit(stores.media.updating(id, patch, unchanged), async (events) => {
        await emitObjectsOrphaned(events, [...Object.values(unchanged), ...orphaned]);
        await emit(events);
      });
      if (row) return row;
      const now = columns.length ? await stores.media.byId(id) : undefined;
      if (!now) throw mediaNotFound(id);
      if (attempt === UPDATE_ATTEMPTS) throw new AppError("conflict", `Media ${id} kept changing while this change was written; send it again.`);
      read = now;
    }
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
