/** Tags, as every service takes them: trimmed, lower case, deduplicated, never empty, capped. */
import { AppError } from "./errors.js";

/** Tags per collection and per media item (the contract's limit). */
export const MAX_TAGS = 10;

export function normalizeTags(tags: readonly string[], what: "collection" | "media item", field = "tags"): string[] {
  const out: string[] = [];
  for (const t of tags) {
    const v = t.trim().toLowerCase();
    if (!v) throw new AppError("invalid_request", "Tags must not be empty.", { field });
    if (!out.includes(v)) out.push(v);
  }
  if (out.length > MAX_TAGS) throw new AppError("invalid_request", `At most ${MAX_TAGS} tags per ${what}.`, { field });
  return out;
}
