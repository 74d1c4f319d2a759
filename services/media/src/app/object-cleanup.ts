/**
 * Removal of stored objects whose rows are gone (media.objects.orphaned, written by this service
 * and by the collections service for covers). An object can be shared (a copy; media.create with
 * the key of another item's file) and gain a reference after the event was written, so references
 * are checked again at removal time, under a lock the writes adopting a key take too.
 */
import type { MediaAccess } from "./access.js";
import type { MediaDeps } from "./ports.js";

/** The consumer of media.objects.orphaned. */
export function createObjectCleanup({ unitOfWork, objects }: Pick<MediaDeps, "unitOfWork" | "objects">, access: MediaAccess) {
  /**
   * Removes what may go (no media row, pending upload nor cover uses it); how many went and how
   * many are still in use. The keys are locked from the check through the removal: a media.create
   * or media.replace adopting one of them (locking it in share mode, then checking it is still
   * stored) either commits its row before the check, or finds the object gone after the removal.
   * Covers are asked first, outside the unit: a cover's key is never adopted by a media row.
   */
  async function removeOrphaned(keys: string[]): Promise<{ removed: number; kept: number }> {
    if (!keys.length) return { removed: 0, kept: 0 };
    const covers = await access.coverKeysAmong(keys);
    const candidates = keys.filter((k) => !covers.has(k));
    const removable = !candidates.length ? [] : await unitOfWork(async ({ media }) => {
      await media.lockStoreKeys(candidates, "exclusive");
      // A statement of its own after the lock: its snapshot then sees the row of an adopting
      // write that committed while the cleanup waited for the lock.
      const unused = await media.unreferencedKeys(candidates);
      await objects.delete(unused);
      return unused;
    });
    return { removed: removable.length, kept: keys.length - removable.length };
  }

  return { removeOrphaned };
}
