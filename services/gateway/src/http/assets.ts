/** Static assets of the player (its script and style sheet, text-note placeholder thumbnails), served from services/gateway/assets. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { extname, resolve, sep } from "node:path";

const ROOT = fileURLToPath(new URL("../../assets/", import.meta.url));
const TYPES: Record<string, string> = {
  ".webp": "image/webp", ".png": "image/png", ".svg": "image/svg+xml", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
};

/** Where the static assets are served. */
export const ASSETS_PREFIX = "/assets/";

/**
 * A short hash of some assets' bytes (paths under /assets/), read once at start: pages put it in
 * the assets' URLs so a new release is fetched at once however long browsers cache the old one.
 */
export function assetsVersion(paths: string[]): string {
  const h = createHash("sha256");
  for (const p of paths) h.update(readFileSync(resolve(ROOT, p.slice(ASSETS_PREFIX.length))));
  return h.digest("hex").slice(0, 12);
}

/** GET/HEAD /assets/<file>: read once, kept in memory, with an ETag. */
export function createAssetHandler() {
  const cache = new Map<string, { body: Buffer; etag: string; type: string }>();
  return async function handleAsset(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const file = resolve(ROOT, decodeURIComponent(path.slice(ASSETS_PREFIX.length)));
    const type = TYPES[extname(file)];
    if (!file.startsWith(ROOT.endsWith(sep) ? ROOT : ROOT + sep) || !type || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "not_found", detail: `No asset at ${path}.` }));
      return;
    }
    let hit = cache.get(file);
    if (!hit) {
      try {
        const body = await readFile(file);
        hit = { body, etag: `"${createHash("sha256").update(body).digest("hex").slice(0, 32)}"`, type };
        cache.set(file, hit);
      } catch {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: "not_found", detail: `No asset at ${path}.` }));
        return;
      }
    }
    if (req.headers["if-none-match"] === hit.etag) { res.writeHead(304, { etag: hit.etag }); res.end(); return; }
    res.writeHead(200, { "content-type": hit.type, "content-length": hit.body.length, etag: hit.etag, "cache-control": "public, max-age=86400" });
    res.end(req.method === "HEAD" ? undefined : hit.body);
  };
}
