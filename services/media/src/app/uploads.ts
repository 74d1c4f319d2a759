/**
 * Single-call uploads and upload URLs: media.upload (base64, at most 100KB) and
 * media.get_upload_url (PUT targets for a media file or a thumbnail; with a name, the one-call
 * flow creates the row at mint time, and ./pending-uploads.ts completes it once the bytes land).
 */
import { AppError, freshStoreKey, isRasterImage, normalizeTags, orphanUnclaimedUploadKeys, type Caller } from "@cms/platform";
import { mintUploadTargets, type UploadTargets } from "@cms/platform/upload-urls";
import type { MediaRow } from "../domain/media-row.js";
import { checkName, itemName, viewerOfMime } from "../domain/rules.js";
import { SINGLE_UPLOAD_MAX_BYTES, decodeVerified, mimeOfFilename } from "../domain/transfer-rules.js";
import type { MediaAccess } from "./access.js";
import { sniffBytes, type Ingest } from "./ingest.js";
import type { MediaDeps } from "./ports.js";
import { appendRow, type StoredFiles } from "./stored-files.js";

/** A media.upload request (base64 bytes). */
export interface UploadInput {
  collectionId: number; name?: string; filename?: string; contentBase64: string; contentLength: number; sha256?: string;
  description?: string; tags: string[];
}

/** A media.get_upload_url request. */
export interface UploadUrlInput {
  collectionId: number; filename?: string; contentType?: string; purpose: "media" | "thumbnail"; name?: string;
  description?: string; tags: string[]; contentLength?: number;
}

/**
 * What media.get_upload_url minted: the PUT targets, the flow of purpose=media (classic, or
 * one_call with the row made now) and the next step.
 */
export interface MintedUpload { targets: UploadTargets; purpose: "media" | "thumbnail"; flow?: "classic" | "one_call"; row?: MediaRow; nextStep: string }

