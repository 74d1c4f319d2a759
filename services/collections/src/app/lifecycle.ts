/**
 * Soft and hard deletion, restore within the plan window, and the retention job. Each commits
 * the collections change with a collection.lifecycle event (the media service follows it,
 * idempotently by version), then asks media to apply it at once, so that a read right after
 * sees it; that call's failure is only logged, since the event guarantees the outcome.
 */
import {
  AppError, emitCollectionLifecycle, emitCollectionUpdated, emitObjectsOrphaned, isUniqueViolation, type Caller, type CollectionLifecycle, type EventWriter,
} from "@cms/platform";
import type { CollectionRow } from "../domain/collection-json.js";
import { restorableUntil, type Plan } from "../domain/rules.js";
import type { CollectionsStores } from "./ports.js";
import { changeOf, duplicateName, notFound, ownedCollection, type AppContext } from "./context.js";

/** collections.delete as the use case takes it (request defaults applied). */
export interface DeleteInput { mode: "soft" | "hard"; cascadeMedia: boolean; confirm: boolean; dryRun: boolean }

/**
 * What collections.delete did: the dry_run preview (restorableUntil for soft mode only, blocked
 * when a soft delete would fail with collection_not_empty), a soft delete or a hard delete.
 * collectionIds: the collection first, then its live sub-collections.
 */
export type DeleteOutcome =
  | { kind: "preview"; mode: "soft" | "hard"; collectionIds: number[]; mediaCount: number; restorableUntil?: Date; blocked?: string }
  | { kind: "soft"; collectionId: number; collectionIds: number[]; media: number; restorableUntil: Date }
  | { kind: "hard"; collectionId: number; collectionIds: number[]; media: number };

/**
 * What collections.restore did: the dry_run preview (the row still deleted) or the restore
 * (collectionIds: the collection and those deleted with it). restorableUntil: the window's end.
 */
export type RestoreOutcome =
  | { kind: "preview"; restorableUntil: Date; row: CollectionRow }
  | { kind: "restored"; row: CollectionRow; collectionIds: number[]; restorableUntil: Date };

/** Users' plans are asked of the auth service this many at a time. */
const PLAN_BATCH = 500;

