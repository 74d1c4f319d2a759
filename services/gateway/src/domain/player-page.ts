/**
 * The player page of a share URL ({APP_URL}/{handle}/{slug}) as plain functions: what kind of
 * item each media row is, how a text note renders, and the page's HTML. The server renders every
 * item (the page reads fine without its script); the script then turns the list into a player
 * (one item at a time, thumbnails, slideshow, keys, touch, live follow).
 *
 * Everything user-written goes through escapeHtml or markdown-it with raw HTML off, and every URL
 * placed in an attribute is one of ours (download links, assets) or an http(s) URL checked here.
 */
import MarkdownIt from "markdown-it";
import { escapeHtml } from "./html.js";

/** How the player shows an item. */
export type ItemKind = "image" | "video" | "audio" | "link" | "note" | "collection" | "file";

/** The slideshow's kinds (playback_prefs.kinds): which items it stops at. */
export type SlideKind = "image" | "video" | "audio" | "embed" | "other";

/** A media row as the page needs it (the fields of media.v1.Media it reads). */
export interface PageMedia {
  id: bigint | number;
  name?: string;
  description?: string;
  mainUrl: string;
  viewer: string;
  mimeType?: string;
  thumbnailUrl?: string;
  backgroundImageUrl?: string;
  textNote?: string;
  displayMode?: string;
  placeholderKind?: string;
  linkedCollectionId?: bigint | number;
}

/** A published sub-collection the viewer may open. */
export interface PageChild { id: number; name: string; shareUrl: string; coverThumbnailUrl?: string; isNsfw: boolean }

/** Turns a stored object (a store key, an asset path or an http(s) URL) into a URL the page may load; undefined when it may not. */
export type UrlOf = (ref: string, contentType: string | null) => string | undefined;

/** One item as the page renders it. */
export interface PageItem {
  mediaId: number;
  kind: ItemKind;
  slideKind: SlideKind;
  title: string;
  description?: string;
  /** The 200 px thumbnail (or a built-in placeholder). */
  thumbUrl: string;
  /** image: the 800 px background, else the original; video/audio/file: the stored file. */
  srcUrl?: string;
  mimeType?: string;
  /** link: the web page; collection: its player page. */
  href?: string;
  /** note: rendered HTML. */
  noteHtml?: string;
}

/** playback_prefs, normalized (conventions: kinds, loop, interval_seconds, shuffle). */
export interface PlaybackPrefs {
  kinds: Record<SlideKind, boolean>;
  loop: boolean;
  interval_seconds: number;
  shuffle: boolean;
}

export const DEFAULT_PREFS: PlaybackPrefs = {
  kinds: { image: true, video: true, audio: true, embed: false, other: false },
  loop: true,
  interval_seconds: 5,
  shuffle: false,
};

/** Stored prefs (already normalized by the collections service) over the defaults. */
export function playbackPrefsOf(stored: unknown): PlaybackPrefs {
  const p = (stored && typeof stored === "object" ? stored : {}) as Partial<PlaybackPrefs>;
  const kinds = { ...DEFAULT_PREFS.kinds };
  for (const k of Object.keys(kinds) as SlideKind[]) if (typeof p.kinds?.[k] === "boolean") kinds[k] = p.kinds[k];
  const interval = Number(p.interval_seconds);
  return {
    kinds,
    loop: typeof p.loop === "boolean" ? p.loop : DEFAULT_PREFS.loop,
    interval_seconds: Number.isInteger(interval) && interval >= 1 && interval <= 3600 ? interval : DEFAULT_PREFS.interval_seconds,
    shuffle: typeof p.shuffle === "boolean" ? p.shuffle : DEFAULT_PREFS.shuffle,
  };
}

/** The page's script and style sheet (their version goes into their URLs). */
export const PLAYER_ASSETS = ["/assets/player/player.js", "/assets/player/player.css"];

const TEXT_NOTE_URL = "inline://text-note";
const PLACEHOLDERS = "/assets/player/carousel_placeholders_webp/carousel-placeholder-";
/** Built-in thumbnails of items that have none. */
export const PLACEHOLDER_OF: Record<ItemKind, string> = {
  image: `${PLACEHOLDERS}memory.webp`,
  video: `${PLACEHOLDERS}memory.webp`,
  audio: `${PLACEHOLDERS}lyrics.webp`,
  link: `${PLACEHOLDERS}summary.webp`,
  note: `${PLACEHOLDERS}notes.webp`,
  collection: `${PLACEHOLDERS}log.webp`,
  file: `${PLACEHOLDERS}specification.webp`,
};

