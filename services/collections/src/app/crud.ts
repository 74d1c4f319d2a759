/** Creating, reading, updating and exporting collections. */
import { AppError, isUniqueViolation, requireScope, type Caller } from "@cms/platform";
import { COLLECTION_COLUMNS, parseFields, shareUrl, SELECTABLE_FIELDS, type CollectionRow, type ViewerPermissions } from "../domain/collection-json.js";
import { decideUpdateVisibility, normalizePlaybackPrefs, normalizeSlug, normalizeTags, toCsv, type AccessLevel } from "../domain/rules.js";
import { EXPORT_COLUMNS, exportCells } from "../domain/export.js";
import { duplicateName, emitUpdated, orphanObjects, findCollection, membership, notFound, ownedCollection, permissionsOf, readableCollection, type Deps } from "./deps.js";
import { prepareCover, storeCover, type PreparedCover } from "./covers.js";

export interface CreateInput {
  name: string;
  description?: string;
  thumbnailUrl?: string;
  isNsfw?: boolean;
  shareAccessLevel?: AccessLevel;
  tags: string[];
  searchable?: boolean;
  aliasId?: string;
  playbackPrefs?: unknown;
  parentId?: number;
  linkPosition?: number;
  linkDescription?: string;
}

/** The created collection; linkMediaId is its link row in the parent (sub-collections only). */
export async function createCollection(deps: Deps, caller: Caller, input: CreateInput): Promise<{ row: CollectionRow; linkMediaId?: number }> {
  const { db } = deps;
  if (input.parentId !== undefined) requireScope(caller, "media:write", "to create a sub-collection (its link row is a media item of the parent)");
  if (input.searchable === true) {
    throw new AppError("invalid_request", "searchable cannot be true on create: a new collection is unpublished. Publish it with searchable=true instead.", { field: "searchable" });
  }
  const tags = normalizeTags(input.tags);
  const playbackPrefs = input.playbackPrefs === undefined || input.playbackPrefs === null ? null : normalizePlaybackPrefs(input.playbackPrefs);
  let publishHandle: string | null = null;
  if (input.aliasId) {
    const res = await deps.social.resolvePublishHandle({ userId: caller.userId, mode: "alias", aliasId: input.aliasId });
    publishHandle = res.handle;
  }
  if (input.parentId !== undefined) {
    const parent = await ownedCollection(db, input.parentId, caller);
    if (parent.is_archived) throw new AppError("invalid_request", `Parent collection ${input.parentId} is archived.`, { field: "parent_collection_id" });
  }
  const cover: PreparedCover | undefined = input.thumbnailUrl ? await prepareCover(deps, caller, input.thumbnailUrl) : undefined;

  let linkMediaId: number | undefined;
  let childId: number | undefined;
  let created: CollectionRow;
  try {
    created = await db.transaction(async (trx) => {
      const pos = await trx("collections").where({ user_id: caller.userId, is_deleted: false })
        .modify((q) => (input.parentId === undefined ? q.whereNull("parent_id") : q.where("parent_id", input.parentId)))
        .max<{ max: number | null }>("position as max").first();
      const [row] = await trx("collections").insert({
        user_id: caller.userId,
        name: input.name,
        description: input.description ?? null,
        tags,
        is_nsfw: input.isNsfw ?? false,
        share_access_level: input.shareAccessLevel ?? "private",
        share_access_configured: input.shareAccessLevel !== undefined,
        publish_alias_id: input.aliasId ?? null,
        publish_handle: publishHandle,
        playback_prefs: playbackPrefs as never,
        parent_id: input.parentId ?? null,
        position: pos?.max === null || pos?.max === undefined ? 0 : Number(pos.max) + 1,
      }).returning(COLLECTION_COLUMNS);
      let r = row as CollectionRow;
      childId = r.id;
      if (cover) {
        const keys = await storeCover(deps, caller.userId, r.id, cover);
        [r] = await trx("collections").where({ id: r.id }).update({ thumbnail_url: keys.main, cover_thumbnail_url: keys.thumbnail }).returning(COLLECTION_COLUMNS) as CollectionRow[];
      }
      await emitUpdated(deps, trx, r, "created");
      if (input.parentId !== undefined) {
        const link = await deps.media.insertCollectionLink({
          parentCollectionId: BigInt(input.parentId), childCollectionId: BigInt(r.id), ownerUserId: caller.userId,
          position: input.linkPosition, description: input.linkDescription,
        });
        linkMediaId = Number(link.linkMediaId);
      }
      return r;
    });
  } catch (err) {
    if (linkMediaId !== undefined && childId !== undefined) {
      // The link row was written but the collection was not: take the link back out.
      await deps.media.moveCollectionLink({ childCollectionId: BigInt(childId!), ownerUserId: caller.userId }).catch(() => {});
    }
    if (isUniqueViolation(err)) throw duplicateName(input.name, input.parentId ?? null);
    throw err;
  }
  deps.ctx.bus.flush();
  return { row: created, linkMediaId };
}

