/** What every use case of the collections application shares: its dependencies and the access checks. */
import { AppError, type Caller, type CollectionChange } from "@cms/platform";
import { permissionsOf, type CollectionRow, type ViewerPermissions } from "../domain/collection-json.js";
import type { CollectionsAppDeps, CollectionsStores } from "./ports.js";

/** The dependencies with the clock settled. */
export type AppContext = CollectionsAppDeps & { now: () => Date };

/** The dependencies with the clock defaulted to the real one. */
export function contextOf(deps: CollectionsAppDeps): AppContext {
  return { ...deps, now: deps.now ?? (() => new Date()) };
}

/** The 404 of a collection that is missing, deleted or not the caller's to see. */
export function notFound(id: number): AppError {
  return new AppError("not_found", `Collection ${id} does not exist or is not accessible.`);
}

/** The 409 of a name taken among the owner's live collections under the same parent (null: top level). */
export function duplicateName(name: string, where: number | null): AppError {
  const place = where === null ? "at the top level" : `under collection ${where}`;
  return new AppError("duplicate_collection_name", `A collection named "${name}" already exists ${place}; choose another name.`, { field: "name" });
}

/** A live (non-deleted) collection the caller owns; 404 when missing, 403 when someone else's. */
export async function ownedCollection(stores: Pick<CollectionsStores, "collections">, id: number, caller: Caller, opts: { lock?: boolean; allowDeleted?: boolean } = {}): Promise<CollectionRow> {
  const row = await stores.collections.byId(id, { lock: opts.lock });
  if (!row || (row.is_deleted && !opts.allowDeleted)) throw notFound(id);
  if (row.user_id !== caller.userId) throw new AppError("forbidden", `Collection ${id} is not owned by the caller.`);
  return row;
}

/** A live collection the caller owns or collaborates on, and what the caller may do on it. */
export async function readableCollection(stores: Pick<CollectionsStores, "collections" | "collaborators">, id: number, caller: Caller): Promise<{ row: CollectionRow; perms: ViewerPermissions }> {
  const row = await stores.collections.byId(id);
  if (!row || row.is_deleted) throw notFound(id);
  const m = row.user_id === caller.userId ? undefined : await stores.collaborators.membership(id, caller.userId);
  const perms = permissionsOf(row, caller.userId, m);
  if (!perms.can_read) throw new AppError("forbidden", `Collection ${id} is not owned by or shared with the caller.`);
  return { row, perms };
}

/** The collection.updated change of a row (its owner and published flag as they are now). */
export function changeOf(row: Pick<CollectionRow, "id" | "user_id" | "is_published">, kind: string): CollectionChange {
  return { collectionId: row.id, kind, ownerUserId: row.user_id, published: row.is_published };
}
