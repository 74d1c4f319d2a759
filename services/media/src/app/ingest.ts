/**
 * Bringing content in: a source_url that is a web page stays an external link (its preview
 * image becomes the thumbnail), a file URL is downloaded into the object store, an object-store
 * key from an upload is checked and adopted. MIME types are sniffed from the bytes. Raster
 * images get a 200 px WebP thumbnail and an 800 px WebP background. Every fetch is SSRF-guarded.
 * All of it reads and writes the object store and may ask the collections service: it runs
 * before a unit of work, never inside one, and what it stored for a row that is then not
 * written is removed again (removeObjects).
 */
import { createHash } from "node:crypto";
import { fileTypeFromBuffer } from "file-type";
import {
  AppError, ImageError, ObjectTooLargeError, OutboundError, currentCall, emitObjectsOrphaned, fetchImageFor, fetchStream, freshStoreKey, isRasterImage, isStoreKey,
  mediaThumbnails, outsideCall, processImageFor, readFetchedBody, readObject, safeFetch, type Caller,
} from "@cms/platform";
import { pagePreview } from "../domain/page-preview.js";
import { checkOwnKey, isVideoHostingUrl, viewerOfMime } from "../domain/rules.js";
import { mimeOfUnsignedBytes } from "../domain/transfer-rules.js";
import type { MediaAccess } from "./access.js";
import type { MediaDeps } from "./ports.js";

/** Largest file media.create downloads from a URL. */
export const MAX_DOWNLOAD_BYTES = 100 * 1024 * 1024;
const MAX_PAGE_BYTES = 2 * 1024 * 1024;
/** How long a page read for its preview (title, image) may take to answer, and then to arrive. */
const PAGE_TIMEOUT_MS = 10_000;
const MAX_IMAGE_BYTES = 30 * 1024 * 1024;

/** What a source became: the row's file columns, and the thumbnails made for it. */
export interface Ingested {
  main_url: string;
  viewer: string;
  mime_type: string | null;
  size_bytes: number | null;
  sha256: string | null;
  /** Keys of the generated thumbnails, when there were any. */
  thumbnail_url?: string;
  background_image_url?: string;
  /** The page's title, a name when none was given. */
  title?: string;
}

/**
 * The thumbnail columns of a row: the pair (both set, or both null), and the object-store key it
 * was made from when it was (that source is consumed: the write that stores the pair orphans it).
 */
export interface Thumbnails { thumbnail_url: string | null; background_image_url: string | null; thumbnail_source: string | null }

/** The MIME type of bytes from their first 4100: the signature, else the text rules. */
export async function sniffBytes(head: Buffer, declared: string | undefined): Promise<string> {
  const found = await fileTypeFromBuffer(head);
  return found?.mime ?? mimeOfUnsignedBytes(head, declared);
}

function fetchError(err: unknown, field: string): never {
  if (err instanceof OutboundError) throw new AppError("invalid_request", `${field} could not be fetched: ${err.message}`, { field, reason: err.reason });
  throw err;
}

