/** Soft and hard deletion, restore within the plan window, and the retention job. */
import { AppError, emitCollectionLifecycle, isUniqueViolation, type Caller, type CollectionLifecycle, type Queryable } from "@cms/platform";
import { COLLECTION_COLUMNS, type CollectionRow } from "../domain/collection-json.js";
import { restorableUntil, type Plan } from "../domain/rules.js";
import { ancestorIds, duplicateName, emitUpdated, orphanObjects, findCollection, notFound, ownedCollection, subtreeIds, type Deps } from "./deps.js";

/** The next lifecycle version (a sequence: increases with every lifecycle change, across replicas). */
async function nextVersion(q: Queryable): Promise<number> {
  const { rows } = await q.raw("SELECT nextval('collection_lifecycle_version') AS v");
  return Number(rows[0].v);
}

/**
 * After the commit, the media service follows at once (so that a read right after sees it); a
 * failure is only logged: the collection.lifecycle event written with the change guarantees it.
 */
async function applyToMedia(deps: Deps, change: CollectionLifecycle): Promise<void> {
  try {
    await deps.media.applyCollectionLifecycle({ collectionIds: change.collectionIds.map(BigInt), action: change.action, version: BigInt(change.version) });
  } catch (err) {
    deps.ctx.log.warn({ err, ...change }, "media did not apply a collection lifecycle change now; the outbox event will");
  }
}

export interface DeleteInput { mode: "soft" | "hard"; cascadeMedia: boolean; confirm: boolean; dryRun: boolean }

async function mediaCount(deps: Deps, ids: number[]): Promise<number> {
  const res = await deps.media.countCollectionMedia({ collectionIds: ids.map(BigInt) });
  return res.counts.reduce((n, c) => n + c.count, 0);
}

/**
 * What collections.delete did: the dry_run preview (restorableUntil for soft mode only, blocked
 * when a soft delete would fail with collection_not_empty), a soft delete or a hard delete.
 * collectionIds: the collection first, then its live sub-collections.
 */
export type DeleteOutcome =
  | { kind: "preview"; mode: "soft" | "hard"; collectionIds: number[]; mediaCount: number; restorableUntil?: Date; blocked?: string }
  | { kind: "soft"; collectionId: number; collectionIds: number[]; media: number; restorableUntil: Date }
  | { kind: "hard"; collectionId: number; collectionIds: number[]; media: number };

