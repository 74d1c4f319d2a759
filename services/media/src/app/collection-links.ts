/**
 * What the collections service asks of the media rows (internal RPCs): the link rows that show
 * a sub-collection inside its parent, media counts and the rows of an export. The collections
 * service calls these after its own commit and may call again (a retry, a compensation), so
 * inserting and moving a link are idempotent: calling again changes nothing.
 */
import { emitCollectionUpdated } from "@cms/platform";
import { LINK_VIEWER, linkUrl, type MediaRow } from "../domain/media-row.js";
import type { MediaStore } from "../store/media-store.js";
import type { MediaDeps } from "./ports.js";

/** A child collection's link row to place in its parent. */
export interface LinkInput { parentId: number; childId: number; ownerUserId: string; position?: number; description?: string }

/** A link row where it stands. */
export interface PlacedLink { id: number; position: number }

/** What MoveCollectionLink did: the link rows removed and the one in the new parent (none on detach). */
export interface MovedLink { removed: number[]; linkId?: number }

/** Inserts a child's link row into its parent at `position` (the end when unset or past it). */
async function insertLink(media: MediaStore, input: LinkInput): Promise<PlacedLink> {
  const end = await media.nextPosition(input.parentId);
  const position = input.position === undefined ? end : Math.min(input.position, end);
  if (position < end) await media.shiftPositions(input.parentId, position, 1);
  const row = await media.insert({
    collection_id: input.parentId,
    owner_user_id: input.ownerUserId,
    created_by: input.ownerUserId,
    name: null,
    description: input.description ?? null,
    main_url: linkUrl(input.childId),
    viewer: LINK_VIEWER,
    linked_collection_id: input.childId,
    position,
  });
  return { id: Number(row.id), position: row.position };
}

/** The internal use cases the collections service calls: link rows, counts, export. */
export function createCollectionLinks({ stores, unitOfWork }: Pick<MediaDeps, "stores" | "unitOfWork">) {
  /** InsertCollectionLink: the child's link row in the parent; a second call answers the row the first made. */
  function insertCollectionLink(input: LinkInput): Promise<PlacedLink> {
    return unitOfWork(async ({ media }, events) => {
      await media.lockCollections([input.parentId]);
      const existing = (await media.linkRowsOf(input.childId)).find((l) => Number(l.collection_id) === input.parentId);
      if (existing) return { id: Number(existing.id), position: existing.position };
      const link = await insertLink(media, input);
      await emitCollectionUpdated(events, { collectionId: input.parentId, kind: "media_added" });
      return link;
    });
  }

  /**
   * MoveCollectionLink: afterwards the child has one link row, in the new parent (appended at
   * its end), or none when detached; links elsewhere are removed. A link already in the new
   * parent stays where it is, so calling again changes nothing.
   */
  function moveCollectionLink(input: { childId: number; newParentId?: number; ownerUserId: string }): Promise<MovedLink> {
    return unitOfWork(async ({ media }, events) => {
      const seen = await media.linkRowsOf(input.childId);
      await media.lockCollections([...seen.map((l) => Number(l.collection_id)), ...(input.newParentId === undefined ? [] : [input.newParentId])]);
      const rows = await media.linkRowsOf(input.childId);
      const keep = input.newParentId === undefined ? undefined : rows.find((l) => Number(l.collection_id) === input.newParentId && !l.is_deleted);
      const removed = rows.filter((l) => l !== keep);
      await media.remove(removed.map((l) => Number(l.id)));
      for (const parent of new Set(removed.map((l) => Number(l.collection_id)))) {
        await media.renumber(parent);
        await emitCollectionUpdated(events, { collectionId: parent, kind: "media_removed" });
      }
      let linkId = keep === undefined ? undefined : Number(keep.id);
      if (input.newParentId !== undefined && keep === undefined) {
        linkId = (await insertLink(media, { parentId: input.newParentId, childId: input.childId, ownerUserId: input.ownerUserId })).id;
        await emitCollectionUpdated(events, { collectionId: input.newParentId, kind: "media_added" });
      }
      return { removed: removed.map((l) => Number(l.id)), linkId };
    });
  }

  /** Non-deleted media rows per collection, every asked collection answered (0 when empty). */
  async function countCollectionMedia(collectionIds: number[]): Promise<Array<{ collectionId: number; count: number }>> {
    if (!collectionIds.length) return [];
    const counts = await stores.media.activeCounts(collectionIds);
    return collectionIds.map((collectionId) => ({ collectionId, count: counts.get(collectionId) ?? 0 }));
  }

  /** The rows of one collection in order, for collections.export. */
  function exportCollectionMedia(collectionId: number, includeArchived: boolean): Promise<MediaRow[]> {
    return stores.media.exportRows(collectionId, includeArchived);
  }

  /** The items a player page shows (the gateway asks only once the viewer may see the collection). */
  function playerItems(collectionId: number, limit: number): Promise<{ rows: MediaRow[]; total: number }> {
    return stores.media.playerItems(collectionId, limit);
  }

  return { insertCollectionLink, moveCollectionLink, countCollectionMedia, exportCollectionMedia, playerItems };
}