/** Ingesting over the object store, the network (SSRF-guarded) and the cover lookup of the collections service. */
export function createIngest({ objects, config, log, unitOfWork }: Pick<MediaDeps, "objects" | "config" | "log" | "unitOfWork">, access: MediaAccess) {
  const policy = { allowedHosts: config.outboundAllowedHosts };

  async function readPrefix(key: string, bytes: number, size: number): Promise<Buffer> {
    // No ranged read of an empty object: S3 refuses a range that starts at its end.
    if (size === 0) return Buffer.alloc(0);
    return (await readObject(objects, key, { range: { start: 0, end: Math.min(bytes, size) - 1 } })) ?? Buffer.alloc(0);
  }

  async function readAll(key: string, max: number): Promise<Buffer> {
    let bytes: Buffer | undefined;
    try {
      bytes = await readObject(objects, key, { maxBytes: max });
    } catch (err) {
      if (err instanceof ObjectTooLargeError) throw new ImageError(`image larger than ${max} bytes`);
      throw err;
    }
    if (!bytes) throw new AppError("invalid_request", "The stored object is gone.", { field: "source_url" });
    return bytes;
  }

  /** The MIME type of `size` stored bytes, sniffed; the declared type when the bytes say nothing. */
  async function sniff(key: string, size: number, declared: string | undefined): Promise<string> {
    return sniffBytes(await readPrefix(key, 4100, size), declared);
  }

  /** Stores the 200 px thumbnail and 800 px background of an image held in memory. */
  async function storeThumbnails(userId: string, collectionId: number, image: Buffer): Promise<{ thumbnail_url: string; background_image_url: string }> {
    const { thumbnail, background } = await mediaThumbnails(image);
    const thumbKey = freshStoreKey(userId, collectionId, "thumb.webp", "thumb.webp");
    const bgKey = freshStoreKey(userId, collectionId, "bg.webp", "bg.webp");
    await Promise.all([
      objects.put(thumbKey, thumbnail, { contentType: "image/webp", contentLength: thumbnail.length }),
      objects.put(bgKey, background, { contentType: "image/webp", contentLength: background.length }),
    ]);
    return { thumbnail_url: thumbKey, background_image_url: bgKey };
  }

  /** "Cover images must not be uploaded as media items": a collection's cover key is refused. */
  async function refuseCoverKey(key: string, field: string): Promise<void> {
    if ((await access.coverKeysAmong([key])).has(key)) {
      throw new AppError("invalid_request", `${field} is a collection's cover image; covers are not media items (set them with collections.update thumbnail_url).`, { field });
    }
  }

  /** Thumbnails from an object-store key (media.thumbnail_finalize, media.update thumbnail_url). */
  async function thumbnailsFromKey(caller: Caller, ownerUserId: string, collectionId: number, key: string): Promise<Thumbnails> {
    checkOwnKey(caller, ownerUserId, key, "thumbnail_url");
    await refuseCoverKey(key, "thumbnail_url");
    let image: Buffer;
    try {
      image = await readAll(key, MAX_IMAGE_BYTES);
    } catch (err) {
      if (err instanceof AppError) throw new AppError("invalid_request", "thumbnail_url names no stored object: it was never uploaded, or thumbnails were already made from it (a source is removed once its thumbnails are stored).", { field: "thumbnail_url" });
      if (err instanceof ImageError) throw new AppError("invalid_request", `thumbnail_url is too large: ${err.message}`, { field: "thumbnail_url" });
      throw err;
    }
    return { ...await processImageFor("thumbnail_url", () => storeThumbnails(ownerUserId, collectionId, image)), thumbnail_source: key };
  }

  /** The stored pair of an http(s) image, fetched through the SSRF guard (a 400 on thumbnail_url when unusable). */
  async function pairFromRemote(ownerUserId: string, collectionId: number, url: string) {
    const body = await fetchImageFor("thumbnail_url", url, { policy, maxBytes: MAX_IMAGE_BYTES, timeoutMs: 10_000 });
    return processImageFor("thumbnail_url", () => storeThumbnails(ownerUserId, collectionId, body));
  }

  /** Thumbnails from an http(s) image URL (media.thumbnail_finalize of a URL): no stored source to consume. */
  async function thumbnailsFromRemote(ownerUserId: string, collectionId: number, url: string): Promise<Thumbnails> {
    return { ...await pairFromRemote(ownerUserId, collectionId, url), thumbnail_source: null };
  }

  /** Thumbnails from an image URL (a page's preview image); failures leave the item without one. */
  async function thumbnailsFromUrl(ownerUserId: string, collectionId: number, url: string) {
    try {
      return await pairFromRemote(ownerUserId, collectionId, url);
    } catch (err) {
      log.info({ err: (err as Error).message, url }, "preview image not usable");
      return undefined;
    }
  }

  /**
   * The thumbnail columns of a row being written: from thumbnail_url when given (an object-store
   * key is made into thumbnails, anything else is kept as it is), else what ingesting made.
   */
  async function thumbnailFields(caller: Caller, ownerUserId: string, collectionId: number, thumbnailUrl: string | undefined, ingested?: Ingested): Promise<Thumbnails> {
    if (thumbnailUrl && isStoreKey(thumbnailUrl)) return thumbnailsFromKey(caller, ownerUserId, collectionId, thumbnailUrl);
    if (thumbnailUrl) return { thumbnail_url: thumbnailUrl, background_image_url: null, thumbnail_source: null };
    return { thumbnail_url: ingested?.thumbnail_url ?? null, background_image_url: ingested?.background_image_url ?? null, thumbnail_source: null };
  }

  /** Ingests source_url for media.create / media.replace (and every route that stored bytes itself). */
  async function ingestSource(caller: Caller, ownerUserId: string, collectionId: number, sourceUrl: string, viewerHint: string | undefined, wantThumbnail: boolean): Promise<Ingested> {
    if (isStoreKey(sourceUrl)) {
      checkOwnKey(caller, ownerUserId, sourceUrl, "source_url");
      await refuseCoverKey(sourceUrl, "source_url");
      const info = await objects.head(sourceUrl);
      if (!info) throw new AppError("invalid_request", "source_url names no stored object: it was never uploaded, or it was removed (an upload no item takes up is removed a day after its URL expired; so is a deleted item's file).", { field: "source_url" });
      const mime = await sniff(sourceUrl, info.size, info.contentType);
      const out: Ingested = { main_url: sourceUrl, viewer: viewerOfMime(mime), mime_type: mime, size_bytes: info.size, sha256: null };
      if (wantThumbnail && isRasterImage(mime) && info.size <= MAX_IMAGE_BYTES) {
        try { Object.assign(out, await storeThumbnails(ownerUserId, collectionId, await readAll(sourceUrl, MAX_IMAGE_BYTES))); } catch (err) { if (!(err instanceof ImageError)) throw err; }
      }
      return out;
    }
    let url: URL;
    try { url = new URL(sourceUrl); } catch { throw new AppError("invalid_request", "source_url must be an http(s) URL or an object-store key.", { field: "source_url" }); }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new AppError("invalid_request", "source_url must be an http(s) URL or an object-store key.", { field: "source_url" });

    const website = async (html?: string): Promise<Ingested> => {
      const out: Ingested = { main_url: url.toString(), viewer: "website", mime_type: "text/html", size_bytes: null, sha256: null };
      if (wantThumbnail) {
        let page = html;
        if (page === undefined) {
          try {
            const res = await safeFetch(url.toString(), { policy, maxBytes: MAX_PAGE_BYTES, timeoutMs: PAGE_TIMEOUT_MS });
            page = res.status === 200 && String(res.headers["content-type"] ?? "").includes("html") ? res.body.toString("utf8") : undefined;
          } catch (err) {
            if (err instanceof OutboundError && err.reason === "blocked_host") fetchError(err, "source_url");
            page = undefined;
          }
        }
        if (page) {
          const preview = pagePreview(page, url.toString());
          if (preview.title) out.title = preview.title;
          if (preview.image) Object.assign(out, await thumbnailsFromUrl(ownerUserId, collectionId, preview.image) ?? {});
        }
      }
      return out;
    };

    // Video-hosting pages and explicit links stay external, whatever the viewer says.
    if (isVideoHostingUrl(url.toString()) || viewerHint === "website" || viewerHint === "embed") return website();

    let res;
    try {
      // Bounded per pause, not in total (a file of any size at any speed), until the call ends:
      // the gateway gives up after 60 s, and the download stops with it.
      res = await fetchStream(url.toString(), { policy, timeoutMs: 30_000, signal: currentCall()?.signal });
    } catch (err) {
      fetchError(err, "source_url");
    }
    if (res.status !== 200) {
      res.body.destroy();
      throw new AppError("invalid_request", `Fetching source_url answered HTTP ${res.status}.`, { field: "source_url" });
    }
    const declared = String(res.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    if (declared === "text/html" || declared === "application/xhtml+xml") {
      // A page that cannot be read (in time) is a link without a preview, as in website().
      const page = await readFetchedBody(res, { maxBytes: MAX_PAGE_BYTES, timeoutMs: PAGE_TIMEOUT_MS, truncate: true }).catch(() => undefined);
      return website(page?.toString("utf8") ?? "");
    }
    const declaredLength = Number(res.headers["content-length"]);
    if (declaredLength > MAX_DOWNLOAD_BYTES) {
      res.body.destroy();
      throw new AppError("invalid_request", `source_url is larger than ${MAX_DOWNLOAD_BYTES} bytes.`, { field: "source_url" });
    }
    const key = freshStoreKey(caller.userId, collectionId, url.pathname, "download");
    let stored;
    try {
      stored = await objects.put(key, res.body, { contentType: declared || "application/octet-stream", maxBytes: MAX_DOWNLOAD_BYTES });
    } catch (err) {
      if ((err as Error).name === "ObjectTooLargeError") throw new AppError("invalid_request", `source_url is larger than ${MAX_DOWNLOAD_BYTES} bytes.`, { field: "source_url" });
      throw new AppError("invalid_request", `Downloading source_url failed: ${(err as Error).message}`, { field: "source_url" });
    }
    const mime = await sniff(key, stored.size, declared);
    const out: Ingested = { main_url: key, viewer: viewerOfMime(mime), mime_type: mime, size_bytes: stored.size, sha256: stored.sha256 };
    if (wantThumbnail && isRasterImage(mime) && stored.size <= MAX_IMAGE_BYTES) {
      try { Object.assign(out, await storeThumbnails(ownerUserId, collectionId, await readAll(key, MAX_IMAGE_BYTES))); } catch (err) { if (!(err instanceof ImageError)) throw err; }
    }
    return out;
  }

  /** Best-effort removal of objects a failed attempt stored (the outbox is for rows that committed). */
  async function removeObjects(keys: Array<string | null | undefined>): Promise<void> {
    const list = keys.filter((k): k is string => Boolean(k));
    if (!list.length) return;
    try {
      await objects.delete(list);
    } catch (err) {
      // The store failed the removal too (it is down): the objects are orphans, removed later by
      // the object-cleanup consumer, which retries until the store answers and checks again
      // that no row took them meanwhile.
      // Recorded outside the call: owed whatever became of its caller (the attempt may have failed
      // because its deadline passed, and an ended call's unit commits nothing).
      log.warn({ err, keys: list }, "could not remove objects of a failed upload; left to the orphan cleanup");
      await outsideCall(() => unitOfWork(async (_stores, events) => { await emitObjectsOrphaned(events, list); }))
        .catch((e) => log.error({ err: e, keys: list }, "could not record orphaned objects"));
    }
  }

  /** Hex SHA-256 of a stored object, streamed. */
  async function hashObject(key: string): Promise<{ sha256: string; size: number } | undefined> {
    const obj = await objects.get(key);
    if (!obj) return undefined;
    const hash = createHash("sha256");
    let size = 0;
    for await (const c of obj.body) { hash.update(c as Buffer); size += (c as Buffer).length; }
    return { sha256: hash.digest("hex"), size };
  }

  return { ingestSource, thumbnailFields, thumbnailsFromKey, thumbnailsFromRemote, removeObjects, hashObject };
}

/** Bringing bytes in and making thumbnails: object-store and network I/O, never inside a unit of work. */
export type Ingest = ReturnType<typeof createIngest>;
