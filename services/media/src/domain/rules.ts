/** Media rules as plain functions: names, search folding, viewers, text-note rendering, list hints. */
import { AppError, objectKeyOf, type Caller } from "@cms/platform";

// ---- names and search ------------------------------------------------------------------------

/** Names shaped like `__x__` are reserved (covers and internal items use them). */
export function isReservedName(name: string): boolean {
  return /^__.+__$/s.test(name.trim());
}

/** Refuses a reserved name (see isReservedName) on `field`. */
export function checkName(name: string | undefined, field = "name"): void {
  if (name !== undefined && isReservedName(name)) {
    throw new AppError("invalid_request", `Names with a leading and trailing double underscore ("${name}") are reserved; cover images are uploaded with collections.get_upload_url.`, { field });
  }
}

/** A name for an item made from a file: the given name, else the file's own name (unless reserved). */
export function itemName(name: string | undefined, filename: string | undefined): string | null {
  if (name !== undefined) return name;
  const base = filename?.split(/[\\/]/).pop()?.trim();
  if (!base || isReservedName(base)) return null;
  return base.slice(0, 500);
}

/** Lower case without diacritics, as the search_text column is built (unaccent + lower). */
export function foldAccents(s: string): string {
  return s.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase();
}

/** A store key the caller may adopt: theirs, or the collection owner's. */
export function checkOwnKey(caller: Pick<Caller, "userId">, ownerUserId: string, key: string, field: string): void {
  let path: string;
  try { path = objectKeyOf(key); } catch { throw new AppError("invalid_request", `${field} is not a valid object-store key.`, { field }); }
  const user = path.split("/")[0];
  if (user !== caller.userId && user !== ownerUserId) throw new AppError("forbidden", `${field} names an object of another user.`);
}

// ---- viewers -------------------------------------------------------------------------------

const VIDEO_HOSTS = [
  "youtube.com", "youtu.be", "youtube-nocookie.com", "vimeo.com", "player.vimeo.com", "dailymotion.com", "dai.ly",
  "twitch.tv", "tiktok.com", "wistia.com", "loom.com", "streamable.com", "rumble.com", "bilibili.com", "facebook.com/watch",
];

/** Video-hosting pages are always stored as website links (external embeds), whatever viewer says. */
export function isVideoHostingUrl(url: string): boolean {
  let u: URL;
  try { u = new URL(url); } catch { return false; }
  const host = u.hostname.toLowerCase().replace(/^www\.|^m\./, "");
  return VIDEO_HOSTS.some((h) => {
    const [hh, path] = h.split("/") as [string, string | undefined];
    return (host === hh || host.endsWith(`.${hh}`)) && (!path || u.pathname.startsWith(`/${path}`));
  });
}

/** The viewer of stored bytes, from their (sniffed) MIME type. */
export function viewerOfMime(mime: string): string {
  const m = mime.toLowerCase();
  if (m.startsWith("image/")) return "image";
  if (m.startsWith("video/")) return "video";
  if (m.startsWith("audio/")) return "audio";
  if (m === "application/pdf") return "pdf";
  if (m === "text/markdown") return "markdown";
  if (m.startsWith("text/") || m === "application/json" || m === "application/xml") return "text";
  return "other";
}

// ---- text notes ----------------------------------------------------------------------------

/** The main_url of every inline text note (its text is in the row). */
export const TEXT_NOTE_URL = "inline://text-note";
/** The placeholder pictures a text note may show instead of a thumbnail. */
export const PLACEHOLDER_KINDS = ["log", "lyrics", "memory", "notes", "poem", "prompt", "specification", "summary", "tutorial"] as const;
/** One of PLACEHOLDER_KINDS. */
export type PlaceholderKind = (typeof PLACEHOLDER_KINDS)[number];

/** The asset path of a placeholder picture. */
export function placeholderPath(kind: string): string {
  return `/assets/player/carousel_placeholders_webp/carousel-placeholder-${kind}.webp`;
}

const MODE_OF_VIEWER: Record<string, string> = { text: "plain", markdown: "markdown", code: "code" };
const VIEWER_OF_MODE: Record<string, string> = { plain: "text", markdown: "markdown", code: "code" };

/**
 * The rendering of a text note from display_mode and/or viewer (`text` is plain); both sent must
 * agree. undefined when neither is sent (an update then keeps the type).
 */
export function textNoteMode(displayMode: string | undefined, viewer: string | undefined): { displayMode: string; viewer: string } | undefined {
  if (displayMode === undefined && viewer === undefined) return undefined;
  const fromViewer = viewer === undefined ? undefined : MODE_OF_VIEWER[viewer];
  if (viewer !== undefined && !fromViewer) throw new AppError("invalid_request", `viewer must be text, markdown or code for a text note.`, { field: "viewer" });
  if (displayMode !== undefined && fromViewer !== undefined && displayMode !== fromViewer) {
    throw new AppError("invalid_request", `display_mode "${displayMode}" and viewer "${viewer}" disagree (plain goes with text).`, { field: "viewer" });
  }
  const mode = displayMode ?? fromViewer!;
  return { displayMode: mode, viewer: VIEWER_OF_MODE[mode]! };
}

/** The row columns a text note's rendering sets: viewer, display_mode and the MIME type. */
export function textNoteColumns(mode: { displayMode: string; viewer: string }): { viewer: string; display_mode: string; mime_type: string } {
  return { viewer: mode.viewer, display_mode: mode.displayMode, mime_type: mode.displayMode === "markdown" ? "text/markdown" : "text/plain" };
}

/** Thumbnail of a text note: thumbnail_url first, then placeholder_kind, then `notes`. */
export function textNoteThumbnail(thumbnailUrl: string | undefined, kind: string | undefined): { thumbnailUrl: string; placeholderKind: string | null } {
  if (thumbnailUrl) return { thumbnailUrl, placeholderKind: null };
  const k = kind ?? "notes";
  return { thumbnailUrl: placeholderPath(k), placeholderKind: k };
}

// ---- list hints ----------------------------------------------------------------------------

export interface ListCounts {
  /** Rows matching the request. */
  total: number;
  /** Non-deleted rows of the collection, archived included. */
  all: number;
  /** Of those, archived. */
  archived: number;
  /** Rows matching without the tag/viewer/name filters (archived per the request). */
  withoutFilters: number;
  filtered: boolean;
  includeArchived: boolean;
  offset: number;
}

/** The hint fields of a media.list page: each present only when it applies. */
export interface ListHint { hint?: string; also_without_filters?: number; also_archived?: number }

/** Why a media.list page is empty, as the contract's hint fields. */
export function listHint(c: ListCounts): ListHint {
  if (c.total > 0 && c.offset >= c.total) return { hint: `The offset ${c.offset} is past the end: the collection has ${c.total} matching item(s).` };
  if (c.total > 0) return {};
  if (c.all === 0) return { hint: "The collection is empty." };
  if (c.filtered && c.withoutFilters > 0) return { also_without_filters: c.withoutFilters, hint: `Your filters excluded every item; ${c.withoutFilters} item(s) match without them.` };
  if (!c.includeArchived && c.archived > 0) return { also_archived: c.archived, hint: `Every item is archived; pass include_archived=true to list the ${c.archived} archived item(s).` };
  return { hint: "No item matches." };
}
