/** Thin Connect handlers of MediaService's catalogue operations: decode, call the use case, encode. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { MediaService } from "@cms/contracts/media/v1/media_pb";
import { defaulted, jsonOf, requireCaller } from "@cms/platform";
import type { MediaApp } from "../app/media-app.js";
import { deleteMessage, describeMessage, finalizeMessage, listMessage, mediaMessage, noteDeleteMessage, paginationMessage, searchMessage, textNoteMessage } from "./encode.js";
import { idOf, idsOf, optionalIdOf, wireId } from "./ids.js";

type Catalogue = Pick<ServiceImpl<typeof MediaService>,
  "getMedia" | "describeMedia" | "listMedia" | "batchListMedia" | "searchMedia" | "createMedia" | "updateMedia" | "replaceMedia"
  | "deleteMedia" | "archiveMedia" | "unarchiveMedia" | "restoreMedia" | "copyMedia" | "moveMedia" | "reorderMedia"
  | "addTextNote" | "updateTextNote" | "getTextNote" | "deleteTextNote" | "finalizeThumbnail" | "thumbnailUploaded">;

/** Handlers of the catalogue and text-note operations. */
export function catalogueHandlers({ catalogue, notes }: Pick<MediaApp, "catalogue" | "notes">): Catalogue {
  const finalize: Catalogue["finalizeThumbnail"] = async (req, ctx) =>
    finalizeMessage(await catalogue.finalizeThumbnail(requireCaller(ctx), idOf(req.mediaId), req.thumbnailUrl));
  return {
    async getMedia(req, ctx) { return { media: mediaMessage(await catalogue.getMedia(requireCaller(ctx), idOf(req.mediaId))) }; },
    async describeMedia(req, ctx) { return describeMessage(await catalogue.describeMedia(requireCaller(ctx), idOf(req.mediaId))); },
    async listMedia(req, ctx) {
      const r = defaulted(req, "includeArchived", "limit", "offset");
      return listMessage(await catalogue.listMedia(requireCaller(ctx), {
        collectionId: idOf(r.collectionId), includeArchived: r.includeArchived, tag: r.tag, viewer: r.viewer,
        nameContains: r.nameContains, limit: r.limit, offset: r.offset,
      }));
    },
    async batchListMedia(req, ctx) {
      const r = defaulted(req, "limit", "offset");
      const page = await catalogue.batchListMedia(requireCaller(ctx), idsOf(r.collectionIds), r.limit, r.offset);
      return { media: page.rows.map(mediaMessage), collectionIds: page.collectionIds.map(wireId), pagination: paginationMessage(page.pagination) };
    },
    async searchMedia(req, ctx) {
      const r = defaulted(req, "limit", "offset");
      return searchMessage(await catalogue.searchMedia(requireCaller(ctx), {
        query: r.query, collectionId: optionalIdOf(r.collectionId), limit: r.limit, offset: r.offset,
      }));
    },
    async createMedia(req, ctx) {
      const row = await catalogue.createMedia(requireCaller(ctx), {
        collectionId: idOf(req.collectionId), sourceUrl: req.sourceUrl, viewer: req.viewer, name: req.name,
        description: req.description, tags: req.tags, thumbnailUrl: req.thumbnailUrl,
      });
      return { media: mediaMessage(row) };
    },
    async updateMedia(req, ctx) {
      const row = await catalogue.updateMedia(requireCaller(ctx), idOf(req.mediaId), {
        name: req.name, description: jsonOf(req.description) as string | null | undefined, tags: jsonOf(req.tags) as string[] | undefined,
        thumbnailUrl: req.thumbnailUrl, viewer: req.viewer,
      });
      return { media: mediaMessage(row) };
    },
    async replaceMedia(req, ctx) {
      const row = await catalogue.replaceMedia(requireCaller(ctx), idOf(req.mediaId), { sourceUrl: req.sourceUrl, name: req.name, viewer: req.viewer, thumbnailUrl: req.thumbnailUrl });
      return { media: mediaMessage(row), replaced: true };
    },
    async deleteMedia(req, ctx) {
      const r = defaulted(req, "mode", "confirm", "dryRun");
      return deleteMessage(await catalogue.deleteMedia(requireCaller(ctx), idsOf(r.mediaIds), {
        mode: r.mode as "soft" | "hard", confirm: r.confirm, dryRun: r.dryRun,
      }));
    },
    async archiveMedia(req, ctx) { return { media: mediaMessage(await catalogue.setArchived(requireCaller(ctx), idOf(req.mediaId), true)) }; },
    async unarchiveMedia(req, ctx) { return { media: mediaMessage(await catalogue.setArchived(requireCaller(ctx), idOf(req.mediaId), false)) }; },
    async restoreMedia(req, ctx) { return { media: mediaMessage(await catalogue.restoreMedia(requireCaller(ctx), idOf(req.mediaId))) }; },
    async copyMedia(req, ctx) {
      const { row, copiedFrom } = await catalogue.copyMedia(requireCaller(ctx), idOf(req.mediaId), idOf(req.targetCollectionId));
      return { media: mediaMessage(row), copiedFrom: wireId(copiedFrom) };
    },
    async moveMedia(req, ctx) {
      const moved = await catalogue.moveMedia(requireCaller(ctx), idsOf(req.mediaIds), idOf(req.targetCollectionId), req.startPosition);
      return { media: moved.rows.map(mediaMessage), targetCollectionId: wireId(moved.targetCollectionId) };
    },
    async reorderMedia(req, ctx) {
      const { collectionId, order } = await catalogue.reorderMedia(requireCaller(ctx), idOf(req.collectionId), idsOf(req.orderedIds));
      return { collectionId: wireId(collectionId), order: order.map((o) => ({ id: wireId(o.id), position: o.position })), count: order.length };
    },
    async addTextNote(req, ctx) {
      const row = await notes.addTextNote(requireCaller(ctx), {
        collectionId: idOf(req.collectionId), name: req.name, text: req.text, displayMode: req.displayMode, viewer: req.viewer,
        placeholderKind: req.placeholderKind, thumbnailUrl: req.thumbnailUrl, description: req.description,
      });
      return { media: mediaMessage(row) };
    },
    async updateTextNote(req, ctx) {
      const row = await notes.updateTextNote(requireCaller(ctx), idOf(req.mediaId), {
        name: req.name, text: req.text, displayMode: req.displayMode, viewer: req.viewer, placeholderKind: req.placeholderKind,
        thumbnailUrl: req.thumbnailUrl, description: req.description,
      });
      return { media: mediaMessage(row) };
    },
    async getTextNote(req, ctx) { return textNoteMessage(await notes.getTextNote(requireCaller(ctx), idOf(req.mediaId))); },
    async deleteTextNote(req, ctx) {
      const r = defaulted(req, "confirm", "dryRun");
      return noteDeleteMessage(await notes.deleteTextNote(requireCaller(ctx), idOf(r.mediaId), { confirm: r.confirm, dryRun: r.dryRun }));
    },
    finalizeThumbnail: finalize,
    // Deprecated alias of media.thumbnail_finalize: the same handler.
    thumbnailUploaded: finalize,
  };
}