export interface UpdateInput {
  name?: string;
  description?: string | null;
  tags?: string[];
  thumbnailUrl?: string;
  isNsfw?: boolean;
  shareAccessLevel?: AccessLevel;
  position?: number;
  searchable?: boolean;
  openFullscreen?: boolean;
  /** undefined: unchanged; null: the system username; a string: that alias. */
  aliasId?: string | null;
  playbackPrefs?: unknown;
}

export async function updateCollection(deps: Deps, caller: Caller, id: number, input: UpdateInput): Promise<CollectionRow> {
  const { db } = deps;
  // Ownership before any work on the caller's behalf (a cover fetch, an alias lookup); the
  // transaction checks again under the row lock.
  const before = await ownedCollection(db, id, caller);
  const cover = input.thumbnailUrl ? await prepareCover(deps, caller, input.thumbnailUrl) : undefined;
  let aliasHandle: { aliasId: string | null; handle: string } | undefined;
  if (input.aliasId !== undefined) {
    const res = await deps.social.resolvePublishHandle(input.aliasId === null
      ? { userId: caller.userId, mode: "username" }
      : { userId: caller.userId, mode: "alias", aliasId: input.aliasId });
    aliasHandle = { aliasId: res.aliasId || null, handle: res.handle };
  }
  try {
    const row = await db.transaction(async (trx) => {
      const cur = await ownedCollection(trx, id, caller, { forUpdate: true });
      const patch: Partial<CollectionRow> & Record<string, unknown> = {};
      const kinds: string[] = [];
      if (input.name !== undefined && input.name !== cur.name) { patch.name = input.name; kinds.push("renamed"); }
      if (input.description !== undefined) patch.description = input.description;
      if (input.tags !== undefined) patch.tags = normalizeTags(input.tags);
      if (input.isNsfw !== undefined) patch.is_nsfw = input.isNsfw;
      if (input.position !== undefined) patch.position = input.position;
      if (input.openFullscreen !== undefined) patch.open_fullscreen = input.openFullscreen;
      if (input.playbackPrefs !== undefined) patch.playback_prefs = input.playbackPrefs === null ? null : normalizePlaybackPrefs(input.playbackPrefs) as never;
      if (input.shareAccessLevel !== undefined || input.searchable !== undefined) {
        const v = decideUpdateVisibility({
          shareAccessLevel: cur.share_access_level, shareAccessConfigured: cur.share_access_configured,
          searchable: cur.searchable, isPublished: cur.is_published, openFullscreen: cur.open_fullscreen,
        }, { shareAccessLevel: input.shareAccessLevel, searchable: input.searchable });
        patch.share_access_level = v.shareAccessLevel;
        patch.share_access_configured = v.shareAccessConfigured;
        patch.searchable = v.searchable;
      }
      if (aliasHandle) {
        const changes = aliasHandle.handle !== cur.publish_handle || aliasHandle.aliasId !== cur.publish_alias_id;
        if (cur.is_published && changes) {
          throw new AppError("publish_handle_locked", "The public handle of a published collection cannot change; unpublish it, then publish again with the new alias.", {
            field: "alias_id", current_handle: cur.publish_handle, requested_handle: aliasHandle.handle,
          });
        }
        patch.publish_alias_id = aliasHandle.aliasId;
        patch.publish_handle = aliasHandle.handle;
      }
      if (cover) {
        const keys = await storeCover(deps, caller.userId, id, cover);
        await orphanObjects(deps, trx, [cur.thumbnail_url, cur.cover_thumbnail_url]);
        patch.thumbnail_url = keys.main;
        patch.cover_thumbnail_url = keys.thumbnail;
        kinds.push("cover_changed");
      }
      if (!Object.keys(patch).length) return cur;
      patch.updated_at = new Date();
      const [next] = await trx("collections").where({ id }).update(patch).returning(COLLECTION_COLUMNS) as CollectionRow[];
      await emitUpdated(deps, trx, next!, kinds[0] ?? "updated");
      return next!;
    });
    deps.ctx.bus.flush();
    return row;
  } catch (err) {
    if (isUniqueViolation(err)) throw duplicateName(input.name ?? "", before.parent_id === null ? null : Number(before.parent_id));
    throw err;
  }
}

/** A public collection read by someone other than its owner counts as a view. */
async function countView(deps: Deps, row: CollectionRow, readerId: string | undefined): Promise<void> {
  if (row.is_published && row.share_access_level === "public" && readerId !== row.user_id) {
    await deps.db("collections").where({ id: row.id }).increment("views", 1);
  }
}

