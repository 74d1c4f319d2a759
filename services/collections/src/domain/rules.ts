/**
 * The collections service's rules as plain functions: publish rules, searchable, playback
 * preferences, slugs, restore windows, cycles and CSV (tags: normalizeTags of the platform). No I/O here.
 */
import { AppError } from "@cms/platform";

export const ACCESS_LEVELS = ["private", "public", "registered", "restricted"] as const;
export type AccessLevel = (typeof ACCESS_LEVELS)[number];

// ---- playback preferences ------------------------------------------------------------------

export interface PlaybackPrefs {
  kinds: { image: boolean; video: boolean; audio: boolean; embed: boolean; other: boolean };
  loop: boolean;
  interval_seconds: number;
  shuffle: boolean;
}

export const DEFAULT_PLAYBACK_PREFS: PlaybackPrefs = {
  kinds: { image: true, video: true, audio: true, embed: false, other: false },
  loop: true,
  interval_seconds: 5,
  shuffle: false,
};

const KIND_KEYS = Object.keys(DEFAULT_PLAYBACK_PREFS.kinds);
const PREF_KEYS = Object.keys(DEFAULT_PLAYBACK_PREFS);

/** Partial input stored normalized with defaults filled in; unknown keys are refused. */
export function normalizePlaybackPrefs(input: unknown): PlaybackPrefs {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    throw new AppError("invalid_request", "playback_prefs must be an object.", { field: "playback_prefs" });
  }
  const p = input as Record<string, unknown>;
  for (const k of Object.keys(p)) {
    if (!PREF_KEYS.includes(k)) throw new AppError("invalid_request", `Unknown playback_prefs key "${k}"; known: ${PREF_KEYS.join(", ")}.`, { field: `playback_prefs.${k}` });
  }
  const out: PlaybackPrefs = structuredClone(DEFAULT_PLAYBACK_PREFS);
  if (p.kinds !== undefined) {
    if (p.kinds === null || typeof p.kinds !== "object" || Array.isArray(p.kinds)) throw new AppError("invalid_request", "playback_prefs.kinds must be an object of booleans.", { field: "playback_prefs.kinds" });
    for (const [k, v] of Object.entries(p.kinds as Record<string, unknown>)) {
      if (!KIND_KEYS.includes(k)) throw new AppError("invalid_request", `Unknown playback_prefs.kinds key "${k}"; known: ${KIND_KEYS.join(", ")}.`, { field: `playback_prefs.kinds.${k}` });
      if (typeof v !== "boolean") throw new AppError("invalid_request", `playback_prefs.kinds.${k} must be a boolean.`, { field: `playback_prefs.kinds.${k}` });
      out.kinds[k as keyof PlaybackPrefs["kinds"]] = v;
    }
  }
  for (const k of ["loop", "shuffle"] as const) {
    if (p[k] !== undefined) {
      if (typeof p[k] !== "boolean") throw new AppError("invalid_request", `playback_prefs.${k} must be a boolean.`, { field: `playback_prefs.${k}` });
      out[k] = p[k] as boolean;
    }
  }
  if (p.interval_seconds !== undefined) {
    const n = p.interval_seconds;
    if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 3600) throw new AppError("invalid_request", "playback_prefs.interval_seconds must be an integer from 1 to 3600.", { field: "playback_prefs.interval_seconds" });
    out.interval_seconds = n;
  }
  return out;
}

// ---- slugs ---------------------------------------------------------------------------------

/** Lowercase ASCII letters, digits and single hyphens; accents folded. */
export function normalizeSlug(raw: string): string {
  const slug = raw
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 200);
  if (!slug) throw new AppError("invalid_request", "The slug must contain at least one letter or digit.", { field: "slug" });
  return slug;
}

// ---- publish rules -------------------------------------------------------------------------

export interface PublishState {
  shareAccessLevel: AccessLevel;
  /** Was share_access_level ever set explicitly (create, update or a previous publish)? */
  shareAccessConfigured: boolean;
  searchable: boolean;
  isPublished: boolean;
  openFullscreen: boolean;
}

export interface PublishInput {
  shareAccessLevel?: AccessLevel;
  searchable?: boolean;
  openFullscreen?: boolean;
}

export interface PublishDecision extends PublishState {
  /** The never-configured level became public by rule 2. */
  shareAccessLevelDefaulted: boolean;
}

/**
 * Rules 1-4: a passed level is always honoured (and counts as configured); a configured level is
 * left unchanged; a never-configured one becomes public. searchable needs a resulting public
 * level. open_fullscreen omitted on a republish keeps the stored value (default false).
 */
