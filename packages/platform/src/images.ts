/** Image processing with sharp: covers and media thumbnails as WebP. */
import sharp from "sharp";
import { AppError } from "./errors.js";
import { OutboundError, safeFetch, type FetchOptions } from "./outbound.js";

// Decompression bombs: refuse images above this many pixels.
const LIMIT_INPUT_PIXELS = 100_000_000;

export class ImageError extends Error {
  override name = "ImageError";
}

async function webp(input: Buffer, width: number, quality = 80): Promise<Buffer> {
  try {
    return await sharp(input, { limitInputPixels: LIMIT_INPUT_PIXELS })
      .rotate()
      .resize({ width, height: width, fit: "inside", withoutEnlargement: true })
      .webp({ quality })
      .toBuffer();
  } catch (err) {
    throw new ImageError(`The image could not be processed: ${(err as Error).message}`);
  }
}

/** A cover: main WebP image (up to 1600 px) and a 400 px thumbnail. */
export async function coverImages(input: Buffer): Promise<{ main: Buffer; thumbnail: Buffer }> {
  const [main, thumbnail] = await Promise.all([webp(input, 1600, 82), webp(input, 400)]);
  return { main, thumbnail };
}

/** A media item's 200 px carousel thumbnail and 800 px background. */
export async function mediaThumbnails(input: Buffer): Promise<{ thumbnail: Buffer; background: Buffer }> {
  const [thumbnail, background] = await Promise.all([webp(input, 200), webp(input, 800)]);
  return { thumbnail, background };
}

const RASTER = new Set(["image/jpeg", "image/png", "image/webp", "image/gif", "image/avif", "image/tiff", "image/heif"]);

export function isRasterImage(contentType: string | undefined): boolean {
  return Boolean(contentType && RASTER.has(contentType.split(";")[0]!.trim().toLowerCase()));
}

/**
 * An image named by a request field, fetched through the SSRF guard: anything short of a 200
 * with the bytes is a 400 on that field.
 */
export async function fetchImageFor(field: string, url: string, opts: FetchOptions): Promise<Buffer> {
  try {
    const res = await safeFetch(url, opts);
    if (res.status !== 200) throw new AppError("invalid_request", `Fetching ${field} answered HTTP ${res.status}.`, { field });
    return res.body;
  } catch (err) {
    if (err instanceof OutboundError) throw new AppError("invalid_request", `${field} could not be fetched: ${err.message}`, { field, reason: err.reason });
    throw err;
  }
}

/** Image work on the bytes a request field named: an image sharp cannot read is a 400 on it. */
export async function processImageFor<T>(field: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ImageError) throw new AppError("invalid_request", `${field} is not a processable raster image: ${err.message}`, { field });
    throw err;
  }
}