/** Delete, restore and the retention purge. */
export function lifecycleUseCases(app: AppContext) {
  const { stores } = app;

  async function mediaCount(ids: number[]): Promise<number> {
    const res = await app.media.countCollectionMedia({ collectionIds: ids.map(BigInt) });
    return res.counts.reduce((n, c) => n + c.count, 0);
  }

  /**
   * Writes the lifecycle event of a change under way. The collections are locked first, so
   * that changes of the same collections take their versions in commit order.
   */
  async function recordLifecycle(s: CollectionsStores, events: EventWriter, collectionIds: number[], action: CollectionLifecycle["action"]): Promise<CollectionLifecycle> {
    const change: CollectionLifecycle = { collectionIds, action, version: await s.collections.nextLifecycleVersion() };
    await emitCollectionLifecycle(events, change);
    return change;
  }

  async function applyToMedia(change: CollectionLifecycle): Promise<void> {
    try {
      await app.media.applyCollectionLifecycle({ collectionIds: change.collectionIds.map(BigInt), action: change.action, version: BigInt(change.version) });
    } catch (err) {
      app.log.warn({ err, ...change }, "media did not apply a collection lifecycle change now; the outbox event will");
    }
  }

  /**
   * Removes collections for good (their covers go after the commit), leaving tombstones of the
   * soft-deleted ones (`tombstones: "deleted"`: those were restorable, so a late restore answers
   * 410, not 404) or of all of them.
   */
  async function purge(s: CollectionsStores, events: EventWriter, ids: number[], ownerUserId: string, tombstones: "deleted" | "all"): Promise<CollectionLifecycle> {
    await s.collections.lockAll(ids);
    const covers = await s.collections.coversOf(ids);
    await emitObjectsOrphaned(events, covers.flatMap((c) => [c.thumbnail_url, c.cover_thumbnail_url]));
    const buried = tombstones === "all" ? ids : covers.filter((c) => c.is_deleted).map((c) => c.id);
    await s.collections.addTombstones(buried.map((id) => ({ id, user_id: ownerUserId })));
    await s.collections.remove(ids);
    return recordLifecycle(s, events, ids, "purged");
  }

  return {
    async deleteCollection(caller: Caller, id: number, input: DeleteInput): Promise<DeleteOutcome> {
      const row = await ownedCollection(stores, id, caller);
      const ids = await stores.collections.subtreeIds(id);
      const ownMedia = await mediaCount([id]);
      const totalMedia = await mediaCount(ids);
      if (input.dryRun) {
        return {
          kind: "preview",
          mode: input.mode,
          collectionIds: ids,
          mediaCount: totalMedia,
          restorableUntil: input.mode === "soft" ? restorableUntil(app.now(), caller.plan) : undefined,
          blocked: input.mode === "soft" && ownMedia > 0 && !input.cascadeMedia ? "collection_not_empty: pass cascade_media=true or mode=hard" : undefined,
        };
      }
      if (input.mode === "hard") {
        if (!input.confirm) {
          throw new AppError("confirmation_required", "A hard delete removes the collection, its sub-collections and their media permanently; pass confirm=true (or dry_run=true to preview).", { field: "confirm" });
        }
        // Everything under it goes, sub-collections soft-deleted earlier on their own included (the
        // rows would go anyway with their parent; their media must not stay behind).
        const all = await stores.collections.subtreeIds(id, { includeDeleted: true });
        const change = await app.unitOfWork(async (s, events) => {
          const c = await purge(s, events, all, row.user_id, "deleted");
          await emitCollectionUpdated(events, changeOf(row, "deleted"));
          return c;
        });
        await applyToMedia(change);
        return { kind: "hard", collectionId: id, collectionIds: ids, media: totalMedia };
      }
      if (ownMedia > 0 && !input.cascadeMedia) {
        throw new AppError("collection_not_empty", `Collection ${id} holds ${ownMedia} media item(s); pass cascade_media=true to soft-delete them with it, or mode=hard.`, { media_count: ownMedia });
      }
      const deletedAt = app.now();
      const change = await app.unitOfWork(async (s, events) => {
        await s.collections.lockAll(ids);
        await s.collections.markDeleted(id, ids.filter((x) => x !== id), deletedAt);
        await emitCollectionUpdated(events, changeOf(row, "deleted"));
        // Besides the media inside, a sub-collection's link row in its parent is hidden too.
        return recordLifecycle(s, events, ids, "soft_deleted");
      });
      await applyToMedia(change);
      return { kind: "soft", collectionId: id, collectionIds: ids, media: totalMedia, restorableUntil: restorableUntil(deletedAt, caller.plan) };
    },

    async restoreCollection(caller: Caller, id: number, input: { dryRun: boolean }): Promise<RestoreOutcome> {
      const now = app.now();
      const row = await stores.collections.byId(id);
      if (!row) {
        const purged = await stores.collections.tombstone(id);
        if (purged && purged.user_id === caller.userId) throw new AppError("restore_window_expired", `Collection ${id} was purged after its restore window.`);
        throw notFound(id);
      }
      if (row.user_id !== caller.userId) throw new AppError("forbidden", `Collection ${id} is not owned by the caller.`);
      if (!row.is_deleted) throw new AppError("invalid_request", `Collection ${id} is not deleted.`, { field: "collection_id" });
      if (row.deleted_with !== null) throw new AppError("invalid_request", `Collection ${id} was deleted with collection ${row.deleted_with}; restore that one.`, { field: "collection_id", deleted_with: row.deleted_with });
      // A live collection under a deleted one would be purged with it when that one's window ends.
      const deletedAncestor = await stores.collections.firstDeletedAmong(await stores.collections.ancestorIds(id));
      if (deletedAncestor !== undefined) {
        throw new AppError("invalid_request", `Collection ${id} is inside collection ${deletedAncestor}, which is deleted; restore collection ${deletedAncestor} first.`, { field: "collection_id", deleted_ancestor_id: deletedAncestor });
      }
      const until = restorableUntil(row.deleted_at!, caller.plan);
      if (until.getTime() <= now.getTime()) {
        throw new AppError("restore_window_expired", `Collection ${id} was deleted on ${row.deleted_at!.toISOString()}; the ${caller.plan} plan keeps it restorable until ${until.toISOString()}.`, { restorable_until: until.toISOString() });
      }
      if (input.dryRun) return { kind: "preview", restorableUntil: until, row };
      const ids = [id, ...(await stores.collections.deletedWith(id))];
      try {
        const { restored, change } = await app.unitOfWork(async (s, events) => {
          await s.collections.lockAll(ids);
          await s.collections.markRestored(ids, now);
          const r = (await s.collections.byId(id))!;
          await emitCollectionUpdated(events, changeOf(r, "restored"));
          return { restored: r, change: await recordLifecycle(s, events, ids, "restored") };
        });
        await applyToMedia(change);
        return { kind: "restored", row: restored, collectionIds: ids, restorableUntil: until };
      } catch (err) {
        if (isUniqueViolation(err)) throw duplicateName(row.name, row.parent_id);
        throw err;
      }
    },

    /**
     * The retention job: purges soft-deleted collections whose plan window has elapsed at `now`
     * (with their sub-collections and media), leaving a tombstone so a late restore answers 410.
     */
    async purgeExpired(now: Date = app.now()): Promise<{ purged: number }> {
      const roots = await stores.collections.deletedRootsBefore(now);
      if (!roots.length) return { purged: 0 };
      const owners = [...new Set(roots.map((r) => r.user_id))];
      const plans = new Map<string, Plan>();
      for (let i = 0; i < owners.length; i += PLAN_BATCH) {
        const res = await app.auth.getUsers({ userIds: owners.slice(i, i + PLAN_BATCH) });
        for (const u of res.users) plans.set(u.userId, u.plan as Plan);
      }
      let purged = 0;
      for (const root of roots) {
        const until = restorableUntil(root.deleted_at, plans.get(root.user_id) ?? "free");
        if (until.getTime() > now.getTime()) continue;
        const ids = await stores.collections.subtreeIds(root.id, { includeDeleted: true });
        // Never purge a live collection with a deleted parent (restore refuses to make one; rows
        // from before that rule are left for a person to look at rather than destroyed).
        const live = await stores.collections.liveAmong(ids);
        if (live.length) {
          app.log.warn({ collection_id: root.id, live_descendants: live }, "retention: a deleted collection holds live sub-collections; not purged");
          continue;
        }
        const change = await app.unitOfWork((s, events) => purge(s, events, ids, root.user_id, "all"));
        await applyToMedia(change);
        purged += ids.length;
      }
      return { purged };
    },
  };
}
