/**
 * MediaService's internal RPCs, used by the collections service: sub-collection link rows,
 * media counts, the media side of a collection's lifecycle, and export.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { MediaService } from "@cms/contracts/media/v1/media_pb";
import type { MediaApp } from "../app/media-app.js";
import { mediaMessage } from "./encode.js";
import { idOf, idsOf, optionalIdOf, wireId } from "./ids.js";

type Internal = Pick<ServiceImpl<typeof MediaService>,
  "insertCollectionLink" | "moveCollectionLink" | "countCollectionMedia" | "deleteCollectionMedia" | "exportCollectionMedia">;

const ACTION_OF_MODE = { soft: "soft_deleted", restore: "restored", hard: "purged" } as const;
let lastVersion = 0;

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
    async deleteCollectionMedia(req) {
      // Unversioned callers: each call is newer than the last.
      lastVersion = Math.max(lastVersion + 1, Date.now() * 1000);
      const affected = await lifecycle.applyLifecycle({
        collectionIds: idsOf(req.collectionIds), action: ACTION_OF_MODE[req.mode as keyof typeof ACTION_OF_MODE], version: lastVersion,
      });
      return { affected };
    },
    async exportCollectionMedia(req) {
      const rows = await links.exportCollectionMedia(idOf(req.collectionId), req.includeArchived);
      return { media: rows.map(mediaMessage) };
    },
  };
}
