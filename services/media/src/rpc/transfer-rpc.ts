/** Thin Connect handlers of the byte-moving operations and their internal RPCs. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { MediaService } from "@cms/contracts/media/v1/media_pb";
import { defaulted, requireCaller } from "@cms/platform";
import type { MediaApp } from "../app/media-app.js";
import {
  chunkReceiptMessage, downloadChunkMessage, downloadLinkMessage, downloadSessionMessage, dropLinkMessage, dropTargetMessage, mediaMessage,
  objectUploadedMessage, storedObjectMessage, uploadSessionMessage, uploadUrlMessage,
} from "./encode.js";
import { idOf, optionalIdOf, wireId } from "./ids.js";

type Transfer = Pick<ServiceImpl<typeof MediaService>,
  "uploadMedia" | "getMediaUploadUrl" | "beginUpload" | "uploadChunk" | "finishUpload" | "abortUpload" | "downloadMedia"
  | "getDownloadUrl" | "beginDownload" | "downloadChunk" | "createDropLink"
  | "objectUploaded" | "resolveMediaObject" | "checkDropGrant" | "adoptDroppedFile">;

/** Handlers of the uploads, downloads and drop links (public operations and the gateway's internal RPCs). */
export function transferHandlers({ uploads, chunked, pending, downloads, dropLinks }: Pick<MediaApp, "uploads" | "chunked" | "pending" | "downloads" | "dropLinks">): Transfer {
  return {
    async uploadMedia(req, ctx) {
      const row = await uploads.uploadMedia(requireCaller(ctx), {
        collectionId: idOf(req.collectionId), name: req.name, filename: req.filename, contentBase64: req.contentBase64,
        contentLength: req.contentLength, sha256: req.sha256?.toLowerCase(), description: req.description, tags: req.tags,
      });
      return { media: mediaMessage(row) };
    },
    async getMediaUploadUrl(req, ctx) {
      const r = defaulted(req, "purpose");
      return uploadUrlMessage(await uploads.getUploadUrl(requireCaller(ctx), {
        collectionId: idOf(r.collectionId), filename: r.filename, contentType: r.contentType,
        purpose: r.purpose as "media" | "thumbnail", name: r.name, description: r.description, tags: r.tags,
        contentLength: r.contentLength,
      }));
    },
    async beginUpload(req, ctx) {
      return uploadSessionMessage(await chunked.beginUpload(requireCaller(ctx), {
        collectionId: idOf(req.collectionId), filename: req.filename, contentType: req.contentType, contentLength: req.contentLength,
        sha256: req.sha256?.toLowerCase(), name: req.name, description: req.description, tags: req.tags,
      }));
    },
    async uploadChunk(req, ctx) {
      return chunkReceiptMessage(await chunked.uploadChunk(requireCaller(ctx), {
        uploadId: req.uploadId, index: req.index!, contentBase64: req.contentBase64, contentLength: req.contentLength, sha256: req.sha256?.toLowerCase(),
      }));
    },
    async finishUpload(req, ctx) {
      const { row, uploadId } = await chunked.finishUpload(requireCaller(ctx), { uploadId: req.uploadId, contentLength: req.contentLength, sha256: req.sha256?.toLowerCase() });
      return { media: mediaMessage(row), chunkedUpload: true, uploadId };
    },
    async abortUpload(req, ctx) {
      const { uploadId, discardedChunks } = await chunked.abortUpload(requireCaller(ctx), req.uploadId);
      return { uploadId, aborted: true, discardedChunks };
    },
    async downloadMedia(req, ctx) {
      const { object, mediaId } = await downloads.downloadMedia(requireCaller(ctx), idOf(req.mediaId));
      return { object: storedObjectMessage(object), mediaId: wireId(mediaId) };
    },
    async getDownloadUrl(req, ctx) { return downloadLinkMessage(await downloads.downloadUrl(requireCaller(ctx), idOf(req.mediaId))); },
    async beginDownload(req, ctx) { return downloadSessionMessage(await downloads.beginDownload(requireCaller(ctx), idOf(req.mediaId))); },
    async downloadChunk(req, ctx) { return downloadChunkMessage(await downloads.downloadChunk(requireCaller(ctx), req.downloadId, req.index!)); },
    async createDropLink(req, ctx) {
      return dropLinkMessage(await dropLinks.createDropLink(requireCaller(ctx), idOf(req.collectionId), req.expiresInSeconds));
    },
    async objectUploaded(req) {
      return objectUploadedMessage(await pending.objectUploaded({ storeKey: req.storeKey, mediaId: optionalIdOf(req.mediaId), sha256: req.sha256 }));
    },
    async resolveMediaObject(req, ctx) {
      const ref = await downloads.resolveMediaObject(requireCaller(ctx), idOf(req.mediaId), req.part as "main" | "thumbnail" | "background");
      return { object: storedObjectMessage(ref) };
    },
    async checkDropGrant(req) { return dropTargetMessage(await dropLinks.checkDropGrant(req.grant)); },
    async adoptDroppedFile(req) {
      const row = await dropLinks.adoptDroppedFile({ grant: req.grant, storeKey: req.storeKey, filename: req.filename, sha256: req.sha256 });
      return { media: mediaMessage(row) };
    },
  };
}
