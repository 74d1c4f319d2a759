/**
 * Cover images: an http(s) thumbnail_url is fetched (SSRF-guarded) and an object-store key from
 * collections.get_upload_url is read back; either is turned into a WebP main image and a
 * thumbnail stored under the collection's key space. All of it happens outside any transaction:
 * the images are prepared and stored before the unit of work that points the row at them, and
 * removed again when that unit does not commit. get_upload_url mints the PUT targets.
 */
import {
  AppError, ObjectTooLargeError, coverImages, fetchImageFor, freshCoverKeys, freshStoreKey, readObject, isStoreKey, objectKeyOf,
  isRasterImage, orphanUnclaimedUploadKeys, processImageFor, type Caller,
} from "@cms/platform";
import { mintUploadTargets, type UploadTargets } from "@cms/platform/upload-urls";
import { ownedCollection, type AppContext } from "./context.js";

const MAX_COVER_BYTES = 20 * 1024 * 1024;
/** A cover upload is capped at what collections.update will take from it. */
export const COVER_UPLOAD_MAX_BYTES = MAX_COVER_BYTES;

/** A cover read and processed, not stored yet. */
export interface PreparedCover { main: Buffer; thumbnail: Buffer }

/** The stored cover's keys, for thumbnail_url and cover_thumbnail_url. */
export interface StoredCover { main: string; thumbnail: string }

const EXTENSIONS: Record<string, string> = {
  "image/jpeg": "jpg", "image/png": "png", "image/webp": "webp", "image/gif": "gif", "image/avif": "avif", "image/tiff": "tiff", "image/heif": "heif",
};

/** Cover images: preparing and storing them around a unit of work, and the cover upload URL. */
export function coverUseCases(app: AppContext) {
  /** Reads and processes a cover before any row changes, so a bad image changes nothing. */
  async function prepareCover(caller: Caller, thumbnailUrl: string): Promise<PreparedCover> {
    let bytes: Buffer;
    if (isStoreKey(thumbnailUrl)) {
      let key: string;
      try { key = objectKeyOf(thumbnailUrl); } catch { throw new AppError("invalid_request", "thumbnail_url is not a valid object-store key.", { field: "thumbnail_url" }); }
      if (!key.startsWith(`${caller.userId}/`)) throw new AppError("forbidden", "thumbnail_url names an object of another user.");
      let stored: Buffer | undefined;
      try {
        stored = await readObject(app.objects, thumbnailUrl, { maxBytes: MAX_COVER_BYTES });
      } catch (err) {
        if (err instanceof ObjectTooLargeError) throw new AppError("invalid_request", `The cover image exceeds ${MAX_COVER_BYTES} bytes.`, { field: "thumbnail_url" });
        throw err;
      }
      if (!stored) throw new AppError("invalid_request", "thumbnail_url names no stored object: it was never uploaded, or a cover was already made from it (an uploaded image is removed once its cover is stored).", { field: "thumbnail_url" });
      bytes = stored;
    } else {
      bytes = await fetchImageFor("thumbnail_url", thumbnailUrl, { policy: { allowedHosts: app.config.outboundAllowedHosts }, maxBytes: MAX_COVER_BYTES, timeoutMs: 15_000 });
    }
    return processImageFor("thumbnail_url", () => coverImages(bytes));
  }

  /** Stores a prepared cover under fresh keys of the collection. */
  async function storeCover(userId: string, collectionId: number, cover: PreparedCover): Promise<StoredCover> {
    const keys = freshCoverKeys(userId, collectionId);
    await app.objects.put(keys.main, cover.main, { contentType: "image/webp", contentLength: cover.main.length });
    await app.objects.put(keys.thumbnail, cover.thumbnail, { contentType: "image/webp", contentLength: cover.thumbnail.length });
    return keys;
  }

  /**
   * Runs `write` (the unit of work that points a row at a stored cover); when it fails, the
   * cover's objects are removed again, since no row will ever point at them.
   */
  async function withStoredCover<T>(cover: StoredCover | undefined, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (cover) {
        await app.objects.delete([cover.main, cover.thumbnail])
          .catch((e) => app.log.warn({ err: e, keys: cover }, "could not remove a cover left by a failed write"));
      }
      throw err;
    }
  }

  return {
    prepareCover,
    storeCover,
    withStoredCover,

    /** The retention job's part for cover uploads collections.create or update never took up. */
    forgetUnclaimedCoverUploads(now: Date): Promise<number> {
      return orphanUnclaimedUploadKeys(app.unitOfWork, (s) => s.uploadKeys, now, app.config.uploadSessionTtlMs);
    },

    /** The PUT targets of a cover upload (max_bytes: the cover limit) and what to do next. */
    async coverUploadUrl(caller: Caller, collectionId: number, contentType: string, contentLength: number, filename?: string): Promise<{ targets: UploadTargets; nextStep: string }> {
      await ownedCollection(app.stores, collectionId, caller);
      const type = contentType.toLowerCase();
      if (!isRasterImage(type)) throw new AppError("invalid_request", "A cover must be a raster image (image/jpeg, image/png, image/webp, image/gif, image/avif).", { field: "content_type" });
      if (contentLength > COVER_UPLOAD_MAX_BYTES) throw new AppError("invalid_request", `content_length exceeds ${COVER_UPLOAD_MAX_BYTES} bytes.`, { field: "content_length" });
      const storeKey = freshStoreKey(caller.userId, collectionId, filename, `cover.${EXTENSIONS[type] ?? "bin"}`);
      const targets = await mintUploadTargets({ config: app.config, store: app.objects }, { storeKey, contentType: type, contentLength, userId: caller.userId });
      // Recorded before the URL is handed out: an image PUT there that no cover takes up is removed.
      await app.stores.uploadKeys.record(storeKey, caller.userId, targets.expires_at);
      return {
        targets: { ...targets, max_bytes: COVER_UPLOAD_MAX_BYTES },
        nextStep: "PUT the bytes (no Authorization header), then call collections.update with thumbnail_url set to store_key.",
      };
    },
  };
}

/** The cover helpers the create and update use cases share. */
export type CoverUseCases = ReturnType<typeof coverUseCases>;
