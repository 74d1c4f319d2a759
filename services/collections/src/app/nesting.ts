/** Re-parenting (collections.move) and ordering (collections.reorder). */
import { AppError, emitCollectionUpdated, isUniqueViolation, type Caller } from "@cms/platform";
import type { CollectionRow } from "../domain/collection-json.js";
import { wouldCycle } from "../domain/rules.js";
import { graceEnd, type MoveLinkStep } from "../domain/pending-steps.js";
import { changeOf, duplicateName, ownedCollection, type AppContext } from "./context.js";
import type { StepRunner } from "./pending-steps.js";

/**
 * The moved row; noop when it already was there; the link rows removed from former parents, and
 * its link row in the new parent (none on a detach or a noop).
 */
export interface MoveOutcome { row: CollectionRow; noop: boolean; removedLinkMediaIds: number[]; linkMediaId?: number }

/** Move and reorder. */
export function nestingUseCases(app: AppContext, steps: StepRunner) {
  return {
    /**
     * Re-parents under row locks and commits; the link rows (media service) follow after the
     * commit as a recorded step, undone (the parent put back) when media does not follow.
     */
    async moveCollection(caller: Caller, id: number, destination: number | null): Promise<MoveOutcome> {
      let out;
      try {
        out = await app.unitOfWork(async (s, events) => {
          const cur = await ownedCollection(s, id, caller, { lock: true });
          if (destination !== null) {
            if (destination === id) throw new AppError("cycle_detected", `Collection ${id} cannot be moved into itself.`);
            const dest = await s.collections.byId(destination);
            if (!dest || dest.is_deleted) throw new AppError("not_found", `Destination collection ${destination} does not exist.`);
            if (dest.user_id !== caller.userId) throw new AppError("forbidden", `Destination collection ${destination} is not owned by the caller; both collections must be yours.`);
            if (dest.is_archived) throw new AppError("invalid_request", `Destination collection ${destination} is archived.`, { field: "parent_collection_id" });
            if (wouldCycle(id, destination, await s.collections.ancestorIds(destination))) {
              throw new AppError("cycle_detected", `Collection ${destination} is inside collection ${id}; moving ${id} there would make a cycle.`);
            }
          }
          if (cur.parent_id === destination) return { row: cur };
          // One step at a time per collection: its undo puts back what it found.
          if (await s.steps.openOn(id)) {
            throw new AppError("unavailable", `Collection ${id} has a change the media service has not followed yet; retry shortly.`);
          }
          const next = await s.collections.update(id, {
            parent_id: destination, position: await s.collections.nextPosition(caller.userId, destination), updated_at: app.now(),
          });
          await emitCollectionUpdated(events, changeOf(next, "moved"));
          const work: MoveLinkStep = { kind: "move_link", collectionId: id, fromParentId: cur.parent_id, toParentId: destination, ownerUserId: caller.userId };
          return { row: next, step: { id: await s.steps.add(work, graceEnd(app.now())), work } };
        });
      } catch (err) {
        if (isUniqueViolation(err)) {
          const row = await app.stores.collections.byId(id);
          throw duplicateName(row?.name ?? "", destination);
        }
        throw err;
      }
      if (!out.step) return { row: out.row, noop: true, removedLinkMediaIds: [] };
      const moved = await steps.carryOut(out.step, `Collection ${id} was not moved`);
      return { row: out.row, noop: false, removedLinkMediaIds: moved.removedLinkMediaIds, linkMediaId: moved.linkMediaId };
    },

    /** Listed ids take positions 0..k-1 in the given order; the caller's other collections follow. */
    async reorderCollections(caller: Caller, orderedIds: number[]): Promise<{ positions: Array<{ id: number; position: number }>; reordered: number }> {
      const order = await app.unitOfWork(async (s, events) => {
        const owned = await s.collections.ownedForReorder(caller.userId);
        const byId = new Map(owned.map((r) => [Number(r.id), r]));
        const unknown = orderedIds.filter((x) => !byId.has(x));
        if (unknown.length) throw new AppError("invalid_request", `ordered_ids must be owned, non-deleted collections; not: ${unknown.join(", ")}.`, { field: "ordered_ids", invalid_ids: unknown });
        const listed = new Set(orderedIds);
        const all = [...orderedIds, ...owned.map((r) => Number(r.id)).filter((x) => !listed.has(x))];
        const changed: CollectionRow[] = [];
        for (const [i, id] of all.entries()) {
          const r = byId.get(id)!;
          if (r.position !== i) {
            await s.collections.setPosition(r.id, i);
            changed.push({ ...r, position: i });
          }
        }
        for (const r of changed) await emitCollectionUpdated(events, changeOf(r, "reordered"));
        return all.map((x, i) => ({ id: x, position: i }));
      });
      return { positions: order.filter((r) => orderedIds.includes(r.id)), reordered: orderedIds.length };
    },
  };
}