export function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === "https:" || u.protocol === "http:";
  } catch {
    return false;
  }
}

/** The kind of a media row on the page. */
export function itemKindOf(m: PageMedia): ItemKind {
  if (m.linkedCollectionId !== undefined && m.linkedCollectionId !== null) return "collection";
  if (m.mainUrl === TEXT_NOTE_URL) return "note";
  if (!m.mainUrl.startsWith("store://")) return "link";
  const mime = (m.mimeType ?? "").toLowerCase();
  if (m.viewer === "image" && (!mime || mime.startsWith("image/"))) return "image";
  if (m.viewer === "video" || mime.startsWith("video/")) return "video";
  if (m.viewer === "audio" || mime.startsWith("audio/")) return "audio";
  return "file";
}

export function slideKindOf(kind: ItemKind): SlideKind {
  if (kind === "image" || kind === "video" || kind === "audio") return kind;
  return kind === "link" ? "embed" : "other";
}

const markdown = new MarkdownIt({ html: false, linkify: true, typographer: false });
// Links in notes open elsewhere, never with the page's referrer or a handle on it.
const defaultLinkOpen = markdown.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
markdown.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  tokens[idx]!.attrSet("rel", "noopener noreferrer nofollow ugc");
  tokens[idx]!.attrSet("target", "_blank");
  return defaultLinkOpen(tokens, idx, options, env, self);
};
// Images in notes would be fetched from anywhere; the page's policy refuses them, so show them as links.
markdown.renderer.rules.image = (tokens, idx) => {
  const t = tokens[idx]!;
  const src = t.attrGet("src") ?? "";
  return `<a href="${escapeHtml(src)}" rel="noopener noreferrer nofollow ugc" target="_blank">${escapeHtml(t.content || src)}</a>`;
};

/** A text note as its display mode says: markdown rendered (raw HTML off), code and plain text as preformatted text. */
export function renderNote(text: string, displayMode: string | undefined): string {
  if (displayMode === "markdown") return `<div class="note note-markdown">${markdown.render(text)}</div>`;
  if (displayMode === "code") return `<pre class="note note-code"><code>${escapeHtml(text)}</code></pre>`;
  return `<div class="note note-plain">${escapeHtml(text)}</div>`;
}

/** A media row as the page shows it, its URLs made by `urlOf`; children are the sub-collections the viewer may open. */
export function pageItemOf(m: PageMedia, urlOf: UrlOf, children: Map<number, PageChild>): PageItem | undefined {
  const kind = itemKindOf(m);
  const mediaId = Number(m.id);
  const thumb = (m.thumbnailUrl && urlOf(m.thumbnailUrl, "image/webp")) || PLACEHOLDER_OF[kind];
  const base = { mediaId, kind, slideKind: slideKindOf(kind), title: m.name?.trim() || `Item ${mediaId}`, description: m.description || undefined, thumbUrl: thumb };
  switch (kind) {
    case "collection": {
      const child = children.get(Number(m.linkedCollectionId));
      // A sub-collection the viewer may not open is left out, name included.
      if (!child) return undefined;
      const cover = child.coverThumbnailUrl ? urlOf(child.coverThumbnailUrl, "image/webp") : undefined;
      return { ...base, title: m.name?.trim() || child.name, thumbUrl: (m.thumbnailUrl && urlOf(m.thumbnailUrl, "image/webp")) || cover || PLACEHOLDER_OF.collection, href: child.shareUrl };
    }
    case "note":
      return { ...base, noteHtml: renderNote(m.textNote ?? "", m.displayMode) };
    case "link":
      return isHttpUrl(m.mainUrl) ? { ...base, href: m.mainUrl } : undefined;
    case "image":
      return { ...base, srcUrl: (m.backgroundImageUrl && urlOf(m.backgroundImageUrl, "image/webp")) || urlOf(m.mainUrl, m.mimeType ?? null), mimeType: m.mimeType };
    default:
      return { ...base, srcUrl: urlOf(m.mainUrl, m.mimeType ?? null), mimeType: m.mimeType };
  }
}

/** Everything the page shows. */
export interface PlayerPageModel {
  collectionId: number;
  title: string;
  description?: string;
  handle: string;
  shareUrl: string;
  /** The 800 px cover and its small thumbnail, when the collection has a cover. */
  coverUrl?: string;
  isNsfw: boolean;
  /** Listed in public search: otherwise the page asks search engines not to index it. */
  searchable: boolean;
  /** open_fullscreen after the ?fullscreen= override. */
  bootFullscreen: boolean;
  prefs: PlaybackPrefs;
  items: PageItem[];
  /** Active items in all (the page shows the first ones). */
  total: number;
  /** The owner is signed in: the page follows ui.state and player.command live. */
  live: boolean;
  /** Where the live channel is. */
  eventsPath: string;
  /** Versions of the page's script and style sheet (their ETags), for cache-busting URLs. */
  assetVersion: string;
}

