/** Image processing with sharp: covers and media thumbnails as WebP. */
import sharp from "sharp";

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
