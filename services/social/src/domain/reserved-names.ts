/**
 * Reserved publish handles. A handle lives in public URLs ({app_url}/{handle}/{slug}), so some
 * names must never be handed out: operational words that would let someone pose as staff,
 * the web app's own routes, and the service's own names. Operational words and brand names are
 * also caught in leet spellings ("adm1n", "r00t", "s_y_s_t_e_m"); routes only collide when
 * they are spelled exactly.
 *
 * Matching rules (decided here, tested in test/reserved-names.test.ts):
 * - The handle is lowercased and "_" and "-" are dropped before comparing.
 * - Leet digits and symbols stand for letters: 0→o, 1→i or l, 3→e, 4→a, 5→s, 7→t, 8→b,
 *   9→g, @→a, $→s.
 * - Repeated letters collapse ("rooot", "admmin"), but only for words of four letters or
 *   more, so that ordinary words such as "mood" stay free although "mod" is reserved.
 *   A repeat never makes a word shorter: "rot" and "suport" are not "root" and "support".
 * - The whole handle must spell the word. An operational word may also carry digits before or
 *   after it ("admin1", "admin_2", "2024root"); any other letters make an ordinary handle
 *   ("root_beer_fan", "helpful", "statusquo").
 */

export type ReservedClass = "operational" | "route" | "brand";

/** Words that would let a handle pose as the operators of the service. */
export const OPERATIONAL_NAMES: readonly string[] = [
  "admin", "administrator", "root", "system", "sysadmin", "superuser", "support", "help", "helpdesk",
  "security", "billing", "staff", "moderator", "mod", "official", "api", "status", "abuse",
  "postmaster", "hostmaster", "webmaster", "noreply", "operator", "info",
];

/** Top-level routes of the web app and the API origin; a handle there would shadow them. */
export const ROUTE_NAMES: readonly string[] = [
  "login", "logout", "signin", "signout", "signup", "register", "settings", "account", "profile",
  "oauth", "auth", "authorize", "callback", "mcp", "assets", "functions", "static", "public",
  "www", "app", "dashboard", "explore", "search", "browse", "discover", "upload", "uploads",
  "download", "downloads", "player", "embed", "share", "about", "terms", "privacy", "docs",
  "new", "edit",
];

/** The service's own names. */
export const BRAND_NAMES: readonly string[] = [
  "cms", "collectionsmedia", "collections-media", "thirdparty", "thirdparty-v1",
];

/** Letters each leet character may stand for. */
const LEET: Readonly<Record<string, readonly string[]>> = {
  "0": ["o"], "1": ["i", "l"], "3": ["e"], "4": ["a"], "5": ["s"], "7": ["t"], "8": ["b"], "9": ["g"],
  "@": ["a"], "$": ["s"],
};

/** Lowercases and drops the separators "_" and "-": the raw material every rule compares. */
export function stripHandle(handle: string): string {
  return handle.toLowerCase().replace(/[_-]/g, "");
}

/**
 * The canonical reading of a handle: stripped, every unambiguous leet character replaced by
 * its letter and repeated letters collapsed. "1" stays as is because it reads as i or l.
 */
export function normaliseHandle(handle: string): string {
  const mapped = [...stripHandle(handle)].map((c) => (LEET[c]?.length === 1 ? LEET[c]![0]! : c)).join("");
  return mapped.replace(/([a-z])\1+/g, "$1");
}

/** Every letter reading of a stripped handle, for the ambiguous "1" (bounded; for tests and logs). */
export function leetReadings(handle: string, max = 64): string[] {
  let out = [""];
  for (const c of stripHandle(handle)) {
    const letters = LEET[c] ?? [c];
    out = out.flatMap((prefix) => letters.map((l) => prefix + l));
    if (out.length > max) out = out.slice(0, max);
  }
  return out;
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A character class matching a letter or any leet character that reads as it. */
function letterClass(letter: string): string {
  const alts = [letter, ...Object.keys(LEET).filter((k) => LEET[k]!.includes(letter))];
  return alts.length === 1 ? escapeRegex(letter) : `[${alts.map(escapeRegex).join("")}]`;
}

/**
 * The regex source that matches a word in leet spelling over a stripped handle. Runs of a
 * letter ("oo" in root) need at least as many characters and, for longer words, accept more.
 */
export function leetPattern(word: string): string {
  const runs: Array<[string, number]> = [];
  for (const c of stripHandle(word)) {
    const last = runs[runs.length - 1];
    if (last && last[0] === c) last[1]++;
    else runs.push([c, 1]);
  }
  const allowRepeats = stripHandle(word).length >= 4;
  return runs.map(([c, n]) => `${letterClass(c)}{${n},${allowRepeats ? "" : n}}`).join("");
}

interface Rule { cls: ReservedClass; word: string; re: RegExp }

function compile(): Rule[] {
  const rules: Rule[] = [];
  for (const word of OPERATIONAL_NAMES) {
    rules.push({ cls: "operational", word, re: new RegExp(`^[0-9]*${leetPattern(word)}[0-9]*$`) });
  }
  for (const word of ROUTE_NAMES) rules.push({ cls: "route", word, re: new RegExp(`^${escapeRegex(word)}$`) });
  for (const word of BRAND_NAMES) rules.push({ cls: "brand", word, re: new RegExp(`^${leetPattern(word)}$`) });
  return rules;
}

const RULES = compile();

export interface ReservedMatch {
  class: ReservedClass;
  /** The reserved word the handle spells. */
  word: string;
}

/** Which reserved name a handle spells, if any. Routes compare the handle as given (lowercased). */
export function reservedMatch(handle: string): ReservedMatch | undefined {
  const lower = handle.toLowerCase();
  const stripped = stripHandle(handle);
  for (const r of RULES) {
    const subject = r.cls === "route" ? lower : stripped;
    if (r.re.test(subject)) return { class: r.cls, word: r.word };
  }
  return undefined;
}

/** The class of a reserved handle, or undefined for a free one. */
export function reservedClassOf(handle: string): ReservedClass | undefined {
  return reservedMatch(handle)?.class;
}