/** The collection and what the caller may do on it. */
export async function getCollection(deps: Deps, caller: Caller, id: number): Promise<{ row: CollectionRow; perms: ViewerPermissions }> {
  const { row, perms } = await readableCollection(deps.db, id, caller);
  await countView(deps, row, caller.userId);
  return { row, perms };
}

export async function getBySlug(deps: Deps, caller: Caller | undefined, handle: string, slug: string): Promise<CollectionRow> {
  const who = await deps.social.resolveHandle({ handle: handle.replace(/^@/, "").toLowerCase() });
  const missing = () => new AppError("not_found", `No published collection at ${handle}/${slug}.`);
  if (!who.found) throw missing();
  // The slug as publish stored it ("My Trip" was published as my-trip).
  let stored: string;
  try { stored = normalizeSlug(slug); } catch { throw missing(); }
  const row = (await deps.db("collections")
    .where({ user_id: who.userId, share_slug: stored, is_published: true, is_deleted: false })
    .whereRaw("lower(publish_handle) = lower(?)", [handle.replace(/^@/, "")])
    .first(COLLECTION_COLUMNS)) as CollectionRow | undefined;
  if (!row) throw missing();
  const m = caller && caller.userId !== row.user_id ? await membership(deps.db, row.id, caller.userId) : undefined;
  const perms = permissionsOf(row, caller?.userId, m);
  const visible = perms.can_read || row.share_access_level === "public" || (row.share_access_level === "registered" && caller !== undefined);
  if (!visible) throw missing();
  await countView(deps, row, caller?.userId);
  return row;
}

/** The found rows in the order of `ids`, and the ids not found. */
export async function batchGet(deps: Deps, caller: Caller, ids: number[], includeArchived: boolean): Promise<{ rows: CollectionRow[]; missingIds: number[] }> {
  const q = deps.db("collections").select(COLLECTION_COLUMNS).whereIn("id", ids).where({ user_id: caller.userId, is_deleted: false });
  if (!includeArchived) q.where({ is_archived: false });
  const rows = (await q) as CollectionRow[];
  const byId = new Map(rows.map((r) => [Number(r.id), r]));
  const found = ids.filter((id) => byId.has(id));
  return {
    rows: found.map((id) => byId.get(id)!),
    missingIds: ids.filter((id) => !byId.has(id)),
  };
}

export interface ListInput {
  nameContains?: string;
  fields?: unknown;
  tag?: string;
  isNsfw?: boolean;
  includeArchived: boolean;
  parentId?: number;
  includeSubcollections: boolean;
  limit: number;
  offset: number;
}

export interface Page { limit: number; offset: number; total: number }

/**
 * A page of collections. With `fields`, the selected field names (validated, in request order);
 * the items' viewer permissions are computed only when viewer_permissions is selected.
 */
export interface CollectionList {
  items: Array<{ row: CollectionRow; perms?: ViewerPermissions }>;
  fields?: string[];
  page: Page;
}

export async function listCollections(deps: Deps, caller: Caller, input: ListInput): Promise<CollectionList> {
  if (input.parentId !== undefined && input.includeSubcollections) {
    throw new AppError("invalid_request", "parent_collection_id and include_subcollections=true cannot be combined.", { field: "include_subcollections" });
  }
  const fields = parseFields(input.fields);
  if (fields) {
    const bad = fields.find((f) => !(SELECTABLE_FIELDS as readonly string[]).includes(f));
    if (bad) throw new AppError("invalid_request", `Unknown field "${bad}" in fields; selectable: ${SELECTABLE_FIELDS.join(", ")}.`, { field: "fields" });
  }
  if (input.parentId !== undefined) await readableCollection(deps.db, input.parentId, caller);
  const q = deps.db("collections").where({ is_deleted: false });
  if (input.parentId !== undefined) q.where({ parent_id: input.parentId });
  else {
    q.where({ user_id: caller.userId });
    if (!input.includeSubcollections) q.whereNull("parent_id");
  }
  if (!input.includeArchived) q.where({ is_archived: false });
  if (input.nameContains) q.whereRaw("name ILIKE ?", [`%${input.nameContains.replace(/[\\%_]/g, (c) => `\\${c}`)}%`]);
  if (input.tag) q.whereRaw("? = ANY(tags)", [input.tag.toLowerCase()]);
  if (input.isNsfw !== undefined) q.where({ is_nsfw: input.isNsfw });
  const [{ total }] = await q.clone().count<{ total: number }[]>("* as total");
  const rows = (await q.select(COLLECTION_COLUMNS).orderBy([{ column: "position" }, { column: "id" }]).limit(input.limit).offset(input.offset)) as CollectionRow[];
  const withPerms = fields?.includes("viewer_permissions") ?? false;
  const items = rows.map((row) => (withPerms
    ? { row, perms: permissionsOf(row, caller.userId, row.user_id === caller.userId ? undefined : { can_upload: false, can_edit: false, can_delete: false }) }
    : { row }));
  return { items, fields, page: { limit: input.limit, offset: input.offset, total: Number(total) } };
}

