/** Thin Connect handlers of the byte-moving operations and their internal RPCs. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { MediaService } from "@cms/contracts/media/v1/media_pb";
import { requireCaller, result } from "@cms/platform";
import type { Deps } from "../app/deps.js";
import { getUploadUrl, objectUploaded, uploadMedia } from "../app/uploads.js";
import { abortUpload, beginUpload, finishUpload, uploadChunk } from "../app/chunked.js";
import { beginDownload, downloadChunk, downloadMedia, downloadUrl, resolveMediaObject } from "../app/downloads.js";
import { adoptDroppedFile, checkDropGrant, createDropLink } from "../app/drop-links.js";

type Transfer = Pick<ServiceImpl<typeof MediaService>,
  "uploadMedia" | "getMediaUploadUrl" | "beginUpload" | "uploadChunk" | "finishUpload" | "abortUpload" | "downloadMedia"
  | "getDownloadUrl" | "beginDownload" | "downloadChunk" | "createDropLink"
  | "objectUploaded" | "resolveMediaObject" | "checkDropGrant" | "adoptDroppedFile">;

export function transferHandlers(deps: Deps): Transfer {
  return {
    async uploadMedia(req, ctx) {
      return result(await uploadMedia(deps, requireCaller(ctx), {
        collectionId: Number(req.collectionId), name: req.name, filename: req.filename, contentBase64: req.contentBase64,
        contentLength: req.contentLength, sha256: req.sha256?.toLowerCase(), description: req.description, tags: req.tags,
      }));
    },
    async getMediaUploadUrl(req, ctx) {
      return result(await getUploadUrl(deps, requireCaller(ctx), {
        collectionId: Number(req.collectionId), filename: req.filename, contentType: req.contentType,
        purpose: (req.purpose ?? "media") as "media" | "thumbnail", name: req.name, description: req.description, tags: req.tags,
        contentLength: req.contentLength,
      }));
    },
    async beginUpload(req, ctx) {
      return result(await beginUpload(deps, requireCaller(ctx), {
        collectionId: Number(req.collectionId), filename: req.filename, contentType: req.contentType, contentLength: req.contentLength,
        sha256: req.sha256?.toLowerCase(), name: req.name, description: req.description, tags: req.tags,
      }));
    },
    async uploadChunk(req, ctx) {
      return result(await uploadChunk(deps, requireCaller(ctx), {
        uploadId: req.uploadId, index: req.index!, contentBase64: req.contentBase64, contentLength: req.contentLength, sha256: req.sha256?.toLowerCase(),
      }));
    },
    async finishUpload(req, ctx) {
      return result(await finishUpload(deps, requireCaller(ctx), { uploadId: req.uploadId, contentLength: req.contentLength, sha256: req.sha256?.toLowerCase() }));
    },
    async abortUpload(req, ctx) { return result(await abortUpload(deps, requireCaller(ctx), req.uploadId)); },
    async downloadMedia(req, ctx) { return result(await downloadMedia(deps, requireCaller(ctx), Number(req.mediaId))); },
    async getDownloadUrl(req, ctx) { return result(await downloadUrl(deps, requireCaller(ctx), Number(req.mediaId))); },
    async beginDownload(req, ctx) { return result(await beginDownload(deps, requireCaller(ctx), Number(req.mediaId))); },
    async downloadChunk(req, ctx) { return result(await downloadChunk(deps, requireCaller(ctx), req.downloadId, req.index!)); },
    async createDropLink(req, ctx) {
      return result(await createDropLink(deps, requireCaller(ctx), Number(req.collectionId), req.expiresInSeconds));
    },
    async objectUploaded(req) {
      return result(await objectUploaded(deps, { storeKey: req.storeKey, mediaId: req.mediaId === undefined ? undefined : Number(req.mediaId), sha256: req.sha256 }));
    },
    async resolveMediaObject(req, ctx) {
      return result(await resolveMediaObject(deps, requireCaller(ctx), Number(req.mediaId), req.part as "main" | "thumbnail" | "background"));
    },
    async checkDropGrant(req) { return result(await checkDropGrant(deps, req.grant)); },
    async adoptDroppedFile(req) {
      return result(await adoptDroppedFile(deps, { grant: req.grant, storeKey: req.storeKey, filename: req.filename, sha256: req.sha256 }));
    },
  };
}
