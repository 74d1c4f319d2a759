/**
 * Cover images: an http(s) thumbnail_url is fetched (SSRF-guarded) and an object-store key from
 * collections.get_upload_url is read back; either is turned into a WebP main image and a
 * thumbnail stored under the collection's key space. get_upload_url mints the PUT targets.
 */
import { AppError, ObjectTooLargeError, coverImages, fetchImageFor, freshCoverKeys, freshStoreKey, readObject, isStoreKey, objectKeyOf, isRasterImage, processImageFor, type Caller } from "@cms/platform";
import { mintUploadTargets, type UploadTargets } from "@cms/platform/upload-urls";
import type { Deps } from "./deps.js";

const MAX_COVER_BYTES = 20 * 1024 * 1024;
// A cover upload is capped at what collections.update will take from it.
export const COVER_UPLOAD_MAX_BYTES = MAX_COVER_BYTES;

export interface PreparedCover { main: Buffer; thumbnail: Buffer }

/** Reads and processes a cover before any row changes, so a bad image changes nothing. */
export async function prepareCover(deps: Deps, caller: Caller, thumbnailUrl: string): Promise<PreparedCover> {
  let bytes: Buffer;
  if (isStoreKey(thumbnailUrl)) {
    let key: string;
    try { key = objectKeyOf(thumbnailUrl); } catch { throw new AppError("invalid_request", "thumbnail_url is not a valid object-store key.", { field: "thumbnail_url" }); }
    if (!key.startsWith(`${caller.userId}/`)) throw new AppError("forbidden", "thumbnail_url names an object of another user.");
    let stored: Buffer | undefined;
    try {
      stored = await readObject(deps.ctx.store, thumbnailUrl, { maxBytes: MAX_COVER_BYTES });
    } catch (err) {
      if (err instanceof ObjectTooLargeError) throw new AppError("invalid_request", `The cover image exceeds ${MAX_COVER_BYTES} bytes.`, { field: "thumbnail_url" });
      throw err;
    }
    if (!stored) throw new AppError("invalid_request", "thumbnail_url names an object that was never uploaded.", { field: "thumbnail_url" });
    bytes = stored;
  } else {
    bytes = await fetchImageFor("thumbnail_url", thumbnailUrl, { policy: { allowedHosts: deps.ctx.config.outboundAllowedHosts }, maxBytes: MAX_COVER_BYTES, timeoutMs: 15_000 });
  }
  return processImageFor("thumbnail_url", () => coverImages(bytes));
}

/** Stores a prepared cover; returns the keys for thumbnail_url and cover_thumbnail_url. */
export async function storeCover(deps: Deps, userId: string, collectionId: number, cover: PreparedCover): Promise<{ main: string; thumbnail: string }> {
  const { main, thumbnail } = freshCoverKeys(userId, collectionId);
  await deps.ctx.store.put(main, cover.main, { contentType: "image/webp", contentLength: cover.main.length });
  await deps.ctx.store.put(thumbnail, cover.thumbnail, { contentType: "image/webp", contentLength: cover.thumbnail.length });
  return { main, thumbnail };
}

const EXTENSIONS: Record<string, string> = {
  "image/jpeg": "jpg", "image/png": "png", "image/webp": "webp", "image/gif": "gif", "image/avif": "avif", "image/tiff": "tiff", "image/heif": "heif",
};


/** The PUT targets of a cover upload (max_bytes: the cover limit) and what to do next. */
export async function coverUploadUrl(deps: Deps, caller: Caller, collectionId: number, contentType: string, contentLength: number, filename?: string): Promise<{ targets: UploadTargets; nextStep: string }> {
  const type = contentType.toLowerCase();
  if (!isRasterImage(type)) throw new AppError("invalid_request", "A cover must be a raster image (image/jpeg, image/png, image/webp, image/gif, image/avif).", { field: "content_type" });
  if (contentLength > COVER_UPLOAD_MAX_BYTES) throw new AppError("invalid_request", `content_length exceeds ${COVER_UPLOAD_MAX_BYTES} bytes.`, { field: "content_length" });
  const storeKey = freshStoreKey(caller.userId, collectionId, filename, `cover.${EXTENSIONS[type] ?? "bin"}`);
  const targets = await mintUploadTargets(deps.ctx, { storeKey, contentType: type, contentLength, userId: caller.userId });
  return {
    targets: { ...targets, max_bytes: COVER_UPLOAD_MAX_BYTES },
    nextStep: "PUT the bytes (no Authorization header), then call collections.update with thumbnail_url set to store_key.",
  };
}
