/** Thin Connect handlers of MediaService's public operations. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { MediaService } from "@cms/contracts/media/v1/media_pb";
import { jsonOf, requireCaller } from "@cms/platform";
import type { Deps } from "../app/deps.js";
import {
  batchListMedia, copyMedia, createMedia, deleteMedia, describeMedia, finalizeThumbnail, getMedia, listMedia, moveMedia,
  reorderMedia, replaceMedia, restoreMedia, searchMedia, setArchived, updateMedia,
} from "../app/catalogue.js";
import { addTextNote, deleteTextNote, getTextNote, updateTextNote } from "../app/text-notes.js";
import { deleteMessage, describeMessage, finalizeMessage, listMessage, mediaMessage, noteDeleteMessage, paginationMessage, searchMessage, textNoteMessage } from "./encode.js";

type Catalogue = Pick<ServiceImpl<typeof MediaService>,
  "getMedia" | "describeMedia" | "listMedia" | "batchListMedia" | "searchMedia" | "createMedia" | "updateMedia" | "replaceMedia"
  | "deleteMedia" | "archiveMedia" | "unarchiveMedia" | "restoreMedia" | "copyMedia" | "moveMedia" | "reorderMedia"
  | "addTextNote" | "updateTextNote" | "getTextNote" | "deleteTextNote" | "finalizeThumbnail" | "thumbnailUploaded">;

export function catalogueHandlers(deps: Deps): Catalogue {
  const finalize: Catalogue["finalizeThumbnail"] = async (req, ctx) =>
    finalizeMessage(await finalizeThumbnail(deps, requireCaller(ctx), Number(req.mediaId), req.thumbnailUrl));
  return {
    async getMedia(req, ctx) { return { media: mediaMessage(await getMedia(deps, requireCaller(ctx), Number(req.mediaId))) }; },
    async describeMedia(req, ctx) { return describeMessage(await describeMedia(deps, requireCaller(ctx), Number(req.mediaId))); },
    async listMedia(req, ctx) {
      return listMessage(await listMedia(deps, requireCaller(ctx), {
        collectionId: Number(req.collectionId), includeArchived: req.includeArchived ?? false, tag: req.tag, viewer: req.viewer,
        nameContains: req.nameContains, limit: req.limit ?? 100, offset: req.offset ?? 0,
      }));
    },
    async batchListMedia(req, ctx) {
      const page = await batchListMedia(deps, requireCaller(ctx), req.collectionIds.map(Number), req.limit ?? 100, req.offset ?? 0);
      return { media: page.rows.map(mediaMessage), collectionIds: page.collectionIds.map(BigInt), pagination: paginationMessage(page.pagination) };
    },
    async searchMedia(req, ctx) {
      return searchMessage(await searchMedia(deps, requireCaller(ctx), {
        query: req.query, collectionId: req.collectionId === undefined ? undefined : Number(req.collectionId), limit: req.limit ?? 100, offset: req.offset ?? 0,
      }));
    },
    async createMedia(req, ctx) {
      const row = await createMedia(deps, requireCaller(ctx), {
        collectionId: Number(req.collectionId), sourceUrl: req.sourceUrl, viewer: req.viewer, name: req.name,
        description: req.description, tags: req.tags, thumbnailUrl: req.thumbnailUrl,
      });
      return { media: mediaMessage(row) };
    },
    async updateMedia(req, ctx) {
      const row = await updateMedia(deps, requireCaller(ctx), Number(req.mediaId), {
        name: req.name, description: jsonOf(req.description) as string | null | undefined, tags: jsonOf(req.tags) as string[] | undefined,
        thumbnailUrl: req.thumbnailUrl, viewer: req.viewer,
      });
      return { media: mediaMessage(row) };
    },
    async replaceMedia(req, ctx) {
      const row = await replaceMedia(deps, requireCaller(ctx), Number(req.mediaId), { sourceUrl: req.sourceUrl, name: req.name, viewer: req.viewer, thumbnailUrl: req.thumbnailUrl });
      return { media: mediaMessage(row), replaced: true };
    },
    async deleteMedia(req, ctx) {
      return deleteMessage(await deleteMedia(deps, requireCaller(ctx), req.mediaIds.map(Number), {
        mode: (req.mode ?? "hard") as "soft" | "hard", confirm: req.confirm ?? false, dryRun: req.dryRun ?? false,
      }));
    },
    async archiveMedia(req, ctx) { return { media: mediaMessage(await setArchived(deps, requireCaller(ctx), Number(req.mediaId), true)) }; },
    async unarchiveMedia(req, ctx) { return { media: mediaMessage(await setArchived(deps, requireCaller(ctx), Number(req.mediaId), false)) }; },
    async restoreMedia(req, ctx) { return { media: mediaMessage(await restoreMedia(deps, requireCaller(ctx), Number(req.mediaId))) }; },
    async copyMedia(req, ctx) {
      const { row, copiedFrom } = await copyMedia(deps, requireCaller(ctx), Number(req.mediaId), Number(req.targetCollectionId));
      return { media: mediaMessage(row), copiedFrom: BigInt(copiedFrom) };
    },
    async moveMedia(req, ctx) {
      const moved = await moveMedia(deps, requireCaller(ctx), req.mediaIds.map(Number), Number(req.targetCollectionId), req.startPosition);
      return { media: moved.rows.map(mediaMessage), targetCollectionId: BigInt(moved.targetCollectionId) };
    },
    async reorderMedia(req, ctx) {
      const { collectionId, order } = await reorderMedia(deps, requireCaller(ctx), Number(req.collectionId), req.orderedIds.map(Number));
      return { collectionId: BigInt(collectionId), order: order.map((o) => ({ id: BigInt(o.id), position: o.position })), count: order.length };
    },
    async addTextNote(req, ctx) {
      const row = await addTextNote(deps, requireCaller(ctx), {
        collectionId: Number(req.collectionId), name: req.name, text: req.text, displayMode: req.displayMode, viewer: req.viewer,
        placeholderKind: req.placeholderKind, thumbnailUrl: req.thumbnailUrl, description: req.description,
      });
      return { media: mediaMessage(row) };
    },
    async updateTextNote(req, ctx) {
      const row = await updateTextNote(deps, requireCaller(ctx), Number(req.mediaId), {
        name: req.name, text: req.text, displayMode: req.displayMode, viewer: req.viewer, placeholderKind: req.placeholderKind,
        thumbnailUrl: req.thumbnailUrl, description: req.description,
      });
      return { media: mediaMessage(row) };
    },
    async getTextNote(req, ctx) { return textNoteMessage(await getTextNote(deps, requireCaller(ctx), Number(req.mediaId))); },
    async deleteTextNote(req, ctx) {
      return noteDeleteMessage(await deleteTextNote(deps, requireCaller(ctx), Number(req.mediaId), { confirm: req.confirm ?? false, dryRun: req.dryRun ?? false }));
    },
    finalizeThumbnail: finalize,
    // Deprecated alias of media.thumbnail_finalize: the same handler.
    thumbnailUploaded: finalize,
  };
}
