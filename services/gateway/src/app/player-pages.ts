/**
 * What a share URL's player page shows one viewer: the collections service decides whether the
 * viewer may see the published collection (and which sub-collections it may open), the media
 * service lists the items, and the gateway mints the download links the page loads its images,
 * video and audio from (Range requests work on them, so players seek).
 *
 * Links expire on the hour, two to three hours ahead: every render within the same hour mints
 * the same URLs, so browsers reuse what they cached.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { downloadLink, fromConnectError, type Clients } from "@cms/platform";
import {
  isHttpUrl, pageItemOf, playbackPrefsOf, type PageChild, type PageItem, type PlayerPageModel, type UrlOf,
} from "../domain/player-page.js";

/** The page shows at most this many items (and says how many there are). */
export const PAGE_ITEMS = 500;
const HOUR_MS = 3_600_000;

export interface PlayerPagesDeps {
  clients: Clients;
  grantSecret: string;
  /** BASE_URL, read at each render (a derived origin is known only once the server listens). */
  baseUrl: () => string;
  assetVersion: string;
  /** Where the live channel is (the page of a signed-in owner subscribes). */
  eventsPath: string;
  now?: () => number;
}

/** How the page is asked for: the viewer (undefined: anonymous) and the ?fullscreen= override. */
export interface PageRequest { handle: string; slug: string; viewerUserId?: string; fullscreen?: boolean }

export interface PlayerPages {
  /** The page's model, or undefined when the viewer may not see a published collection there. */
  load(req: PageRequest): Promise<PlayerPageModel | undefined>;
}

export function createPlayerPages(deps: PlayerPagesDeps): PlayerPages {
  const now = deps.now ?? Date.now;

  /** The link for a stored object, an asset or an http(s) URL; undefined for anything else. */
  function urlMaker(): UrlOf {
    const expiresAt = Math.ceil((now() + 2 * HOUR_MS) / HOUR_MS) * HOUR_MS;
    return (ref, contentType) => {
      if (ref.startsWith("store://")) {
        const filename = ref.slice(ref.lastIndexOf("/") + 1) || "file";
        return downloadLink(deps.grantSecret, deps.baseUrl(), { key: ref, content_type: contentType, filename }, expiresAt);
      }
      if (ref.startsWith("/assets/")) return ref;
      return isHttpUrl(ref) ? ref : undefined;
    };
  }

  return {
    async load(req) {
      let page;
      try {
        page = await deps.clients.get(CollectionsService).getPlayerPage({ handle: req.handle, slug: req.slug, viewerUserId: req.viewerUserId ?? "" });
      } catch (err) {
        if (err instanceof ConnectError && (err.code === Code.NotFound || err.code === Code.InvalidArgument)) return undefined;
        throw fromConnectError(err);
      }
      const c = page.collection!;
      const collectionId = Number(c.id);
      let listed;
      try {
        listed = await deps.clients.get(MediaService).listPlayerItems({ collectionId: c.id, limit: PAGE_ITEMS });
      } catch (err) {
        throw fromConnectError(err);
      }
      const urlOf = urlMaker();
      const children = new Map<number, PageChild>(page.children.map((ch) => [Number(ch.id), {
        id: Number(ch.id), name: ch.name, shareUrl: ch.shareUrl, coverThumbnailUrl: ch.coverThumbnailUrl, isNsfw: ch.isNsfw,
      }]));
      const items = listed.items
        .map((m) => pageItemOf({
          id: m.id, name: m.name, description: m.description, mainUrl: m.mainUrl, viewer: m.viewer, mimeType: m.mimeType,
          thumbnailUrl: m.thumbnailUrl, backgroundImageUrl: m.backgroundImageUrl, textNote: m.note?.textNote,
          displayMode: m.note?.displayMode, placeholderKind: m.note?.placeholderKind, linkedCollectionId: m.linkedCollectionId,
        }, urlOf, children))
        .filter((i): i is PageItem => i !== undefined);
      const hidden = listed.items.length - items.length;
      return {
        collectionId,
        title: c.name,
        description: c.description,
        handle: c.publishHandle ?? req.handle,
        shareUrl: c.shareUrl ?? "",
        coverUrl: c.thumbnailUrl ? urlOf(c.thumbnailUrl, "image/webp") : undefined,
        isNsfw: c.isNsfw,
        searchable: c.searchable,
        bootFullscreen: req.fullscreen ?? c.openFullscreen,
        prefs: playbackPrefsOf(c.playbackPrefs),
        items,
        total: Number(listed.total) - hidden,
        live: page.viewerIsOwner,
        eventsPath: deps.eventsPath,
        assetVersion: deps.assetVersion,
      };
    },
  };
}