export async function deleteCollection(deps: Deps, caller: Caller, id: number, input: DeleteInput): Promise<DeleteOutcome> {
  const { db } = deps;
  const row = await ownedCollection(db, id, caller);
  const ids = await subtreeIds(db, id);
  const ownMedia = await mediaCount(deps, [id]);
  const totalMedia = await mediaCount(deps, ids);
  if (input.dryRun) {
    return {
      kind: "preview",
      mode: input.mode,
      collectionIds: ids,
      mediaCount: totalMedia,
      restorableUntil: input.mode === "soft" ? restorableUntil(new Date(), caller.plan) : undefined,
      blocked: input.mode === "soft" && ownMedia > 0 && !input.cascadeMedia ? "collection_not_empty: pass cascade_media=true or mode=hard" : undefined,
    };
  }
  if (input.mode === "hard") {
    if (!input.confirm) {
      throw new AppError("confirmation_required", "A hard delete removes the collection, its sub-collections and their media permanently; pass confirm=true (or dry_run=true to preview).", { field: "confirm" });
    }
    // Everything under it goes, sub-collections soft-deleted earlier on their own included (the
    // rows would go anyway with their parent; their media must not stay behind).
    const all = await subtreeIds(db, id, { includeDeleted: true });
    // The rows first; their media follow through collection.lifecycle (their stored objects after them).
    const uow = deps.ctx.unitOfWork((q) => q);
    const change = await uow(async (trx, events) => {
      const gone = await trx("collections").whereIn("id", all).select("id", "is_deleted", "thumbnail_url", "cover_thumbnail_url");
      await orphanObjects(deps, trx, gone.flatMap((c) => [c.thumbnail_url, c.cover_thumbnail_url]));
      // A soft-deleted one was restorable: a late restore of it answers 410, not 404.
      const restorable = gone.filter((c) => c.is_deleted).map((c) => ({ id: c.id, user_id: row.user_id }));
      if (restorable.length) await trx("purged_collections").insert(restorable).onConflict("id").ignore();
      await trx("collections").whereIn("id", all).update({ parent_id: null });
      await trx("collections").whereIn("id", all).delete();
      await emitUpdated(deps, trx, row, "deleted");
      const c: CollectionLifecycle = { collectionIds: all, action: "purged", version: await nextVersion(trx) };
      await emitCollectionLifecycle(events, c);
      return c;
    });
    deps.ctx.bus.flush();
    await applyToMedia(deps, change);
    return { kind: "hard", collectionId: id, collectionIds: ids, media: totalMedia };
  }
  if (ownMedia > 0 && !input.cascadeMedia) {
    throw new AppError("collection_not_empty", `Collection ${id} holds ${ownMedia} media item(s); pass cascade_media=true to soft-delete them with it, or mode=hard.`, { media_count: ownMedia });
  }
  const deletedAt = new Date();
  const change = await deps.ctx.unitOfWork((q) => q)(async (trx, events) => {
    await trx("collections").where({ id }).update({ is_deleted: true, deleted_at: deletedAt, deleted_with: null, updated_at: deletedAt });
    const rest = ids.filter((x) => x !== id);
    if (rest.length) await trx("collections").whereIn("id", rest).update({ is_deleted: true, deleted_at: deletedAt, deleted_with: id, updated_at: deletedAt });
    await emitUpdated(deps, trx, row, "deleted");
    // Always: besides the media inside, a sub-collection's link row in its parent is hidden too.
    const c: CollectionLifecycle = { collectionIds: ids, action: "soft_deleted", version: await nextVersion(trx) };
    await emitCollectionLifecycle(events, c);
    return c;
  });
  deps.ctx.bus.flush();
  await applyToMedia(deps, change);
  return { kind: "soft", collectionId: id, collectionIds: ids, media: totalMedia, restorableUntil: restorableUntil(deletedAt, caller.plan) };
}

/**
 * What collections.restore did: the dry_run preview (the row still deleted) or the restore
 * (collectionIds: the collection and those deleted with it). restorableUntil: the window's end.
 */
export type RestoreOutcome =
  | { kind: "preview"; restorableUntil: Date; row: CollectionRow }
  | { kind: "restored"; row: CollectionRow; collectionIds: number[]; restorableUntil: Date };

