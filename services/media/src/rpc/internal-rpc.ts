/**
 * MediaService's internal RPCs, used by the collections service: sub-collection link rows,
 * media counts, the media side of a collection's lifecycle, and export.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { MediaService } from "@cms/contracts/media/v1/media_pb";
import { lifecycleChange } from "../app/collection-lifecycle.js";
import type { MediaApp } from "../app/media-app.js";
import { mediaMessage } from "./encode.js";
import { idOf, idsOf, optionalIdOf, wireId } from "./ids.js";

type Internal = Pick<ServiceImpl<typeof MediaService>,
  "insertCollectionLink" | "moveCollectionLink" | "countCollectionMedia" | "applyCollectionLifecycle" | "exportCollectionMedia" | "listPlayerItems">;

/** Handlers of the RPCs the collections service calls. */
export function internalHandlers({ links, lifecycle }: Pick<MediaApp, "links" | "lifecycle">): Internal {
  return {
    async insertCollectionLink(req) {
      const link = await links.insertCollectionLink({
        parentId: idOf(req.parentCollectionId), childId: idOf(req.childCollectionId), ownerUserId: req.ownerUserId,
        position: req.position, description: req.description,
      });
      return { linkMediaId: wireId(link.id), position: link.position };
    },
    async moveCollectionLink(req) {
      const moved = await links.moveCollectionLink({ childId: idOf(req.childCollectionId), newParentId: optionalIdOf(req.newParentCollectionId), ownerUserId: req.ownerUserId });
      return { removedLinkMediaIds: moved.removed.map(wireId), linkMediaId: moved.linkId === undefined ? undefined : wireId(moved.linkId) };
    },
    async countCollectionMedia(req) {
      const counts = await links.countCollectionMedia(idsOf(req.collectionIds));
      return { counts: counts.map((c) => ({ collectionId: wireId(c.collectionId), count: c.count })) };
    },
    // Exactly what the collection.lifecycle consumer does: whichever of the two comes second
    // finds the version applied and changes nothing.
    async applyCollectionLifecycle(req) {
      return { affected: await lifecycle.applyLifecycle(lifecycleChange(idsOf(req.collectionIds), req.action, req.version)) };
    },
    async exportCollectionMedia(req) {
      const rows = await links.exportCollectionMedia(idOf(req.collectionId), req.includeArchived);
      return { media: rows.map(mediaMessage) };
    },
    async listPlayerItems(req) {
      const { rows, total } = await links.playerItems(idOf(req.collectionId), req.limit);
      return { items: rows.map(mediaMessage), total: BigInt(total) };
    },
  };
}
