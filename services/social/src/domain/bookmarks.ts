/** Rules of bookmarks. */
import { AppError } from "@cms/platform";

/** At most this many collections in one bookmark. */
export const MAX_BOOKMARK_COLLECTIONS = 100;

/**
 * The contract declares collection_ids as a string: ids of collections separated by commas
 * (spaces allowed), e.g. "12,15". Stored normalized ("12,15"): each id once, in the order given.
 */
export function normalizeCollectionIds(raw: string): string {
  const parts = raw.split(",").map((p) => p.trim()).filter((p) => p.length);
  if (!parts.length) throw new AppError("invalid_request", "collection_ids names no collection; give ids separated by commas, e.g. \"12,15\".", { field: "collection_ids" });
  const ids: string[] = [];
  for (const p of parts) {
    if (!/^[1-9]\d{0,15}$/.test(p)) {
      throw new AppError("invalid_request", `collection_ids holds "${p.slice(0, 40)}", which is not a collection id; give positive integers separated by commas, e.g. "12,15".`, { field: "collection_ids" });
    }
    if (!ids.includes(p)) ids.push(p);
  }
  if (ids.length > MAX_BOOKMARK_COLLECTIONS) throw new AppError("invalid_request", `A bookmark holds at most ${MAX_BOOKMARK_COLLECTIONS} collections.`, { field: "collection_ids" });
  return ids.join(",");
}
