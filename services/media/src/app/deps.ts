/** What the media application functions need: the db, the store, and the permission check. */
import type { Knex } from "knex";
import type { Client } from "@connectrpc/connect";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { AppError, EVENTS, isStoreKey, mayBeCoverKey, type Caller, type ServiceContext } from "@cms/platform";
import type { MediaRow } from "../domain/media-json.js";

export interface Deps {
  ctx: ServiceContext;
  db: Knex;
  collections: Client<typeof CollectionsService>;
}

export function createDeps(ctx: ServiceContext): Deps {
  return { ctx, db: ctx.db, collections: ctx.clients.get(CollectionsService) };
}

export type Db = Knex | Knex.Transaction;

/** read, upload (can_upload), edit (can_edit), delete (can_delete), owner (owner only). */
export type Action = "read" | "upload" | "edit" | "delete" | "owner";

export interface Access { ownerUserId: string; isOwner: boolean; isArchived: boolean }

/**
 * Asks the collections service, the one place that decides, whether the caller may act on the
 * collection. Nothing is cached: a revoked collaborator is refused on the next call.
 */
export async function authorize(deps: Deps, caller: Caller, collectionId: number, action: Action): Promise<Access> {
  const res = await deps.collections.checkAccess({ userId: caller.userId, collectionId: BigInt(collectionId), action });
  if (!res.exists || res.isDeleted) throw new AppError("not_found", `Collection ${collectionId} does not exist or is not accessible.`);
  if (!res.allowed) {
    if (res.deniedPermission) {
      throw new AppError("insufficient_permission", `As a collaborator on collection ${collectionId} you lack ${res.deniedPermission}; ask the owner to grant it. Do not retry.`, { permission: res.deniedPermission });
    }
    throw new AppError("forbidden", `Collection ${collectionId} is not owned by or shared with the caller.`);
  }
  return { ownerUserId: res.ownerUserId, isOwner: res.isOwner, isArchived: res.isArchived };
}

export async function findMedia(db: Db, id: number, opts: { forUpdate?: boolean } = {}): Promise<MediaRow | undefined> {
  const q = db("media").where({ id }).first();
  if (opts.forUpdate) q.forUpdate();
  return q;
}

/** A media row the caller may act on; deleted rows only with allowDeleted. */
export async function mediaFor(deps: Deps, caller: Caller, id: number, action: Action, opts: { allowDeleted?: boolean } = {}): Promise<{ row: MediaRow; access: Access }> {
  const row = await findMedia(deps.db, id);
  if (!row || (row.is_deleted && !opts.allowDeleted)) throw new AppError("not_found", `Media ${id} does not exist or is not accessible.`);
  const access = await authorize(deps, caller, Number(row.collection_id), action);
  return { row, access };
}

/** collection.updated for the media's collection, in the caller's transaction. */
export async function emitUpdated(deps: Deps, trx: Db, collectionId: number, kind: string): Promise<void> {
  await deps.ctx.bus.enqueue(trx, EVENTS.collectionUpdated, { collection_id: collectionId, kind, occurred_at: new Date().toISOString() });
}

/**
 * Stored objects this transaction stopped using, handed to the outbox; they go after the commit,
 * and only those nothing uses any more then (removableKeys: copies share their objects, so a key
 * goes with its last row).
 */
export async function orphanObjects(deps: Deps, trx: Db, keys: Array<string | null | undefined>): Promise<void> {
  const storeKeys = [...new Set(keys.filter((k): k is string => Boolean(k && isStoreKey(k))))];
  if (storeKeys.length) await deps.ctx.bus.enqueue(trx, EVENTS.objectsOrphaned, { store_keys: storeKeys });
}

/** The keys no media row (file, thumbnail, background) nor a pending one-call upload uses. */
async function unreferencedByMedia(db: Db, keys: string[]): Promise<string[]> {
  const { rows } = await db.raw(
    `SELECT k FROM unnest(?::text[]) AS k WHERE NOT EXISTS (SELECT 1 FROM media WHERE main_url = k)
       AND NOT EXISTS (SELECT 1 FROM media WHERE thumbnail_url = k)
       AND NOT EXISTS (SELECT 1 FROM media WHERE background_image_url = k)
       AND NOT EXISTS (SELECT 1 FROM pending_uploads WHERE store_key = k)`,
    [keys],
  );
  return rows.map((r: { k: string }) => r.k);
}

/**
 * Which of the keys a collection uses as its cover, asked of the collections service for the
 * keys with a cover's name only (every cover key has one).
 */
export async function coverKeysAmong(deps: Deps, keys: string[]): Promise<Set<string>> {
  const found = new Set<string>();
  const named = keys.filter(mayBeCoverKey);
  for (let i = 0; i < named.length; i += 1000) {
    const res = await deps.collections.coverStoreKeys({ storeKeys: named.slice(i, i + 1000) });
    for (const k of res.storeKeys) found.add(k);
  }
  return found;
}

/**
 * The keys of a media.objects.orphaned event that may really go: an object can be shared (a
 * copy, a thumbnail made from an item's file, a key adopted as a collection cover) and gain a
 * reference after the event was written, so references are checked again at removal time.
 */
export async function removableKeys(deps: Deps, keys: string[]): Promise<string[]> {
  const candidates = await unreferencedByMedia(deps.db, keys);
  if (!candidates.length) return [];
  const covers = await coverKeysAmong(deps, candidates);
  return candidates.filter((k) => !covers.has(k));
}
