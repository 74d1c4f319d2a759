/**
 * GET/HEAD {APP_URL}/{handle}/{slug}: a published collection's player page, or a friendly 404
 * page (unknown, unpublished, deleted, or not visible to this viewer). The page loads its script
 * and style sheet from /assets (nothing inline runs: the policy allows scripts from 'self' only),
 * its images, video and audio from download links on the API origin.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { PlayerPages } from "../app/player-pages.js";
import { renderPageNotFound, renderPlayerPage } from "../domain/player-page.js";

/** A share URL's path: two segments, neither empty. */
const PAGE_PATH = /^\/([^/]+)\/([^/]+)\/?$/;

export interface PlayerPageDeps {
  pages: PlayerPages;
  /** BASE_URL, where the download links are: the policy lets images and media load from there (read at each render). */
  baseUrl: () => string;
  assetVersion: string;
  /** The signed-in viewer of a request (its web session), if any. */
  viewerOf?: (req: IncomingMessage) => Promise<string | undefined>;
}

/** Whether a path has the shape of a share URL. */
export function isPagePath(path: string): boolean {
  return PAGE_PATH.test(path);
}

/** ?fullscreen=false (or true) overrides open_fullscreen; anything else leaves it. */
export function fullscreenOverride(search: URLSearchParams): boolean | undefined {
  const v = search.get("fullscreen")?.toLowerCase();
  if (v === "false" || v === "0" || v === "no") return false;
  if (v === "true" || v === "1" || v === "yes") return true;
  return undefined;
}

export function createPlayerPageHandler(deps: PlayerPageDeps) {
  const policy = (mediaOrigin: string) => [
    "default-src 'none'", "script-src 'self'", "style-src 'self'", `img-src 'self' ${mediaOrigin} https: data:`,
    `media-src 'self' ${mediaOrigin}`, "connect-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
  ].join("; ");

  function send(req: IncomingMessage, res: ServerResponse, status: number, html: string): void {
    res.writeHead(status, {
      "content-type": "text/html; charset=utf-8",
      "content-length": Buffer.byteLength(html),
      // The page carries download links that expire, and what it shows depends on the viewer.
      "cache-control": "private, no-store",
      "content-security-policy": policy(new URL(deps.baseUrl()).origin),
      "referrer-policy": "strict-origin-when-cross-origin",
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY",
    });
    res.end(req.method === "HEAD" ? undefined : html);
  }

  return async function handlePage(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://page");
    const m = PAGE_PATH.exec(url.pathname);
    let handle: string, slug: string;
    try {
      handle = decodeURIComponent(m![1]!);
      slug = decodeURIComponent(m![2]!);
    } catch {
      send(req, res, 404, renderPageNotFound(deps.assetVersion));
      return;
    }
    const viewerUserId = await deps.viewerOf?.(req);
    const model = await deps.pages.load({ handle: handle.replace(/^@/, ""), slug, viewerUserId, fullscreen: fullscreenOverride(url.searchParams) });
    if (!model) { send(req, res, 404, renderPageNotFound(deps.assetVersion)); return; }
    send(req, res, 200, renderPlayerPage(model));
  };
}
