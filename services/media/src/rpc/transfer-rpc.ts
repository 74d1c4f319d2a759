/** Thin Connect handlers of the byte-moving operations and their internal RPCs. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { MediaService } from "@cms/contracts/media/v1/media_pb";
import { requireCaller } from "@cms/platform";
import type { Deps } from "../app/deps.js";
import { getUploadUrl, objectUploaded, uploadMedia } from "../app/uploads.js";
import { abortUpload, beginUpload, finishUpload, uploadChunk } from "../app/chunked.js";
import { beginDownload, downloadChunk, downloadMedia, downloadUrl, resolveMediaObject } from "../app/downloads.js";
import { adoptDroppedFile, checkDropGrant, createDropLink } from "../app/drop-links.js";
import {
  chunkReceiptMessage, downloadChunkMessage, downloadLinkMessage, downloadSessionMessage, dropLinkMessage, dropTargetMessage, mediaMessage,
  objectUploadedMessage, storedObjectMessage, uploadSessionMessage, uploadUrlMessage,
} from "./encode.js";

type Transfer = Pick<ServiceImpl<typeof MediaService>,
  "uploadMedia" | "getMediaUploadUrl" | "beginUpload" | "uploadChunk" | "finishUpload" | "abortUpload" | "downloadMedia"
  | "getDownloadUrl" | "beginDownload" | "downloadChunk" | "createDropLink"
  | "objectUploaded" | "resolveMediaObject" | "checkDropGrant" | "adoptDroppedFile">;

export function transferHandlers(deps: Deps): Transfer {
  return {
    async uploadMedia(req, ctx) {
      const row = await uploadMedia(deps, requireCaller(ctx), {
        collectionId: Number(req.collectionId), name: req.name, filename: req.filename, contentBase64: req.contentBase64,
        contentLength: req.contentLength, sha256: req.sha256?.toLowerCase(), description: req.description, tags: req.tags,
      });
      return { media: mediaMessage(row) };
    },
    async getMediaUploadUrl(req, ctx) {
      return uploadUrlMessage(await getUploadUrl(deps, requireCaller(ctx), {
        collectionId: Number(req.collectionId), filename: req.filename, contentType: req.contentType,
        purpose: (req.purpose ?? "media") as "media" | "thumbnail", name: req.name, description: req.description, tags: req.tags,
        contentLength: req.contentLength,
      }));
    },
    async beginUpload(req, ctx) {
      return uploadSessionMessage(await beginUpload(deps, requireCaller(ctx), {
        collectionId: Number(req.collectionId), filename: req.filename, contentType: req.contentType, contentLength: req.contentLength,
        sha256: req.sha256?.toLowerCase(), name: req.name, description: req.description, tags: req.tags,
      }));
    },
    async uploadChunk(req, ctx) {
      return chunkReceiptMessage(await uploadChunk(deps, requireCaller(ctx), {
        uploadId: req.uploadId, index: req.index!, contentBase64: req.contentBase64, contentLength: req.contentLength, sha256: req.sha256?.toLowerCase(),
      }));
    },
    async finishUpload(req, ctx) {
      const { row, uploadId } = await finishUpload(deps, requireCaller(ctx), { uploadId: req.uploadId, contentLength: req.contentLength, sha256: req.sha256?.toLowerCase() });
      return { media: mediaMessage(row), chunkedUpload: true, uploadId };
    },
    async abortUpload(req, ctx) {
      const { uploadId, discardedChunks } = await abortUpload(deps, requireCaller(ctx), req.uploadId);
      return { uploadId, aborted: true, discardedChunks };
    },
    async downloadMedia(req, ctx) {
      const { object, mediaId } = await downloadMedia(deps, requireCaller(ctx), Number(req.mediaId));
      return { object: storedObjectMessage(object), mediaId: BigInt(mediaId) };
    },
    async getDownloadUrl(req, ctx) { return downloadLinkMessage(await downloadUrl(deps, requireCaller(ctx), Number(req.mediaId))); },
    async beginDownload(req, ctx) { return downloadSessionMessage(await beginDownload(deps, requireCaller(ctx), Number(req.mediaId))); },
    async downloadChunk(req, ctx) { return downloadChunkMessage(await downloadChunk(deps, requireCaller(ctx), req.downloadId, req.index!)); },
    async createDropLink(req, ctx) {
      return dropLinkMessage(await createDropLink(deps, requireCaller(ctx), Number(req.collectionId), req.expiresInSeconds));
    },
    async objectUploaded(req) {
      return objectUploadedMessage(await objectUploaded(deps, { storeKey: req.storeKey, mediaId: req.mediaId === undefined ? undefined : Number(req.mediaId), sha256: req.sha256 }));
    },
    async resolveMediaObject(req, ctx) {
      const ref = await resolveMediaObject(deps, requireCaller(ctx), Number(req.mediaId), req.part as "main" | "thumbnail" | "background");
      return { object: storedObjectMessage(ref) };
    },
    async checkDropGrant(req) { return dropTargetMessage(await checkDropGrant(deps, req.grant)); },
    async adoptDroppedFile(req) {
      const row = await adoptDroppedFile(deps, { grant: req.grant, storeKey: req.storeKey, filename: req.filename, sha256: req.sha256 });
      return { media: mediaMessage(row) };
    },
  };
}
