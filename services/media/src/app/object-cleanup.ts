/**
 * Removal of stored objects whose rows are gone (media.objects.orphaned, written by this service
 * and by the collections service for covers). An object can be shared (a copy, a thumbnail made
 * from an item's file, a key adopted as a collection cover) and gain a reference after the event
 * was written, so references are checked again at removal time.
 */
import type { MediaAccess } from "./access.js";
import type { MediaDeps } from "./ports.js";

/** The consumer of media.objects.orphaned. */
export function createObjectCleanup({ stores, objects }: Pick<MediaDeps, "stores" | "objects">, access: MediaAccess) {
  /** The keys of an orphaned event that may really go: no media row, pending upload nor cover uses them. */
  async function removableKeys(keys: string[]): Promise<string[]> {
    const candidates = await stores.media.unreferencedKeys(keys);
    if (!candidates.length) return [];
    const covers = await access.coverKeysAmong(candidates);
    return candidates.filter((k) => !covers.has(k));
  }

  /** Removes what may go; how many went and how many are still in use. */
  async function removeOrphaned(keys: string[]): Promise<{ removed: number; kept: number }> {
    const removable = await removableKeys(keys);
    await objects.delete(removable);
    return { removed: removable.length, kept: keys.length - removable.length };
  }

  return { removeOrphaned };
}