/** What the page's script reads (a JSON data block; scripts run only from /assets). */
export function pageData(m: PlayerPageModel): Record<string, unknown> {
  return {
    collection_id: m.collectionId,
    boot_fullscreen: m.bootFullscreen,
    prefs: m.prefs,
    nsfw: m.isNsfw,
    live: m.live,
    events_path: m.eventsPath,
    items: m.items.map((i) => ({ media_id: i.mediaId, kind: i.kind, slide_kind: i.slideKind })),
  };
}

/** JSON that can sit inside a <script> element: no "</script", "<!--" or line separators survive. */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, "\\u003c").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

function itemBody(i: PageItem): string {
  const title = escapeHtml(i.title);
  const desc = i.description ? `<p class="item-desc">${escapeHtml(i.description)}</p>` : "";
  switch (i.kind) {
    case "image":
      return `<figure class="frame"><img class="main" src="${escapeHtml(i.srcUrl ?? i.thumbUrl)}" alt="${title}" loading="lazy" decoding="async"><figcaption>${title}${desc}</figcaption></figure>`;
    case "video":
      return `<figure class="frame"><video class="main" controls preload="metadata" playsinline poster="${escapeHtml(i.thumbUrl)}" src="${escapeHtml(i.srcUrl ?? "")}"></video><figcaption>${title}${desc}</figcaption></figure>`;
    case "audio":
      return `<figure class="frame frame-audio"><img class="poster" src="${escapeHtml(i.thumbUrl)}" alt="" loading="lazy"><audio class="main" controls preload="metadata" src="${escapeHtml(i.srcUrl ?? "")}"></audio><figcaption>${title}${desc}</figcaption></figure>`;
    case "note":
      return `<article class="frame frame-note"><h2>${title}</h2>${i.noteHtml ?? ""}${desc}</article>`;
    case "link": {
      let host = "";
      try { host = new URL(i.href!).hostname; } catch { /* checked by pageItemOf */ }
      return `<a class="frame card" href="${escapeHtml(i.href!)}" rel="noopener noreferrer nofollow ugc" target="_blank"><img src="${escapeHtml(i.thumbUrl)}" alt="" loading="lazy"><span class="card-text"><strong>${title}</strong>${desc}<span class="host">${escapeHtml(host)}</span></span></a>`;
    }
    case "collection":
      return `<a class="frame card card-collection" href="${escapeHtml(i.href!)}"><img src="${escapeHtml(i.thumbUrl)}" alt="" loading="lazy"><span class="card-text"><strong>${title}</strong>${desc}<span class="host">Collection</span></span></a>`;
    default:
      return `<figure class="frame"><a class="card" href="${escapeHtml(i.srcUrl ?? "#")}" download><img src="${escapeHtml(i.thumbUrl)}" alt="" loading="lazy"><span class="card-text"><strong>${title}</strong>${desc}<span class="host">${escapeHtml(i.mimeType ?? "file")}</span></span></a></figure>`;
  }
}

const svg = (cls: string, path: string) => `<svg class="icon ${cls}" viewBox="0 0 24 24" aria-hidden="true" focusable="false"><path d="${path}"/></svg>`;
/** The controls' icons (system fonts lack some of the symbols). */
const ICONS = {
  previous: svg("i-previous", "M6 5h2v14H6zM20 5v14L9 12z"),
  next: svg("i-next", "M16 5h2v14h-2zM4 5v14l11-7z"),
  play: svg("i-play", "M7 4v16l13-8z"),
  pause: svg("i-pause", "M6 4h4v16H6zm8 0h4v16h-4z"),
  grid: svg("i-grid", "M4 4h7v7H4zm9 0h7v7h-7zM4 13h7v7H4zm9 0h7v7h-7z"),
  fullscreen: svg("i-fullscreen", "M4 4h6v2H6v4H4zm10 0h6v6h-2V6h-4zM4 14h2v4h4v2H4zm14 0h2v6h-6v-2h4z"),
};

