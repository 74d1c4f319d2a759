/** Re-parenting (collections.move) and ordering (collections.reorder). */
import { AppError, isUniqueViolation, type Caller } from "@cms/platform";
import { COLLECTION_COLUMNS, type CollectionRow } from "../domain/collection-json.js";
import { wouldCycle } from "../domain/rules.js";
import { ancestorIds, duplicateName, emitUpdated, ownedCollection, type Deps } from "./deps.js";

/**
 * Atomic re-parent. Checks run under row locks; the link rows (media service) move while the
 * collections transaction is open, and are moved back if the transaction does not commit.
 */
/**
 * The moved row; noop when it already was there; the link rows removed from former parents, and
 * its link row in the new parent (none on a detach or a noop).
 */
export async function moveCollection(deps: Deps, caller: Caller, id: number, destination: number | null): Promise<{ row: CollectionRow; noop: boolean; removedLinkMediaIds: number[]; linkMediaId?: number }> {
  const { db } = deps;
  let linksMoved = false;
  let previousParent: number | null = null;
  try {
    const out = await db.transaction(async (trx) => {
      const cur = await ownedCollection(trx, id, caller, { forUpdate: true });
      previousParent = cur.parent_id;
      if (destination !== null) {
        if (destination === id) throw new AppError("cycle_detected", `Collection ${id} cannot be moved into itself.`);
        const dest = await trx("collections").where({ id: destination }).first(COLLECTION_COLUMNS);
        if (!dest || dest.is_deleted) throw new AppError("not_found", `Destination collection ${destination} does not exist.`);
        if (dest.user_id !== caller.userId) throw new AppError("forbidden", `Destination collection ${destination} is not owned by the caller; both collections must be yours.`);
        if (dest.is_archived) throw new AppError("invalid_request", `Destination collection ${destination} is archived.`, { field: "parent_collection_id" });
        if (wouldCycle(id, destination, await ancestorIds(trx, destination))) {
          throw new AppError("cycle_detected", `Collection ${destination} is inside collection ${id}; moving ${id} there would make a cycle.`);
        }
      }
      if (cur.parent_id === destination) {
        return { noop: true as const, row: cur, removed: [] as number[], linkId: undefined as number | undefined };
      }
      const moved = await deps.media.moveCollectionLink({
        childCollectionId: BigInt(id),
        newParentCollectionId: destination === null ? undefined : BigInt(destination),
        ownerUserId: caller.userId,
      });
      linksMoved = true;
      const posRow = await trx("collections").where({ user_id: caller.userId, is_deleted: false })
        .modify((q) => (destination === null ? q.whereNull("parent_id") : q.where("parent_id", destination)))
        .max<{ max: number | null }>("position as max").first();
      const [next] = await trx("collections").where({ id }).update({
        parent_id: destination,
        position: posRow?.max === null || posRow?.max === undefined ? 0 : Number(posRow.max) + 1,
        updated_at: new Date(),
      }).returning(COLLECTION_COLUMNS) as CollectionRow[];
      await emitUpdated(deps, trx, next!, "moved");
      return { noop: false as const, row: next!, removed: moved.removedLinkMediaIds.map(Number), linkId: moved.linkMediaId === undefined ? undefined : Number(moved.linkMediaId) };
    });
    deps.ctx.bus.flush();
    return { row: out.row, noop: out.noop, removedLinkMediaIds: out.removed, linkMediaId: out.linkId };
  } catch (err) {
    if (linksMoved) {
      await deps.media.moveCollectionLink({
        childCollectionId: BigInt(id),
        newParentCollectionId: previousParent === null ? undefined : BigInt(previousParent),
        ownerUserId: caller.userId,
      }).catch((e) => deps.ctx.log.error({ err: e, id }, "could not move link rows back after a failed move"));
    }
    if (isUniqueViolation(err)) {
      const row = await db("collections").where({ id }).first(COLLECTION_COLUMNS);
      throw duplicateName(row?.name ?? "", destination);
    }
    throw err;
  }
}

/** Listed ids take positions 0..k-1 in the given order; the caller's other collections follow. */
export async function reorderCollections(deps: Deps, caller: Caller, orderedIds: number[]): Promise<{ positions: Array<{ id: number; position: number }>; reordered: number }> {
  const rows = await deps.db.transaction(async (trx) => {
    const owned = await trx("collections").select(COLLECTION_COLUMNS).where({ user_id: caller.userId, is_deleted: false })
      .orderBy([{ column: "position" }, { column: "id" }]).forUpdate();
    const byId = new Map(owned.map((r) => [Number(r.id), r]));
    const unknown = orderedIds.filter((x) => !byId.has(x));
    if (unknown.length) throw new AppError("invalid_request", `ordered_ids must be owned, non-deleted collections; not: ${unknown.join(", ")}.`, { field: "ordered_ids", invalid_ids: unknown });
    const listed = new Set(orderedIds);
    const order = [...orderedIds, ...owned.map((r) => Number(r.id)).filter((x) => !listed.has(x))];
    const changed: CollectionRow[] = [];
    for (let i = 0; i < order.length; i++) {
      const r = byId.get(order[i]!)!;
      if (r.position !== i) {
        await trx("collections").where({ id: r.id }).update({ position: i, updated_at: new Date() });
        changed.push({ ...r, position: i });
      }
    }
    for (const r of changed) await emitUpdated(deps, trx, r, "reordered");
    return order.map((id, i) => ({ id, position: i }));
  });
  deps.ctx.bus.flush();
  return { positions: rows.filter((r) => orderedIds.includes(r.id)), reordered: orderedIds.length };
}