export async function restoreCollection(deps: Deps, caller: Caller, id: number, input: { dryRun: boolean }, now = new Date()): Promise<RestoreOutcome> {
  const { db } = deps;
  const row = await findCollection(db, id);
  if (!row) {
    const purged = await db("purged_collections").where({ id }).first();
    if (purged && purged.user_id === caller.userId) throw new AppError("restore_window_expired", `Collection ${id} was purged after its restore window.`);
    throw notFound(id);
  }
  if (row.user_id !== caller.userId) throw new AppError("forbidden", `Collection ${id} is not owned by the caller.`);
  if (!row.is_deleted) throw new AppError("invalid_request", `Collection ${id} is not deleted.`, { field: "collection_id" });
  if (row.deleted_with !== null) throw new AppError("invalid_request", `Collection ${id} was deleted with collection ${row.deleted_with}; restore that one.`, { field: "collection_id", deleted_with: row.deleted_with });
  // A live collection under a deleted one would be purged with it when that one's window ends.
  const ancestors = await ancestorIds(db, id);
  const deletedAncestor = ancestors.length ? await db("collections").whereIn("id", ancestors).where({ is_deleted: true }).first("id") : undefined;
  if (deletedAncestor) {
    throw new AppError("invalid_request", `Collection ${id} is inside collection ${deletedAncestor.id}, which is deleted; restore collection ${deletedAncestor.id} first.`, { field: "collection_id", deleted_ancestor_id: Number(deletedAncestor.id) });
  }
  const until = restorableUntil(row.deleted_at!, caller.plan);
  if (until.getTime() <= now.getTime()) {
    throw new AppError("restore_window_expired", `Collection ${id} was deleted on ${row.deleted_at!.toISOString()}; the ${caller.plan} plan keeps it restorable until ${until.toISOString()}.`, { restorable_until: until.toISOString() });
  }
  if (input.dryRun) return { kind: "preview", restorableUntil: until, row };
  const ids: number[] = [id, ...(await db("collections").where({ deleted_with: id }).pluck("id")).map(Number)];
  try {
    const { restored, change } = await deps.ctx.unitOfWork((q) => q)(async (trx, events) => {
      await trx("collections").whereIn("id", ids).update({ is_deleted: false, deleted_at: null, deleted_with: null, updated_at: now });
      const r = (await trx("collections").where({ id }).first(COLLECTION_COLUMNS))!;
      await emitUpdated(deps, trx, r, "restored");
      const c: CollectionLifecycle = { collectionIds: ids, action: "restored", version: await nextVersion(trx) };
      await emitCollectionLifecycle(events, c);
      return { restored: r, change: c };
    });
    deps.ctx.bus.flush();
    await applyToMedia(deps, change);
    return { kind: "restored", row: restored as CollectionRow, collectionIds: ids, restorableUntil: until };
  } catch (err) {
    if (isUniqueViolation(err)) throw duplicateName(row.name, row.parent_id);
    throw err;
  }
}

/**
 * The retention job: purges soft-deleted collections whose plan window has elapsed at `now`
 * (with their sub-collections and media), leaving a tombstone so a late restore answers 410.
 */
export async function purgeExpired(deps: Deps, now = new Date()): Promise<{ purged: number }> {
  const { db } = deps;
  const roots: Array<Pick<CollectionRow, "id" | "user_id" | "deleted_at">> = await db("collections")
    .where({ is_deleted: true }).whereNull("deleted_with").where("deleted_at", "<", now).select("id", "user_id", "deleted_at");
  if (!roots.length) return { purged: 0 };
  const owners = [...new Set(roots.map((r) => r.user_id))];
  const plans = new Map<string, Plan>();
  for (let i = 0; i < owners.length; i += 500) {
    const res = await deps.auth.getUsers({ userIds: owners.slice(i, i + 500) });
    for (const u of res.users) plans.set(u.userId, u.plan as Plan);
  }
  let purged = 0;
  for (const root of roots) {
    const until = restorableUntil(root.deleted_at!, plans.get(root.user_id) ?? "free");
    if (until.getTime() > now.getTime()) continue;
    const ids = await subtreeIds(db, root.id, { includeDeleted: true });
    // Never purge a live collection with a deleted parent (restore refuses to make one; rows
    // from before that rule are left for a person to look at rather than destroyed).
    const live = await db("collections").whereIn("id", ids).where({ is_deleted: false }).pluck("id");
    if (live.length) {
      deps.ctx.log.warn({ collection_id: root.id, live_descendants: live }, "retention: a deleted collection holds live sub-collections; not purged");
      continue;
    }
    const change = await deps.ctx.unitOfWork((q) => q)(async (trx, events) => {
      const covers = await trx("collections").whereIn("id", ids).select("thumbnail_url", "cover_thumbnail_url");
      await orphanObjects(deps, trx, covers.flatMap((c) => [c.thumbnail_url, c.cover_thumbnail_url]));
      await trx("purged_collections").insert(ids.map((id) => ({ id, user_id: root.user_id }))).onConflict("id").ignore();
      await trx("collections").whereIn("id", ids).update({ parent_id: null });
      await trx("collections").whereIn("id", ids).delete();
      const c: CollectionLifecycle = { collectionIds: ids, action: "purged", version: await nextVersion(trx) };
      await emitCollectionLifecycle(events, c);
      return c;
    });
    await applyToMedia(deps, change);
    purged += ids.length;
  }
  return { purged };
}