/** The page's HTML. */
export function renderPlayerPage(m: PlayerPageModel): string {
  const title = escapeHtml(m.title);
  const summary = m.description?.trim() || `${m.total} item${m.total === 1 ? "" : "s"} shared by @${m.handle}`;
  const meta = [
    `<meta name="description" content="${escapeHtml(summary.slice(0, 300))}">`,
    `<link rel="canonical" href="${escapeHtml(m.shareUrl)}">`,
    `<meta property="og:type" content="website">`,
    `<meta property="og:title" content="${title}">`,
    `<meta property="og:description" content="${escapeHtml(summary.slice(0, 300))}">`,
    `<meta property="og:url" content="${escapeHtml(m.shareUrl)}">`,
    ...(m.coverUrl ? [`<meta property="og:image" content="${escapeHtml(m.coverUrl)}">`, `<meta name="twitter:image" content="${escapeHtml(m.coverUrl)}">`] : []),
    `<meta name="twitter:card" content="${m.coverUrl ? "summary_large_image" : "summary"}">`,
    `<meta name="twitter:title" content="${title}">`,
    `<meta name="twitter:description" content="${escapeHtml(summary.slice(0, 200))}">`,
    ...(m.searchable ? [] : [`<meta name="robots" content="noindex">`]),
  ].join("\n");
  const items = m.items.map((i, n) =>
    `<li class="item item-${i.kind}" id="item-${i.mediaId}" data-index="${n}" data-media-id="${i.mediaId}" data-kind="${i.kind}">${itemBody(i)}</li>`).join("\n");
  const strip = m.items.map((i, n) =>
    `<button type="button" class="thumb" data-index="${n}" aria-label="${escapeHtml(i.title)}"><img src="${escapeHtml(i.thumbUrl)}" alt="" loading="lazy" width="100" height="100"></button>`).join("");
  const more = m.total > m.items.length ? `<p class="more">Showing the first ${m.items.length} of ${m.total} items.</p>` : "";
  const cover = m.coverUrl ? `<img class="cover" src="${escapeHtml(m.coverUrl)}" alt="">` : "";
  const empty = m.items.length ? "" : `<p class="empty">This collection has nothing to show yet.</p>`;
  const nsfw = m.isNsfw
    ? `<div class="gate" id="nsfw-gate" role="dialog" aria-modal="true" aria-labelledby="gate-title"><div><h2 id="gate-title">Sensitive content</h2><p>The owner marked this collection as not safe for work.</p><button type="button" id="nsfw-accept">Show it</button><noscript><p>Turn on JavaScript to continue.</p></noscript></div></div>`
    : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · @${escapeHtml(m.handle)}</title>
${meta}
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/player/player.css?v=${m.assetVersion}">
<script src="/assets/player/player.js?v=${m.assetVersion}" defer></script>
</head>
<body class="${m.isNsfw ? "nsfw" : ""}" data-view="carousel">
<header class="head">${cover}<div class="head-text"><h1>${title}</h1><p class="by">@${escapeHtml(m.handle)} · ${m.total} item${m.total === 1 ? "" : "s"}</p>${m.description ? `<p class="desc">${escapeHtml(m.description)}</p>` : ""}</div></header>
${nsfw}
<main class="player" id="player">
<div class="controls" id="controls" hidden>
<button type="button" data-action="previous" aria-label="Previous (left arrow)">${ICONS.previous}</button>
<button type="button" data-action="toggle" aria-label="Play or pause (space)" id="play">${ICONS.play}${ICONS.pause}</button>
<button type="button" data-action="next" aria-label="Next (right arrow)">${ICONS.next}</button>
<span class="position" id="position"></span>
<button type="button" data-action="view" aria-label="Grid or carousel">${ICONS.grid}</button>
<button type="button" data-action="fullscreen" aria-label="Fullscreen (f)">${ICONS.fullscreen}</button>
</div>
<ol class="items" id="items">
${items}
</ol>
${empty}${more}
<nav class="strip" id="strip" aria-label="Items" hidden>${strip}</nav>
</main>
<script type="application/json" id="player-data">${scriptJson(pageData(m))}</script>
</body></html>`;
}

/** The friendly 404 of a share URL that shows nothing (unknown, unpublished, deleted or not visible). */
export function renderPageNotFound(assetVersion: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Nothing here</title><meta name="robots" content="noindex"><link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/player/player.css?v=${assetVersion}">
</head><body class="not-found"><main class="missing"><h1>Nothing here</h1>
<p>This link does not lead to a published collection. It may have been unpublished, deleted, or shared with its owner's collaborators only.</p>
<p>If someone sent you this link, ask them for a new one.</p></main></body></html>`;
}
