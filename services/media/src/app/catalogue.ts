/** The media catalogue: reading, creating, changing, deleting and arranging media rows. */
import { AppError, isStoreKey, type Caller } from "@cms/platform";
import { LINK_VIEWER, MEDIA_COLUMNS, type MediaRow, type Page } from "../domain/media-json.js";
import { TEXT_NOTE_URL, checkName, isVideoHostingUrl, listHint, normalizeTags, textNoteColumns, textNoteMode, type ListHint } from "../domain/rules.js";
import { lockCollection, nextPosition, renumber, storeKeysOf } from "../store/media-store.js";
import { authorize, emitUpdated, findMedia, mediaFor, orphanObjects, type Deps } from "./deps.js";
import { ingestSource, thumbnailsFromKey, thumbnailsFromRemote, type Ingested } from "./ingest.js";
import { finalizedRow } from "./uploads.js";

/** Lower case without diacritics, as the search_text column is built (unaccent + lower). */
export function foldAccents(s: string): string {
  return s.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase();
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** Describe's URLs: where the bytes are; a stored object's URL needs the bearer token. */
export interface ProxyUrls { mainUrl: string; thumbnailUrl: string | null; backgroundImageUrl: string | null }

/** Proxy URLs of describe: metadata about where the bytes are, read with a bearer token. */
function proxyUrls(baseUrl: string, row: MediaRow): ProxyUrls {
  const proxy = <T extends string | null>(part: string, value: T): T | string => (value && isStoreKey(value) ? `${baseUrl}/storage/v1/media/${row.id}/${part}` : value);
  return {
    mainUrl: proxy("main", row.main_url),
    thumbnailUrl: row.thumbnail_url?.startsWith("/assets/") ? `${baseUrl}${row.thumbnail_url}` : proxy("thumbnail", row.thumbnail_url),
    backgroundImageUrl: proxy("background", row.background_image_url),
  };
}

export async function getMedia(deps: Deps, caller: Caller, id: number): Promise<MediaRow> {
  // A one-call upload whose bytes came through a presigned PUT is completed on first read.
  const { row } = await finalizedRow(deps, (await mediaFor(deps, caller, id, "read")).row);
  return row;
}

export type MediaKind = "collection_link" | "text_note" | "stored_file" | "external_link";

export interface Described { row: MediaRow; kind: MediaKind; inferredViewer: string; proxyUrls: ProxyUrls; proxyNote: string; downloadable: boolean }

export async function describeMedia(deps: Deps, caller: Caller, id: number): Promise<Described> {
  const { row } = await finalizedRow(deps, (await mediaFor(deps, caller, id, "read")).row);
  const kind: MediaKind = row.linked_collection_id !== null ? "collection_link" : row.main_url === TEXT_NOTE_URL ? "text_note" : isStoreKey(row.main_url) ? "stored_file" : "external_link";
  return {
    row,
    kind,
    inferredViewer: row.viewer,
    proxyUrls: proxyUrls(deps.ctx.config.baseUrl, row),
    proxyNote: "The proxy URLs need the bearer token and describe where the bytes are; download with media.download, media.download_url or the chunked download.",
    downloadable: kind === "stored_file",
  };
}

export interface ListInput { collectionId: number; includeArchived: boolean; tag?: string; viewer?: string; nameContains?: string; limit: number; offset: number }

/** A media.list page; `hint` says why it is empty (or past the end). */
export interface ListPage { rows: MediaRow[]; pagination: Page; hint: ListHint }

export async function listMedia(deps: Deps, caller: Caller, input: ListInput): Promise<ListPage> {
  await authorize(deps, caller, input.collectionId, "read");
  const base = deps.db("media").where({ collection_id: input.collectionId, is_deleted: false });
  const filtered = base.clone();
  if (!input.includeArchived) filtered.where({ is_archived: false });
  const unfiltered = filtered.clone();
  if (input.tag) filtered.whereRaw("? = ANY(tags)", [input.tag.toLowerCase()]);
  if (input.viewer) filtered.where({ viewer: input.viewer });
  if (input.nameContains) filtered.whereRaw("name ILIKE ?", [`%${escapeLike(input.nameContains)}%`]);
  // The page comes straight from the (collection_id, position, id) index; the total is a
  // separate count (a window count would read every row of a large collection for each page),
  // run at the same time on another connection.
  const [[{ total: totalRaw }], rows] = await Promise.all([
    filtered.clone().count<{ total: number }[]>("* as total"),
    filtered.clone().select(MEDIA_COLUMNS).orderBy([{ column: "position" }, { column: "id" }]).limit(input.limit).offset(input.offset) as Promise<MediaRow[]>,
  ]);
  const total = Number(totalRaw);
  const page: ListPage = { rows, pagination: { limit: input.limit, offset: input.offset, total }, hint: {} };
  if (!rows.length) {
    const [{ all, archived }] = await base.clone().select(deps.db.raw("count(*) AS all"), deps.db.raw("count(*) FILTER (WHERE is_archived) AS archived"));
    const [{ n }] = await unfiltered.clone().count<{ n: number }[]>("* as n");
    page.hint = listHint({
      total: Number(total), all: Number(all), archived: Number(archived), withoutFilters: Number(n),
      filtered: Boolean(input.tag || input.viewer || input.nameContains), includeArchived: input.includeArchived, offset: input.offset,
    });
  }
  return page;
}

export async function batchListMedia(deps: Deps, caller: Caller, collectionIds: number[], limit: number, offset: number): Promise<{ rows: MediaRow[]; collectionIds: number[]; pagination: Page }> {
  for (const id of collectionIds) await authorize(deps, caller, id, "owner");
  const q = deps.db("media").whereIn("collection_id", collectionIds).where({ is_deleted: false, is_archived: false });
  const [{ total }] = await q.clone().count<{ total: number }[]>("* as total");
  const rows: MediaRow[] = await q.select("*").orderByRaw("array_position(?::bigint[], collection_id), position, id", [collectionIds]).limit(limit).offset(offset);
  return { rows, collectionIds, pagination: { limit, offset, total: Number(total) } };
}

/**
 * A media.search page. No match carries a hint and the counts of matches outside the scope (when
 * there are any); a page past the end of the results carries the hint alone.
 */
export interface SearchPage {
  rows: MediaRow[]; query: string; pagination: Page; alsoArchived?: number; alsoInOtherCollections?: number; hint?: string;
}

export async function searchMedia(deps: Deps, caller: Caller, input: { query: string; collectionId?: number; limit: number; offset: number }): Promise<SearchPage> {
  const q = input.query.trim().toLowerCase();
  if (!q) throw new AppError("invalid_request", "query must not be blank.", { field: "query" });
  if (input.collectionId !== undefined) await authorize(deps, caller, input.collectionId, "read");
  const words = q.split(/\s+/).filter(Boolean);
  // The pattern is a plain bound value (folded here like unaccent+lower), so the planner can use
  // the trigram index; an expression around the parameter would force a sequential scan.
  const pattern = `%${escapeLike(foldAccents(q))}%`;
  const match = (qb: ReturnType<Deps["db"]>) => qb.where((w) => w
    .whereRaw("search_text LIKE ?", [pattern])
    .orWhereRaw("tags && ?::text[]", [words]));
  // Own media, or the collection the caller named (shared collections included).
  const scope = (qb: ReturnType<Deps["db"]>) => (input.collectionId !== undefined ? qb.where({ collection_id: input.collectionId }) : qb.where({ owner_user_id: caller.userId }));
  const active = match(scope(deps.db("media").where({ is_deleted: false, is_archived: false })).whereNot({ viewer: LINK_VIEWER }));
  const rows: Array<MediaRow & { total: number }> = await active.clone().select(MEDIA_COLUMNS).select(deps.db.raw("count(*) OVER () AS total"))
    .orderByRaw("updated_at DESC, id DESC")
    .limit(input.limit).offset(input.offset);
  const total = rows.length ? Number(rows[0]!.total) : Number((await active.clone().count<{ total: number }[]>("* as total"))[0]!.total);
  const page: SearchPage = { rows, query: input.query, pagination: { limit: input.limit, offset: input.offset, total: Number(total) } };
  if (Number(total) === 0) {
    const [{ n: archived }] = await match(scope(deps.db("media").where({ is_deleted: false, is_archived: true }))).count<{ n: number }[]>("* as n");
    if (Number(archived) > 0) page.alsoArchived = Number(archived);
    if (input.collectionId !== undefined) {
      const [{ n: elsewhere }] = await match(deps.db("media").where({ owner_user_id: caller.userId, is_deleted: false, is_archived: false }).whereNot({ collection_id: input.collectionId }).whereNot({ viewer: LINK_VIEWER })).count<{ n: number }[]>("* as n");
      if (Number(elsewhere) > 0) page.alsoInOtherCollections = Number(elsewhere);
    }
    page.hint = page.alsoInOtherCollections
      ? `No item of collection ${input.collectionId} matches "${input.query}", but ${page.alsoInOtherCollections} in your other collections do: search again without collection_id.`
      : page.alsoArchived
        ? `Only archived items match "${input.query}" (${page.alsoArchived}); unarchive them to see them here.`
        : `No media item matches "${input.query}" in its name, description or tags. Collections are searched with collections.search.`;
  } else if (input.offset >= Number(total)) {
    page.hint = `The offset ${input.offset} is past the ${total} results.`;
  }
  return page;
}

export interface CreateInput { collectionId: number; sourceUrl?: string; viewer?: string; name?: string; description?: string; tags: string[]; thumbnailUrl?: string }

/** Inserts a row at the end of its collection (positions stay dense under concurrency). */
export async function insertRow(deps: Deps, collectionId: number, ownerUserId: string, createdBy: string, fields: Partial<MediaRow>): Promise<MediaRow> {
  const row = await deps.db.transaction(async (trx) => {
    await lockCollection(trx, collectionId);
    const position = await nextPosition(trx, collectionId);
    const [r] = await trx("media").insert({ ...fields, collection_id: collectionId, owner_user_id: ownerUserId, created_by: createdBy, position }).returning("*");
    await emitUpdated(deps, trx, collectionId, "media_added");
    return r as MediaRow;
  });
  deps.ctx.bus.flush();
  return row;
}

async function thumbnailFields(deps: Deps, caller: Caller, ownerUserId: string, collectionId: number, thumbnailUrl: string | undefined, ingested?: Ingested) {
  if (thumbnailUrl && isStoreKey(thumbnailUrl)) return thumbnailsFromKey(deps, caller, ownerUserId, collectionId, thumbnailUrl);
  if (thumbnailUrl) return { thumbnail_url: thumbnailUrl, background_image_url: null };
  return { thumbnail_url: ingested?.thumbnail_url ?? null, background_image_url: ingested?.background_image_url ?? null };
}

export async function createMedia(deps: Deps, caller: Caller, input: CreateInput): Promise<MediaRow> {
  checkName(input.name);
  const tags = normalizeTags(input.tags);
  const access = await authorize(deps, caller, input.collectionId, "upload");
  if (!input.sourceUrl) throw new AppError("invalid_request", "media.create needs source_url (an http(s) URL or an object-store key); text notes use media.text_note.add.", { field: "source_url" });
  if (input.viewer === LINK_VIEWER) throw new AppError("invalid_request", "Sub-collections are created with collections.create and parent_collection_id.", { field: "viewer" });
  const ingested = await ingestSource(deps, caller, access.ownerUserId, input.collectionId, input.sourceUrl, input.viewer, !input.thumbnailUrl);
  const thumbs = await thumbnailFields(deps, caller, access.ownerUserId, input.collectionId, input.thumbnailUrl, ingested);
  // A viewer hint applies to stored files; video-hosting URLs stay website links.
  const viewer = ingested.viewer === "website" || !input.viewer || isVideoHostingUrl(input.sourceUrl) ? ingested.viewer : input.viewer;
  const row = await insertRow(deps, input.collectionId, access.ownerUserId, caller.userId, {
    name: input.name ?? ingested.title ?? null,
    description: input.description ?? null,
    tags,
    main_url: ingested.main_url,
    viewer,
    mime_type: ingested.mime_type,
    size_bytes: ingested.size_bytes,
    sha256: ingested.sha256,
    ...thumbs,
  });
  return row;
}

export interface UpdateInput { name?: string; description?: string | null; tags?: string[]; thumbnailUrl?: string; viewer?: string }

export async function updateMedia(deps: Deps, caller: Caller, id: number, input: UpdateInput): Promise<MediaRow> {
  checkName(input.name);
  const { row: cur, access } = await mediaFor(deps, caller, id, "edit");
  if (cur.linked_collection_id !== null) throw new AppError("invalid_request", "A sub-collection link row is changed through the collections operations.", { field: "media_id" });
  const patch: Partial<MediaRow> & Record<string, unknown> = {};
  if (input.name !== undefined) patch.name = input.name;
  if (input.description !== undefined) patch.description = input.description;
  if (input.tags !== undefined) patch.tags = normalizeTags(input.tags);
  if (input.viewer !== undefined) {
    if (input.viewer === "collection") throw new AppError("invalid_request", "viewer collection belongs to sub-collection link rows, which collections.create makes.", { field: "viewer" });
    if (cur.main_url === TEXT_NOTE_URL) {
      // A note's viewer and display_mode always agree: the viewer sets both.
      Object.assign(patch, textNoteColumns(textNoteMode(undefined, input.viewer)!));
    } else if (!isVideoHostingUrl(cur.main_url)) {
      patch.viewer = input.viewer;
    }
  }
  const oldThumbs: Array<string | null> = [];
  if (input.thumbnailUrl !== undefined) {
    Object.assign(patch, await thumbnailFields(deps, caller, access.ownerUserId, Number(cur.collection_id), input.thumbnailUrl));
    oldThumbs.push(cur.thumbnail_url, cur.background_image_url);
  }
  const row = await deps.db.transaction(async (trx) => {
    if (!Object.keys(patch).length) return cur;
    patch.updated_at = new Date();
    const [r] = await trx("media").where({ id }).update(patch).returning("*");
    await orphanObjects(deps, trx, oldThumbs);
    await emitUpdated(deps, trx, Number(cur.collection_id), "media_updated");
    return r as MediaRow;
  });
  deps.ctx.bus.flush();
  return row;
}

export async function replaceMedia(deps: Deps, caller: Caller, id: number, input: { sourceUrl: string; name?: string; viewer?: string; thumbnailUrl?: string }): Promise<MediaRow> {
  checkName(input.name);
  const { row: cur, access } = await mediaFor(deps, caller, id, "edit");
  if (cur.linked_collection_id !== null || cur.main_url === TEXT_NOTE_URL) throw new AppError("invalid_request", "Only files and links are replaced; text notes use media.text_note.update.", { field: "media_id" });
  const collectionId = Number(cur.collection_id);
  const ingested = await ingestSource(deps, caller, access.ownerUserId, collectionId, input.sourceUrl, input.viewer, !input.thumbnailUrl);
  const thumbs = await thumbnailFields(deps, caller, access.ownerUserId, collectionId, input.thumbnailUrl, ingested);
  const viewer = ingested.viewer === "website" || !input.viewer || isVideoHostingUrl(input.sourceUrl) ? ingested.viewer : input.viewer;
  const row = await deps.db.transaction(async (trx) => {
    const [r] = await trx("media").where({ id }).update({
      main_url: ingested.main_url, viewer, mime_type: ingested.mime_type, size_bytes: ingested.size_bytes, sha256: ingested.sha256,
      ...thumbs, ...(input.name !== undefined ? { name: input.name } : {}), updated_at: new Date(),
    }).returning("*");
    // A one-call row replaced before its bytes arrived no longer waits for them: without this,
    // the upload_finalize job would take the replaced (valid) item for abandoned and delete it.
    await trx("pending_uploads").where({ media_id: id }).delete();
    await orphanObjects(deps, trx, storeKeysOf([cur]));
    await emitUpdated(deps, trx, collectionId, "media_updated");
    return r as MediaRow;
  });
  deps.ctx.bus.flush();
  return row;
}

/** What media.delete did: with dryRun, nothing (the items it would delete); else it deleted them. */
export interface DeleteOutcome { dryRun: boolean; mode: "soft" | "hard"; mediaIds: number[] }

export async function deleteMedia(deps: Deps, caller: Caller, ids: number[], input: { mode: "soft" | "hard"; confirm: boolean; dryRun: boolean }): Promise<DeleteOutcome> {
  const rows: MediaRow[] = await deps.db("media").whereIn("id", ids).where({ is_deleted: false });
  const missing = ids.filter((id) => !rows.some((r) => Number(r.id) === id));
  if (missing.length) throw new AppError("not_found", `Media ${missing.join(", ")} do not exist or are already deleted.`, { missing_ids: missing });
  const links = rows.filter((r) => r.linked_collection_id !== null);
  if (links.length) throw new AppError("invalid_request", `Media ${links.map((r) => r.id).join(", ")} are sub-collection links; move or delete the sub-collection with collections.move or collections.delete.`, { field: "media_ids" });
  const collections = [...new Set(rows.map((r) => Number(r.collection_id)))];
  for (const c of collections) await authorize(deps, caller, c, "delete");
  if (input.dryRun) return { dryRun: true, mode: input.mode, mediaIds: ids };
  if (input.mode === "hard" && !input.confirm) {
    throw new AppError("confirmation_required", "A hard delete removes the items and their stored files permanently; pass confirm=true, dry_run=true to preview, or mode=soft.", { field: "confirm" });
  }
  await deps.db.transaction(async (trx) => {
    for (const c of collections.sort((a, b) => a - b)) await lockCollection(trx, c);
    if (input.mode === "soft") {
      await trx("media").whereIn("id", ids).update({ is_deleted: true, deleted_at: trx.fn.now(), updated_at: trx.fn.now() });
    } else {
      await trx("media").whereIn("id", ids).delete();
      // Stored objects go after the rows, and only those no other row (a copy) still uses.
      await orphanObjects(deps, trx, storeKeysOf(rows));
    }
    for (const c of collections) {
      await renumber(trx, c);
      await emitUpdated(deps, trx, c, "media_removed");
    }
  });
  deps.ctx.bus.flush();
  return { dryRun: false, mode: input.mode, mediaIds: ids };
}

export async function setArchived(deps: Deps, caller: Caller, id: number, archived: boolean): Promise<MediaRow> {
  const { row: cur } = await mediaFor(deps, caller, id, "owner");
  const row = await deps.db.transaction(async (trx) => {
    const [r] = await trx("media").where({ id }).update({ is_archived: archived, updated_at: new Date() }).returning("*");
    await emitUpdated(deps, trx, Number(cur.collection_id), archived ? "media_archived" : "media_unarchived");
    return r as MediaRow;
  });
  deps.ctx.bus.flush();
  return row;
}

export async function restoreMedia(deps: Deps, caller: Caller, id: number): Promise<MediaRow> {
  const { row: cur } = await mediaFor(deps, caller, id, "owner", { allowDeleted: true });
  if (!cur.is_deleted) throw new AppError("invalid_request", `Media ${id} is not deleted.`, { field: "media_id" });
  const row = await deps.db.transaction(async (trx) => {
    const collectionId = Number(cur.collection_id);
    await lockCollection(trx, collectionId);
    const position = await nextPosition(trx, collectionId);
    const [r] = await trx("media").where({ id }).update({ is_deleted: false, deleted_at: null, deleted_with_collection: false, position, updated_at: new Date() }).returning("*");
    await emitUpdated(deps, trx, collectionId, "media_restored");
    return r as MediaRow;
  });
  deps.ctx.bus.flush();
  return row;
}

export async function copyMedia(deps: Deps, caller: Caller, id: number, targetCollectionId: number): Promise<{ row: MediaRow; copiedFrom: number }> {
  const { row: src } = await mediaFor(deps, caller, id, "owner");
  if (src.linked_collection_id !== null) throw new AppError("invalid_request", "Sub-collection links are not copied.", { field: "media_id" });
  const target = await authorize(deps, caller, targetCollectionId, "owner");
  const { id: _id, position: _p, collection_id: _c, created_at: _ca, updated_at: _u, search_text: _s, ...fields } = src as MediaRow & { search_text?: string };
  const row = await insertRow(deps, targetCollectionId, target.ownerUserId, caller.userId, { ...fields, is_archived: false, is_deleted: false, deleted_at: null });
  return { row, copiedFrom: id };
}

export async function moveMedia(deps: Deps, caller: Caller, ids: number[], targetCollectionId: number, startPosition: number | undefined): Promise<{ rows: MediaRow[]; targetCollectionId: number }> {
  const rows: MediaRow[] = await deps.db("media").whereIn("id", ids).where({ is_deleted: false });
  const missing = ids.filter((id) => !rows.some((r) => Number(r.id) === id));
  if (missing.length) throw new AppError("not_found", `Media ${missing.join(", ")} do not exist.`, { missing_ids: missing });
  if (rows.some((r) => r.linked_collection_id !== null)) throw new AppError("invalid_request", "Sub-collection links move with collections.move.", { field: "media_ids" });
  const sources = [...new Set(rows.map((r) => Number(r.collection_id)))];
  for (const c of sources) await authorize(deps, caller, c, "owner");
  await authorize(deps, caller, targetCollectionId, "owner");
  await deps.db.transaction(async (trx) => {
    for (const c of [...new Set([...sources, targetCollectionId])].sort((a, b) => a - b)) await lockCollection(trx, c);
    const end = await nextPosition(trx, targetCollectionId);
    const start = Math.min(startPosition ?? end, end);
    // Make room at the start position, then place the moved rows in the given order.
    await trx("media").where({ collection_id: targetCollectionId, is_deleted: false }).where("position", ">=", start).whereNotIn("id", ids).increment("position", ids.length);
    for (let i = 0; i < ids.length; i++) {
      await trx("media").where({ id: ids[i]! }).update({ collection_id: targetCollectionId, position: start + i, updated_at: new Date() });
    }
    for (const c of sources) if (c !== targetCollectionId) await renumber(trx, c);
    await renumber(trx, targetCollectionId);
    for (const c of new Set([...sources, targetCollectionId])) await emitUpdated(deps, trx, c, c === targetCollectionId ? "media_added" : "media_removed");
  });
  deps.ctx.bus.flush();
  const moved: MediaRow[] = await deps.db("media").whereIn("id", ids).orderBy("position");
  return { rows: moved, targetCollectionId };
}

export async function reorderMedia(deps: Deps, caller: Caller, collectionId: number, orderedIds: number[]): Promise<{ collectionId: number; order: Array<{ id: number; position: number }> }> {
  await authorize(deps, caller, collectionId, "owner");
  const rows = await deps.db.transaction(async (trx) => {
    await lockCollection(trx, collectionId);
    const current: Array<{ id: number }> = await trx("media").where({ collection_id: collectionId, is_deleted: false }).orderBy([{ column: "position" }, { column: "id" }]).select("id");
    const have = new Set(current.map((r) => Number(r.id)));
    const foreign = orderedIds.filter((id) => !have.has(id));
    if (foreign.length) throw new AppError("invalid_request", `ordered_ids must be non-deleted media of collection ${collectionId}; not: ${foreign.join(", ")}.`, { field: "ordered_ids" });
    const listed = new Set(orderedIds);
    const order = [...orderedIds, ...current.map((r) => Number(r.id)).filter((id) => !listed.has(id))];
    if (order.length) {
      await trx.raw(`UPDATE media m SET position = o.pos - 1, updated_at = now() FROM unnest(?::bigint[]) WITH ORDINALITY AS o(id, pos) WHERE m.id = o.id AND m.position <> o.pos - 1`, [order]);
    }
    await emitUpdated(deps, trx, collectionId, "media_reordered");
    return order.map((id, i) => ({ id, position: i }));
  });
  deps.ctx.bus.flush();
  return { collectionId, order: rows };
}

/** The row with its new thumbnails; noop when nothing had to be made. */
export async function finalizeThumbnail(deps: Deps, caller: Caller, id: number, thumbnailUrl: string | undefined): Promise<{ row: MediaRow; noop: boolean }> {
  const { row: cur, access } = await mediaFor(deps, caller, id, "edit");
  const key = thumbnailUrl ?? cur.thumbnail_url;
  // Omitted, with the row's thumbnail already made from a store key (media.create/update do
  // that on their own): nothing to do. Making it again would shrink the 800 px background to the
  // 200 px thumbnail it would be made from.
  if (thumbnailUrl === undefined && key && isStoreKey(key) && cur.background_image_url) return { row: cur, noop: true };
  const remote = Boolean(key && /^https?:\/\//i.test(key));
  if (!key || (!isStoreKey(key) && !remote)) {
    throw new AppError("invalid_request", "thumbnail_url must be an object-store key (PUT it with media.get_upload_url purpose=thumbnail first) or an http(s) image URL.", { field: "thumbnail_url" });
  }
  const collectionId = Number(cur.collection_id);
  const thumbs = remote
    ? await thumbnailsFromRemote(deps, access.ownerUserId, collectionId, key)
    : await thumbnailsFromKey(deps, caller, access.ownerUserId, collectionId, key);
  const row = await deps.db.transaction(async (trx) => {
    const [r] = await trx("media").where({ id }).update({ ...thumbs, updated_at: new Date() }).returning("*");
    await orphanObjects(deps, trx, [cur.thumbnail_url, cur.background_image_url, key]);
    await emitUpdated(deps, trx, Number(cur.collection_id), "media_updated");
    return r as MediaRow;
  });
  deps.ctx.bus.flush();
  return { row, noop: false };
}

export { findMedia };