export async function setArchived(deps: Deps, caller: Caller, id: number, archived: boolean): Promise<CollectionRow> {
  const row = await deps.db.transaction(async (trx) => {
    const cur = await ownedCollection(trx, id, caller, { forUpdate: true });
    if (cur.is_archived === archived) return cur;
    const [next] = await trx("collections").where({ id }).update({ is_archived: archived, updated_at: new Date() }).returning(COLLECTION_COLUMNS) as CollectionRow[];
    await emitUpdated(deps, trx, next!, archived ? "archived" : "unarchived");
    return next!;
  });
  deps.ctx.bus.flush();
  return row;
}

/** The share URL of a published collection, with the handle and slug it is made of. */
export async function shareUrlOf(deps: Deps, caller: Caller, id: number): Promise<{ url: string; handle: string; slug: string; shareAccessLevel: string }> {
  const { row } = await readableCollection(deps.db, id, caller);
  const url = shareUrl(deps.appUrl, row);
  if (!url) throw new AppError("invalid_request", `Collection ${id} is not published; publish it first.`, { field: "collection_id" });
  // A share URL exists only with a handle and a slug.
  return { url, handle: row.publish_handle!, slug: row.share_slug!, shareAccessLevel: row.share_access_level };
}

export async function statsOf(deps: Deps, caller: Caller, id: number): Promise<{ collectionId: number; likes: number; views: number }> {
  const row = await findCollection(deps.db, id);
  if (!row || row.is_deleted) throw notFound(id);
  const isPublic = row.is_published && row.share_access_level === "public";
  if (!isPublic) await readableCollection(deps.db, id, caller);
  return { collectionId: id, likes: Number(row.likes), views: Number(row.views) };
}

/** collections.export: the collection and its media, or the media as CSV. */
export async function exportCollection(deps: Deps, caller: Caller, id: number, format: "json" | "csv", includeArchived: boolean) {
  const { row } = await readableCollection(deps.db, id, caller);
  const { media } = await deps.media.exportCollectionMedia({ collectionId: BigInt(id), includeArchived });
  if (format === "csv") return { format, content: toCsv(EXPORT_COLUMNS, media.map(exportCells)), columns: EXPORT_COLUMNS };
  return { format, row, media };
}

/** CheckAccess: may this user do this on this collection? Nothing is cached. */
/** The keys among `keys` that a collection (deleted ones included) holds as its cover. */
export async function coverStoreKeys(deps: Deps, keys: string[]): Promise<{ storeKeys: string[] }> {
  if (!keys.length) return { storeKeys: [] };
  const { rows } = await deps.db.raw(
    `SELECT k FROM unnest(?::text[]) AS k WHERE EXISTS (SELECT 1 FROM collections WHERE thumbnail_url = k)
        OR EXISTS (SELECT 1 FROM collections WHERE cover_thumbnail_url = k)`,
    [keys],
  );
  return { storeKeys: rows.map((r: { k: string }) => r.k) };
}

export async function checkAccess(deps: Deps, userId: string, id: number, action: string) {
  const row = await findCollection(deps.db, id);
  if (!row) return { exists: false, allowed: false, isOwner: false, ownerUserId: "", isArchived: false, isDeleted: false, deniedPermission: "" };
  const base = { exists: true, ownerUserId: row.user_id, isArchived: row.is_archived, isDeleted: row.is_deleted, isPublished: row.is_published };
  if (row.is_deleted) return { ...base, allowed: false, isOwner: row.user_id === userId, deniedPermission: "" };
  if (userId && row.user_id === userId) return { ...base, allowed: true, isOwner: true, deniedPermission: "" };
  const m = userId ? await membership(deps.db, id, userId) : undefined;
  if (action === "read") {
    const publicRead = row.is_published && (row.share_access_level === "public" || (row.share_access_level === "registered" && Boolean(userId)));
    return { ...base, allowed: Boolean(m) || publicRead, isOwner: false, deniedPermission: "" };
  }
  if (!m || action === "owner") return { ...base, allowed: false, isOwner: false, deniedPermission: "" };
  const flag = action === "upload" ? "can_upload" : action === "edit" ? "can_edit" : "can_delete";
  const allowed = m[flag as keyof typeof m];
  return { ...base, allowed, isOwner: false, deniedPermission: allowed ? "" : flag };
}