/** The single-call upload use cases. */
export function createUploads(
  { stores, unitOfWork, objects, config }: Pick<MediaDeps, "stores" | "unitOfWork" | "objects" | "config">,
  { access, ingest, files }: { access: MediaAccess; ingest: Ingest; files: StoredFiles },
) {
  const mint = (input: Parameters<typeof mintUploadTargets>[1]) => mintUploadTargets({ config, store: objects }, input);

  /**
   * PUT targets for a key no row waits for (the classic and thumbnail flows): the key is recorded
   * first, so that an object PUT there that nothing takes up is removed (forgetUnclaimedUploads).
   */
  async function mintUnclaimed(input: Parameters<typeof mintUploadTargets>[1]): Promise<UploadTargets> {
    const targets = await mint(input);
    await stores.uploadKeys.record(input.storeKey, input.userId, targets.expires_at);
    return targets;
  }

  /** media.upload: verify, store durably, then create the row exactly as media.create would. */
  async function uploadMedia(caller: Caller, input: UploadInput): Promise<MediaRow> {
    checkName(input.name);
    const tags = normalizeTags(input.tags, "media item");
    const { ownerUserId } = await access.authorize(caller, input.collectionId, "upload");
    const bytes = decodeVerified({
      base64: input.contentBase64, contentLength: input.contentLength, sha256: input.sha256, maxBytes: SINGLE_UPLOAD_MAX_BYTES,
      tooLarge: `media.upload takes at most ${SINGLE_UPLOAD_MAX_BYTES} decoded bytes; use media.get_upload_url or the chunked upload (media.upload_begin) for larger files.`,
    });
    const mime = await sniffBytes(bytes.subarray(0, 4100), mimeOfFilename(input.filename));
    const key = freshStoreKey(caller.userId, input.collectionId, input.filename, "upload");
    // The row comes only after the object is durably stored (the store fsyncs, then renames).
    const stored = await objects.put(key, bytes, { contentType: mime, contentLength: bytes.length });
    try {
      return await files.createItemFromStored(caller, ownerUserId, input.collectionId, key, {
        name: itemName(input.name, input.filename), description: input.description ?? null, tags, sha256: stored.sha256,
      });
    } catch (err) {
      await ingest.removeObjects([key]);
      throw err;
    }
  }

  /** media.get_upload_url: PUT targets for one new store key; with purpose=media and a name, the row too. */
  async function getUploadUrl(caller: Caller, input: UploadUrlInput): Promise<MintedUpload> {
    checkName(input.name);
    const tags = normalizeTags(input.tags, "media item");
    if (input.purpose === "thumbnail") {
      for (const [field, given] of [["name", input.name !== undefined], ["description", input.description !== undefined], ["tags", input.tags.length > 0]] as const) {
        if (given) throw new AppError("invalid_request", `${field} belongs to purpose=media; a thumbnail upload only mints the PUT target.`, { field });
      }
      await access.authorize(caller, input.collectionId, "edit");
      const type = (input.contentType ?? mimeOfFilename(input.filename))?.toLowerCase();
      if (!type) throw new AppError("invalid_request", "content_type is required for a thumbnail upload (or a filename with an image extension).", { field: "content_type" });
      if (!isRasterImage(type)) throw new AppError("invalid_request", "A thumbnail must be a raster image (image/jpeg, image/png, image/webp, image/gif, image/avif).", { field: "content_type" });
      const key = freshStoreKey(caller.userId, input.collectionId, input.filename, `thumbnail.${type.split("/")[1]}`);
      const targets = await mintUnclaimed({ storeKey: key, contentType: type, contentLength: input.contentLength, userId: caller.userId });
      return {
        targets, purpose: "thumbnail",
        nextStep: "PUT the bytes (no Authorization header), set thumbnail_url on the media row to store_key with media.update, then call media.thumbnail_finalize.",
      };
    }
    if (input.name === undefined) {
      // The classic flow makes no row: media.create makes the item later, with its own fields, so these would be lost.
      for (const [field, given] of [["description", input.description !== undefined], ["tags", input.tags.length > 0]] as const) {
        if (given) throw new AppError("invalid_request", `${field} is not kept by the classic flow (purpose=media without name): give name for the one-call flow, which creates the item now, or pass ${field} to media.create.`, { field });
      }
    }
    const { ownerUserId } = await access.authorize(caller, input.collectionId, "upload");
    const type = (input.contentType ?? mimeOfFilename(input.filename) ?? "application/octet-stream").toLowerCase();
    const key = freshStoreKey(caller.userId, input.collectionId, input.filename, "upload");
    const expiresAt = Date.now() + config.uploadGrantTtlMs;
    if (input.name === undefined) {
      const targets = await mintUnclaimed({ storeKey: key, contentType: type, contentLength: input.contentLength, userId: caller.userId });
      return {
        targets, purpose: "media", flow: "classic",
        nextStep: "PUT the bytes (no Authorization header), then call media.create with source_url set to store_key.",
      };
    }
    // One-call flow: the row exists from now on; its size, type, sha256 and thumbnails follow the bytes.
    const row = await unitOfWork(async (stores, events) => {
      const r = await appendRow(stores, events, {
        collection_id: input.collectionId, owner_user_id: ownerUserId, created_by: caller.userId,
        name: input.name, description: input.description ?? null, tags, main_url: key, viewer: viewerOfMime(type), mime_type: type,
        size_bytes: null, sha256: null,
      });
      await stores.media.insertPending({
        media_id: r.id, store_key: key, user_id: caller.userId, collection_id: input.collectionId, owner_user_id: ownerUserId,
        content_type: type, expires_at: new Date(expiresAt),
      });
      return r;
    });
    const targets = await mint({ storeKey: key, contentType: type, contentLength: input.contentLength, userId: caller.userId, mediaId: Number(row.id) });
    return {
      targets, purpose: "media", flow: "one_call", row,
      nextStep: "PUT the bytes (no Authorization header). The media item already exists: do not call media.create. Its size, type and thumbnails are filled in once the bytes land; an item whose bytes never arrive is removed after the upload URL expires.",
    };
  }

  /** The upload_cleanup job's part for those keys, media.create or media.update never took up. */
  function forgetUnclaimedUploads(now: Date): Promise<number> {
    return orphanUnclaimedUploadKeys(unitOfWork, (s) => s.uploadKeys, now, config.uploadSessionTtlMs);
  }

  return { uploadMedia, getUploadUrl, forgetUnclaimedUploads };
}
