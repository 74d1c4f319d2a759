/**
 * The media side of a collection's life: soft-deleted collections hide their media (and the link
 * rows that show them inside other collections), restored ones bring them back, purged ones lose
 * them for good (stored objects through media.objects.orphaned). The collections service commits
 * the change with a collection.lifecycle event in its outbox, then calls ApplyCollectionLifecycle
 * so that reads see the media at once; the event is the guarantee. Both run applyLifecycle, and
 * each collection remembers the last version applied to it: the second delivery of a change, and
 * a change older than one already applied (reordering), change nothing.
 */
import { AppError, emitCollectionUpdated, type BusEvent } from "@cms/platform";
import type { LifecycleAction } from "../store/media-store.js";
import type { MediaDeps } from "./ports.js";
import { removeRows } from "./stored-files.js";

/** A collection.lifecycle change (events.v1.CollectionLifecycle). */
export interface LifecycleChange { collectionIds: number[]; action: LifecycleAction; version: number }

const ACTIONS: readonly LifecycleAction[] = ["soft_deleted", "restored", "purged"];

/** A change from its wire form (the event payload or the RPC's fields); refuses what it cannot apply. */
export function lifecycleChange(collectionIds: readonly unknown[], action: unknown, version: unknown): LifecycleChange {
  if (!ACTIONS.includes(action as LifecycleAction)) {
    throw new AppError("invalid_request", `action must be one of ${ACTIONS.join(", ")}.`, { field: "action" });
  }
  const ids = collectionIds.map(Number);
  if (ids.some((id) => !Number.isSafeInteger(id) || id < 1)) throw new AppError("invalid_request", "collection_ids must be positive integers.", { field: "collection_ids" });
  const v = Number(version);
  if (!Number.isSafeInteger(v) || v < 1) throw new AppError("invalid_request", "version must be a positive integer.", { field: "version" });
  return { collectionIds: ids, action: action as LifecycleAction, version: v };
}

/** The consumer of collection.lifecycle and ApplyCollectionLifecycle: one code path for both. */
export function createCollectionLifecycle({ unitOfWork, log }: Pick<MediaDeps, "unitOfWork" | "log">) {
  /**
   * Applies the change to the collections that have not seen it (or a newer one); the number of
   * media rows changed (0 for a change already applied).
   */
  function applyLifecycle(change: LifecycleChange): Promise<number> {
    const ids = [...new Set(change.collectionIds)];
    return unitOfWork(async (unit, events) => {
      const { media } = unit;
      const applied = await media.claimLifecycle(ids, change.version, change.action);
      if (!applied.length) return 0;
      switch (change.action) {
        case "soft_deleted": {
          // The parents' locks before any of their rows: media.delete in a parent holds its lock
          // while it renumbers the parent's rows, link rows included, so hiding a link row first
          // and then waiting for the lock could deadlock with it. (A link made in between is
          // hidden all the same; its parent is locked below.)
          const locked = new Set(await media.parentsLinkingTo(applied, ids));
          await media.lockCollections([...locked]);
          const own = await media.hideWithCollections(applied);
          // The link rows that show these collections inside other collections go with them.
          const parents = await media.hideLinksTo(applied, ids);
          for (const parent of [...new Set(parents)].sort((a, b) => a - b)) {
            if (!locked.has(parent)) await media.lockCollections([parent]);
            await media.renumber(parent);
            await emitCollectionUpdated(events, { collectionId: parent, kind: "media_removed" });
          }
          return own + parents.length;
        }
        case "restored": {
          const own = await media.unhideWithCollections(applied);
          // Link rows come back at the end of their parents.
          const links = await media.hiddenLinksTo(applied, ids);
          for (const link of links) {
            const parent = Number(link.collection_id);
            await media.lockCollections([parent]);
            await media.unhideLink(Number(link.id), await media.nextPosition(parent));
            await emitCollectionUpdated(events, { collectionId: parent, kind: "media_added" });
          }
          return own + links.length;
        }
        case "purged": {
          // Link rows elsewhere that point at these collections go too.
          const rows = await media.rowsOfOrLinkingTo(applied);
          if (!rows.length) return 0;
          const touched = [...new Set(rows.map((r) => Number(r.collection_id)).filter((c) => !applied.includes(c)))];
          await media.lockCollections(touched);
          await removeRows(unit, events, rows.map((r) => Number(r.id)));
          for (const c of touched) {
            await media.renumber(c);
            await emitCollectionUpdated(events, { collectionId: c, kind: "media_removed" });
          }
          return rows.length;
        }
      }
    });
  }

  /**
   * The durable consumer of collection.lifecycle. A payload it cannot apply is logged and
   * dropped (redelivering it would never succeed); a failure to apply is thrown, so the bus
   * delivers the event again.
   */
  async function consume(event: Pick<BusEvent, "id" | "payload">): Promise<number> {
    const { collection_ids: ids, action, version } = event.payload;
    let change: LifecycleChange;
    try {
      change = lifecycleChange(Array.isArray(ids) ? ids : [], action, version);
    } catch (err) {
      log.error({ err, event_id: event.id, payload: event.payload }, "collection.lifecycle event not applicable; dropped");
      return 0;
    }
    return applyLifecycle(change);
  }

  return { applyLifecycle, consume };
}
