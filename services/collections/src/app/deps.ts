/** What the collections application functions need, and the helpers they share. */
import type { Knex } from "knex";
import type { Client } from "@connectrpc/connect";
import { AppError, EVENTS, type Caller, type ServiceContext } from "@cms/platform";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { COLLECTION_COLUMNS, type CollectionRow, type ViewerPermissions } from "../domain/collection-json.js";

export interface Deps {
  ctx: ServiceContext;
  db: Knex;
  media: Client<typeof MediaService>;
  social: Client<typeof SocialService>;
  auth: Client<typeof AuthService>;
  appUrl: string;
}

export function createDeps(ctx: ServiceContext): Deps {
  return {
    ctx,
    db: ctx.db,
    media: ctx.clients.get(MediaService),
    social: ctx.clients.get(SocialService),
    auth: ctx.clients.get(AuthService),
    get appUrl() { return ctx.config.appUrl; },
  };
}

export type Db = Knex | Knex.Transaction;

export async function findCollection(db: Db, id: number, opts: { forUpdate?: boolean } = {}): Promise<CollectionRow | undefined> {
  const q = db("collections").where({ id }).first(COLLECTION_COLUMNS);
  if (opts.forUpdate) q.forUpdate();
  return q;
}

export function notFound(id: number): AppError {
  return new AppError("not_found", `Collection ${id} does not exist or is not accessible.`);
}

/** A live (non-deleted) collection the caller owns; 404 when missing, 403 when someone else's. */
export async function ownedCollection(db: Db, id: number, caller: Caller, opts: { forUpdate?: boolean; allowDeleted?: boolean } = {}): Promise<CollectionRow> {
  const row = await findCollection(db, id, opts);
  if (!row || (row.is_deleted && !opts.allowDeleted)) throw notFound(id);
  if (row.user_id !== caller.userId) throw new AppError("forbidden", `Collection ${id} is not owned by the caller.`);
  return row;
}

export interface Membership { can_upload: boolean; can_edit: boolean; can_delete: boolean }

export async function membership(db: Db, collectionId: number, userId: string): Promise<Membership | undefined> {
  return db("collaborators").where({ collection_id: collectionId, user_id: userId, status: "accepted" })
    .first("can_upload", "can_edit", "can_delete");
}

export function permissionsOf(row: CollectionRow, userId: string | undefined, m: Membership | undefined): ViewerPermissions {
  if (userId && row.user_id === userId) return { is_owner: true, can_read: true, can_upload: true, can_edit: true, can_delete: true };
  if (m) return { is_owner: false, can_read: true, ...m };
  return { is_owner: false, can_read: false, can_upload: false, can_edit: false, can_delete: false };
}

/** A live collection the caller owns or collaborates on. */
export async function readableCollection(db: Db, id: number, caller: Caller): Promise<{ row: CollectionRow; perms: ViewerPermissions }> {
  const row = await findCollection(db, id);
  if (!row || row.is_deleted) throw notFound(id);
  const m = row.user_id === caller.userId ? undefined : await membership(db, id, caller.userId);
  const perms = permissionsOf(row, caller.userId, m);
  if (!perms.can_read) throw new AppError("forbidden", `Collection ${id} is not owned by or shared with the caller.`);
  return { row, perms };
}

/** Writes collection.updated through the outbox, in the caller's transaction. */
export async function emitUpdated(deps: Deps, trx: Db, row: Pick<CollectionRow, "id" | "user_id" | "is_published">, kind: string): Promise<void> {
  await deps.ctx.bus.enqueue(trx, EVENTS.collectionUpdated, {
    collection_id: row.id,
    owner_user_id: row.user_id,
    kind,
    published: row.is_published,
    occurred_at: new Date().toISOString(),
  });
}

/**
 * Schedules removal of stored objects (replaced or deleted covers) through the outbox, so they
 * go only once this transaction committed, and are retried until they are gone.
 */
export async function orphanObjects(deps: Deps, trx: Db, keys: Array<string | null | undefined>): Promise<void> {
  const storeKeys = keys.filter((k): k is string => typeof k === "string" && k.startsWith("store://"));
  if (storeKeys.length) await deps.ctx.bus.enqueue(trx, EVENTS.objectsOrphaned, { store_keys: storeKeys });
}

/** Ids of the collection's subtree (itself first), any depth. */
export async function subtreeIds(db: Db, id: number, opts: { includeDeleted?: boolean } = {}): Promise<number[]> {
  const { rows } = await db.raw(
    `WITH RECURSIVE t AS (
       SELECT id FROM collections WHERE id = ?
       UNION ALL SELECT c.id FROM collections c JOIN t ON c.parent_id = t.id ${opts.includeDeleted ? "" : "WHERE NOT c.is_deleted"}
     ) SELECT id FROM t`,
    [id],
  );
  return rows.map((r: { id: number }) => Number(r.id));
}

/** The collection's ancestors, nearest first. */
export async function ancestorIds(db: Db, id: number): Promise<number[]> {
  const { rows } = await db.raw(
    `WITH RECURSIVE a AS (
       SELECT parent_id AS id, 1 AS depth FROM collections WHERE id = ?
       UNION ALL SELECT c.parent_id, a.depth + 1 FROM collections c JOIN a ON c.id = a.id WHERE a.depth < 1000
     ) SELECT id FROM a WHERE id IS NOT NULL ORDER BY depth`,
    [id],
  );
  return rows.map((r: { id: number }) => Number(r.id));
}

export function duplicateName(name: string, where: "root" | number | null): AppError {
  const place = where === null || where === "root" ? "at the top level" : `under collection ${where}`;
  return new AppError("duplicate_collection_name", `A collection named "${name}" already exists ${place}; choose another name.`, { field: "name" });
}