export function decidePublish(cur: PublishState, input: PublishInput): PublishDecision {
  let level = cur.shareAccessLevel;
  let configured = cur.shareAccessConfigured;
  let defaulted = false;
  if (input.shareAccessLevel !== undefined) {
    level = input.shareAccessLevel;
    configured = true;
  } else if (!cur.shareAccessConfigured) {
    level = "public";
    defaulted = true;
  }
  const searchable = input.searchable ?? false;
  if (searchable && level !== "public") {
    throw new AppError("invalid_request", `searchable=true needs share_access_level public; the collection would be ${level}.`, { field: "searchable" });
  }
  return {
    shareAccessLevel: level,
    shareAccessConfigured: configured || defaulted,
    searchable,
    isPublished: true,
    openFullscreen: input.openFullscreen ?? cur.openFullscreen,
    shareAccessLevelDefaulted: defaulted,
  };
}

/** Unpublish: searchable off; the level changes only when one is passed (rule 3). */
export function decideUnpublish(cur: PublishState, level?: AccessLevel): PublishState {
  return {
    ...cur,
    isPublished: false,
    searchable: false,
    shareAccessLevel: level ?? cur.shareAccessLevel,
    shareAccessConfigured: cur.shareAccessConfigured || level !== undefined,
  };
}

/** collections.update's searchable and share_access_level changes. */
export function decideUpdateVisibility(cur: PublishState, input: { shareAccessLevel?: AccessLevel; searchable?: boolean }): Pick<PublishState, "shareAccessLevel" | "shareAccessConfigured" | "searchable"> {
  const level = input.shareAccessLevel ?? cur.shareAccessLevel;
  const configured = cur.shareAccessConfigured || input.shareAccessLevel !== undefined;
  let searchable = cur.searchable;
  if (input.searchable === true) {
    if (!cur.isPublished || level !== "public") {
      throw new AppError("invalid_request", "searchable=true requires a published collection whose share_access_level is public.", { field: "searchable" });
    }
    searchable = true;
  } else if (input.searchable === false) {
    searchable = false;
  }
  // A downgrade from public turns discovery off automatically.
  if (level !== "public") searchable = false;
  return { shareAccessLevel: level, shareAccessConfigured: configured, searchable };
}

/** How collections.publish picks the publish handle. */
export type AliasChoice = { kind: "omitted" } | { kind: "username" } | { kind: "alias"; aliasId: string };

/** The social service's resolution mode for a publish, given what is stored. */
export function handleResolution(choice: AliasChoice, stored: { aliasId: string | null; handleSet: boolean }): { mode: "keep" } | { mode: "default" | "username" } | { mode: "alias"; aliasId: string } {
  if (choice.kind === "username") return { mode: "username" };
  if (choice.kind === "alias") return { mode: "alias", aliasId: choice.aliasId };
  if (stored.aliasId) return { mode: "alias", aliasId: stored.aliasId };
  if (stored.handleSet) return { mode: "keep" };
  return { mode: "default" };
}

// ---- deletion windows ----------------------------------------------------------------------

export type Plan = "free" | "paid" | "founding";

/** Days a soft-deleted collection stays restorable: free 7, founding 30, paid 7. */
export function restoreWindowDays(plan: Plan): number {
  return plan === "founding" ? 30 : 7;
}

export function restorableUntil(deletedAt: Date, plan: Plan): Date {
  return new Date(deletedAt.getTime() + restoreWindowDays(plan) * 86_400_000);
}

// ---- nesting -------------------------------------------------------------------------------

/**
 * Moving `id` under `destination` makes a cycle when the destination is the collection itself
 * or one of its descendants, i.e. when `id` is on the destination's path to the root.
 */
export function wouldCycle(id: number, destination: number, destinationAncestors: readonly number[]): boolean {
  return destination === id || destinationAncestors.includes(id);
}

// ---- CSV (RFC 4180) ------------------------------------------------------------------------

function csvField(value: unknown): string {
  if (value === null || value === undefined) return "";
  const s = Array.isArray(value) ? value.join(",") : value instanceof Date ? value.toISOString() : String(value);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function toCsv(columns: readonly string[], rows: ReadonlyArray<Record<string, unknown>>): string {
  const lines = [columns.map(csvField).join(",")];
  for (const r of rows) lines.push(columns.map((c) => csvField(r[c])).join(","));
  return lines.join("\r\n") + "\r\n";
}
