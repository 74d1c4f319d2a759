/** The media catalogue: reading, creating, changing, deleting and arranging media rows. */
import { AppError, emitCollectionUpdated, emitObjectsOrphaned, isStoreKey, normalizeTags, type Caller } from "@cms/platform";
import { LINK_VIEWER, type MediaRow, type Page } from "../domain/media-row.js";
import { TEXT_NOTE_URL, checkName, isVideoHostingUrl, listHint, textNoteColumns, textNoteMode, type ListHint } from "../domain/rules.js";
import { storeKeysOf, type MediaPatch } from "../store/media-store.js";
import { mediaNotFound, type MediaAccess } from "./access.js";
import type { Ingest } from "./ingest.js";
import type { PendingUploads } from "./pending-uploads.js";
import type { MediaDeps } from "./ports.js";
import { adoptStoredObject, appendRow, removeRows, type RowToAppend, type StoredFiles } from "./stored-files.js";

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

/** What a row is, as media.describe names it. */
export type MediaKind = "collection_link" | "text_note" | "stored_file" | "external_link";

/** What media.describe says about a row besides the row. */
export interface Described { row: MediaRow; kind: MediaKind; inferredViewer: string; proxyUrls: ProxyUrls; proxyNote: string; downloadable: boolean }

/** A media.list request. */
export interface ListInput { collectionId: number; includeArchived: boolean; tag?: string; viewer?: string; nameContains?: string; limit: number; offset: number }

/** A media.list page; `hint` says why it is empty (or past the end). */
export interface ListPage { rows: MediaRow[]; pagination: Page; hint: ListHint }

/**
 * A media.search page. No match carries a hint and the counts of matches outside the scope (when
 * there are any); a page past the end of the results carries the hint alone.
 */
export interface SearchPage {
  rows: MediaRow[]; query: string; pagination: Page; alsoArchived?: number; alsoInOtherCollections?: number; hint?: string;
}

/** A media.create request (tags not yet normalized). */
export interface CreateInput { collectionId: number; sourceUrl?: string; viewer?: string; name?: string; description?: string; tags: string[]; thumbnailUrl?: string }

/** A media.update request: only the fields given change (description null clears it). */
export interface UpdateInput { name?: string; description?: string | null; tags?: string[]; thumbnailUrl?: string; viewer?: string }

/** What media.delete did: with dryRun, nothing (the items it would delete); else it deleted them. */
export interface DeleteOutcome { dryRun: boolean; mode: "soft" | "hard"; mediaIds: number[] }

/** The catalogue use cases: reading, creating, changing, deleting and arranging media rows. */
export function createCatalogue(
  { stores, unitOfWork, objects, config }: Pick<MediaDeps, "stores" | "unitOfWork" | "objects" | "config">,
  { access, ingest, files, pending }: { access: MediaAccess; ingest: Ingest; files: StoredFiles; pending: PendingUploads },
) {
  const { authorize, mediaFor } = access;

  /**
   * Runs the unit of work that writes what ingesting made (fresh objects: downloads, thumbnails;
   * never an adopted key); when it fails, those objects are removed again.
   */
  async function writing<T>(made: Array<string | null | undefined>, adopted: Array<string | undefined>, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      await ingest.removeObjects(made.filter((k): k is string => Boolean(k && isStoreKey(k) && !adopted.includes(k))));
      throw err;
    }
  }

  /**
   * Whether the row's thumbnail pair was made from this object-store key: the source is consumed
   * (removed once the pair was stored), and the pair is what it would make again. A retried
   * media.update, or the media.thumbnail_finalize of the upload flow after it, then changes nothing.
   */
  function pairMadeFrom(row: MediaRow, key: string | undefined): boolean {
    return key !== undefined && key === row.thumbnail_source && row.background_image_url !== null;
  }

  async function getMedia(caller: Caller, id: number): Promise<MediaRow> {
    // A one-call upload whose bytes came through a presigned PUT is completed on first read.
    const { row } = await pending.finalizedRow((await mediaFor(caller, id, "read")).row);
    return row;
  }

  async function describeMedia(caller: Caller, id: number): Promise<Described> {
    const { row } = await pending.finalizedRow((await mediaFor(caller, id, "read")).row);
    const kind: MediaKind = row.linked_collection_id !== null ? "collection_link" : row.main_url === TEXT_NOTE_URL ? "text_note" : isStoreKey(row.main_url) ? "stored_file" : "external_link";
    return {
      row,
      kind,
      inferredViewer: row.viewer,
      proxyUrls: proxyUrls(config.baseUrl, row),
      proxyNote: "The proxy URLs need the bearer token and describe where the bytes are; download with media.download, media.download_url or the chunked download.",
      downloadable: kind === "stored_file",
    };
  }

  async function listMedia(caller: Caller, input: ListInput): Promise<ListPage> {
    // The page is read while the collections service decides on access, and kept only once it
    // allowed it: in split mode the check is a hop to another process, and waiting for it
    // before the read put both on the request's path. A refusal wins over a failed read.
    const reading = stores.media.listPage(input);
    reading.catch(() => {});
    await authorize(caller, input.collectionId, "read");
    const { rows, total } = await reading;
    const page: ListPage = { rows, pagination: { limit: input.limit, offset: input.offset, total }, hint: {} };
    if (!rows.length) {
      const counts = await stores.media.listCounts(input);
      page.hint = listHint({
        total, all: counts.all, archived: counts.archived, withoutFilters: counts.withoutFilters,
        filtered: Boolean(input.tag || input.viewer || input.nameContains), includeArchived: input.includeArchived, offset: input.offset,
      });
    }
    return page;
  }

  async function batchListMedia(caller: Caller, collectionIds: number[], limit: number, offset: number): Promise<{ rows: MediaRow[]; collectionIds: number[]; pagination: Page }> {
    for (const id of collectionIds) await authorize(caller, id, "owner");
    const { rows, total } = await stores.media.batchPage(collectionIds, limit, offset);
    return { rows, collectionIds, pagination: { limit, offset, total } };
  }

  async function searchMedia(caller: Caller, input: { query: string; collectionId?: number; limit: number; offset: number }): Promise<SearchPage> {
    const q = input.query.trim().toLowerCase();
    if (!q) throw new AppError("invalid_request", "query must not be blank.", { field: "query" });
    if (input.collectionId !== undefined) await authorize(caller, input.collectionId, "read");
    // Own media, or the collection the caller named (shared collections included).
    const scope = input.collectionId !== undefined ? { collectionId: input.collectionId } : { ownerUserId: caller.userId };
    const { rows, total } = await stores.media.searchPage({ ...scope, archived: false }, q, input.limit, input.offset);
    const page: SearchPage = { rows, query: input.query, pagination: { limit: input.limit, offset: input.offset, total } };
    if (total === 0) {
      const archived = await stores.media.searchCount({ ...scope, archived: true, withLinks: true }, q);
      if (archived > 0) page.alsoArchived = archived;
      if (input.collectionId !== undefined) {
        const elsewhere = await stores.media.searchCount({ ownerUserId: caller.userId, exceptCollectionId: input.collectionId, archived: false }, q);
        if (elsewhere > 0) page.alsoInOtherCollections = elsewhere;
      }
      page.hint = page.alsoInOtherCollections
        ? `No item of collection ${input.collectionId} matches "${input.query}", but ${page.alsoInOtherCollections} in your other collections do: search again without collection_id.`
        : page.alsoArchived
          ? `Only archived items match "${input.query}" (${page.alsoArchived}); unarchive them to see them here.`
          : `No media item matches "${input.query}" in its name, description or tags. Collections are searched with collections.search.`;
    } else if (input.offset >= total) {
      page.hint = `The offset ${input.offset} is past the ${total} results.`;
    }
    return page;
  }

  async function createMedia(caller: Caller, input: CreateInput): Promise<MediaRow> {
    checkName(input.name);
    const tags = normalizeTags(input.tags, "media item");
    const { ownerUserId } = await authorize(caller, input.collectionId, "upload");
    if (!input.sourceUrl) throw new AppError("invalid_request", "media.create needs source_url (an http(s) URL or an object-store key); text notes use media.text_note.add.", { field: "source_url" });
    if (input.viewer === LINK_VIEWER) throw new AppError("invalid_request", "Sub-collections are created with collections.create and parent_collection_id.", { field: "viewer" });
    const ingested = await ingest.ingestSource(caller, ownerUserId, input.collectionId, input.sourceUrl, input.viewer, !input.thumbnailUrl);
    const thumbs = await ingest.thumbnailFields(caller, ownerUserId, input.collectionId, input.thumbnailUrl, ingested);
    // A viewer hint applies to stored files; video-hosting URLs stay website links.
    const viewer = ingested.viewer === "website" || !input.viewer || isVideoHostingUrl(input.sourceUrl) ? ingested.viewer : input.viewer;
    const made = [ingested.main_url, ingested.thumbnail_url, ingested.background_image_url, thumbs.thumbnail_url, thumbs.background_image_url];
    const row: RowToAppend = {
      collection_id: input.collectionId,
      owner_user_id: ownerUserId,
      created_by: caller.userId,
      name: input.name ?? ingested.title ?? null,
      description: input.description ?? null,
      tags,
      main_url: ingested.main_url,
      viewer,
      mime_type: ingested.mime_type,
      size_bytes: ingested.size_bytes,
      sha256: ingested.sha256,
      ...thumbs,
    };
    const adopted = isStoreKey(input.sourceUrl) ? input.sourceUrl : undefined;
    return writing(made, [input.sourceUrl], () => unitOfWork(async (unit, events) => {
      if (adopted) await adoptStoredObject(unit, objects, adopted);
      await emitObjectsOrphaned(events, [thumbs.thumbnail_source]);
      return appendRow(unit, events, row);
    }));
  }

  async function updateMedia(caller: Caller, id: number, input: UpdateInput): Promise<MediaRow> {
    checkName(input.name);
    const { row: cur, access: granted } = await mediaFor(caller, id, "edit");
    if (cur.linked_collection_id !== null) throw new AppError("invalid_request", "A sub-collection link row is changed through the collections operations.", { field: "media_id" });
    const patch: MediaPatch = {};
    if (input.name !== undefined) patch.name = input.name;
    if (input.description !== undefined) patch.description = input.description;
    if (input.tags !== undefined) patch.tags = normalizeTags(input.tags, "media item");
    if (input.viewer !== undefined) {
      if (input.viewer === "collection") throw new AppError("invalid_request", "viewer collection belongs to sub-collection link rows, which collections.create makes.", { field: "viewer" });
      if (cur.main_url === TEXT_NOTE_URL) {
        // A note's viewer and display_mode always agree: the viewer sets both.
        Object.assign(patch, textNoteColumns(textNoteMode(undefined, input.viewer)!));
      } else if (!isVideoHostingUrl(cur.main_url)) {
        patch.viewer = input.viewer;
      }
    }
    if (input.thumbnailUrl !== undefined && !pairMadeFrom(cur, input.thumbnailUrl)) {
      Object.assign(patch, await ingest.thumbnailFields(caller, granted.ownerUserId, Number(cur.collection_id), input.thumbnailUrl));
    }
    if (!Object.keys(patch).length) return cur;
    return writing([patch.thumbnail_url, patch.background_image_url], [], () => files.updateRow(cur, patch, (events) =>
      emitCollectionUpdated(events, { collectionId: Number(cur.collection_id), kind: "media_updated" }), [patch.thumbnail_source]));
  }

  async function replaceMedia(caller: Caller, id: number, input: { sourceUrl: string; name?: string; viewer?: string; thumbnailUrl?: string }): Promise<MediaRow> {
    checkName(input.name);
    const { row: cur, access: granted } = await mediaFor(caller, id, "edit");
    if (cur.linked_collection_id !== null || cur.main_url === TEXT_NOTE_URL) throw new AppError("invalid_request", "Only files and links are replaced; text notes use media.text_note.update.", { field: "media_id" });
    const collectionId = Number(cur.collection_id);
    const ingested = await ingest.ingestSource(caller, granted.ownerUserId, collectionId, input.sourceUrl, input.viewer, !input.thumbnailUrl);
    const thumbs = await ingest.thumbnailFields(caller, granted.ownerUserId, collectionId, input.thumbnailUrl, ingested);
    const viewer = ingested.viewer === "website" || !input.viewer || isVideoHostingUrl(input.sourceUrl) ? ingested.viewer : input.viewer;
    const made = [ingested.main_url, ingested.thumbnail_url, ingested.background_image_url, thumbs.thumbnail_url, thumbs.background_image_url];
    return writing(made, [input.sourceUrl], () => unitOfWork(async (unit, events) => {
      const { media } = unit;
      // The objects replaced are the row's as it is now, locked until the commit: cur may be older
      // than another replacement, whose objects would then be named by no row and by no event.
      const replaced = await media.byId(id, { forUpdate: true });
      if (!replaced) throw mediaNotFound(id);
      if (isStoreKey(input.sourceUrl)) await adoptStoredObject(unit, objects, input.sourceUrl);
      const row = await media.update(id, {
        main_url: ingested.main_url, viewer, mime_type: ingested.mime_type, size_bytes: ingested.size_bytes, sha256: ingested.sha256,
        ...thumbs, ...(input.name !== undefined ? { name: input.name } : {}),
      });
      // A one-call row replaced before its bytes arrived no longer waits for them: without this,
      // the upload_finalize job would take the replaced (valid) item for abandoned and delete it.
      await media.removePending(id);
      await emitObjectsOrphaned(events, [...storeKeysOf([replaced]), thumbs.thumbnail_source]);
      await emitCollectionUpdated(events, { collectionId, kind: "media_updated" });
      return row;
    }));
  }

  async function deleteMedia(caller: Caller, ids: number[], input: { mode: "soft" | "hard"; confirm: boolean; dryRun: boolean }): Promise<DeleteOutcome> {
    const rows = await stores.media.activeByIds(ids);
    const missing = ids.filter((id) => !rows.some((r) => Number(r.id) === id));
    if (missing.length) throw new AppError("not_found", `Media ${missing.join(", ")} do not exist or are already deleted.`, { missing_ids: missing });
    const links = rows.filter((r) => r.linked_collection_id !== null);
    if (links.length) throw new AppError("invalid_request", `Media ${links.map((r) => r.id).join(", ")} are sub-collection links; move or delete the sub-collection with collections.move or collections.delete.`, { field: "media_ids" });
    const collections = [...new Set(rows.map((r) => Number(r.collection_id)))];
    for (const c of collections) await authorize(caller, c, "delete");
    if (input.dryRun) return { dryRun: true, mode: input.mode, mediaIds: ids };
    if (input.mode === "hard" && !input.confirm) {
      throw new AppError("confirmation_required", "A hard delete removes the items and their stored files permanently; pass confirm=true, dry_run=true to preview, or mode=soft.", { field: "confirm" });
    }
    await unitOfWork(async (unit, events) => {
      const { media } = unit;
      await media.lockCollections(collections);
      if (input.mode === "soft") {
        await media.softDelete(ids);
      } else {
        await removeRows(unit, events, ids);
      }
      for (const c of collections) {
        await media.renumber(c);
        await emitCollectionUpdated(events, { collectionId: c, kind: "media_removed" });
      }
    });
    return { dryRun: false, mode: input.mode, mediaIds: ids };
  }

  async function setArchived(caller: Caller, id: number, archived: boolean): Promise<MediaRow> {
    const { row: cur } = await mediaFor(caller, id, "owner");
    return files.updateRow(cur, { is_archived: archived }, (events) =>
      emitCollectionUpdated(events, { collectionId: Number(cur.collection_id), kind: archived ? "media_archived" : "media_unarchived" }));
  }

  async function restoreMedia(caller: Caller, id: number): Promise<MediaRow> {
    const { row: cur } = await mediaFor(caller, id, "owner", { allowDeleted: true });
    if (!cur.is_deleted) throw new AppError("invalid_request", `Media ${id} is not deleted.`, { field: "media_id" });
    const collectionId = Number(cur.collection_id);
    return unitOfWork(async ({ media }, events) => {
      await media.lockCollections([collectionId]);
      const position = await media.nextPosition(collectionId);
      const row = await media.update(id, { is_deleted: false, deleted_at: null, deleted_with_collection: false, position });
      await emitCollectionUpdated(events, { collectionId, kind: "media_restored" });
      return row;
    });
  }

  async function copyMedia(caller: Caller, id: number, targetCollectionId: number): Promise<{ row: MediaRow; copiedFrom: number }> {
    const { row: src } = await mediaFor(caller, id, "owner");
    if (src.linked_collection_id !== null) throw new AppError("invalid_request", "Sub-collection links are not copied.", { field: "media_id" });
    const target = await authorize(caller, targetCollectionId, "owner");
    const row = await unitOfWork(async (unit, events) => {
      // The copy names the source's stored objects as the source row names them now, locked until
      // the commit: src may be older than a hard delete (or a new thumbnail) whose orphaned objects
      // the cleanup would remove, leaving the copy naming objects that are gone. The target is
      // locked before the row, as media.move locks collections before it writes rows.
      await unit.media.lockCollections([targetCollectionId]);
      const now = await unit.media.byId(id, { forUpdate: true });
      if (!now || now.is_deleted) throw mediaNotFound(id);
      const { id: _id, position: _p, collection_id: _c, created_at: _ca, updated_at: _u, ...fields } = now;
      return appendRow(unit, events, {
        ...fields, collection_id: targetCollectionId, owner_user_id: target.ownerUserId, created_by: caller.userId, is_archived: false, is_deleted: false, deleted_at: null,
      });
    });
    return { row, copiedFrom: id };
  }

  async function moveMedia(caller: Caller, ids: number[], targetCollectionId: number, startPosition: number | undefined): Promise<{ rows: MediaRow[]; targetCollectionId: number }> {
    const rows = await stores.media.activeByIds(ids);
    const missing = ids.filter((id) => !rows.some((r) => Number(r.id) === id));
    if (missing.length) throw new AppError("not_found", `Media ${missing.join(", ")} do not exist.`, { missing_ids: missing });
    if (rows.some((r) => r.linked_collection_id !== null)) throw new AppError("invalid_request", "Sub-collection links move with collections.move.", { field: "media_ids" });
    const sources = [...new Set(rows.map((r) => Number(r.collection_id)))];
    for (const c of sources) await authorize(caller, c, "owner");
    await authorize(caller, targetCollectionId, "owner");
    await unitOfWork(async ({ media }, events) => {
      await media.lockCollections([...sources, targetCollectionId]);
      const end = await media.nextPosition(targetCollectionId);
      const start = Math.min(startPosition ?? end, end);
      // Make room at the start position, then place the moved rows in the given order.
      await media.shiftPositions(targetCollectionId, start, ids.length, ids);
      for (let i = 0; i < ids.length; i++) await media.update(ids[i]!, { collection_id: targetCollectionId, position: start + i });
      for (const c of sources) if (c !== targetCollectionId) await media.renumber(c);
      await media.renumber(targetCollectionId);
      for (const c of new Set([...sources, targetCollectionId])) {
        await emitCollectionUpdated(events, { collectionId: c, kind: c === targetCollectionId ? "media_added" : "media_removed" });
      }
    });
    return { rows: await stores.media.byIdsInPositionOrder(ids), targetCollectionId };
  }

  async function reorderMedia(caller: Caller, collectionId: number, orderedIds: number[]): Promise<{ collectionId: number; order: Array<{ id: number; position: number }> }> {
    await authorize(caller, collectionId, "owner");
    const order = await unitOfWork(async ({ media }, events) => {
      await media.lockCollections([collectionId]);
      const current = await media.activeIdsInOrder(collectionId);
      const have = new Set(current);
      const foreign = orderedIds.filter((id) => !have.has(id));
      if (foreign.length) throw new AppError("invalid_request", `ordered_ids must be non-deleted media of collection ${collectionId}; not: ${foreign.join(", ")}.`, { field: "ordered_ids" });
      const listed = new Set(orderedIds);
      const ids = [...orderedIds, ...current.filter((id) => !listed.has(id))];
      await media.setOrder(ids);
      await emitCollectionUpdated(events, { collectionId, kind: "media_reordered" });
      return ids.map((id, i) => ({ id, position: i }));
    });
    return { collectionId, order };
  }

  /** The row with its new thumbnails; noop when nothing had to be made. */
  async function finalizeThumbnail(caller: Caller, id: number, thumbnailUrl: string | undefined): Promise<{ row: MediaRow; noop: boolean }> {
    const { row: cur, access: granted } = await mediaFor(caller, id, "edit");
    const key = thumbnailUrl ?? cur.thumbnail_url;
    // Omitted, with the row's thumbnail already made from a store key (media.create/update do
    // that on their own): nothing to do. Making it again would shrink the 800 px background to the
    // 200 px thumbnail it would be made from.
    if (thumbnailUrl === undefined && key && isStoreKey(key) && cur.background_image_url) return { row: cur, noop: true };
    // The key the row's pair was made from (media.update set it, the upload flow's step before this one).
    if (pairMadeFrom(cur, thumbnailUrl)) return { row: cur, noop: true };
    const remote = Boolean(key && /^https?:\/\//i.test(key));
    if (!key || (!isStoreKey(key) && !remote)) {
      throw new AppError("invalid_request", "thumbnail_url must be an object-store key (PUT it with media.get_upload_url purpose=thumbnail first) or an http(s) image URL.", { field: "thumbnail_url" });
    }
    const collectionId = Number(cur.collection_id);
    const thumbs = remote
      ? await ingest.thumbnailsFromRemote(granted.ownerUserId, collectionId, key)
      : await ingest.thumbnailsFromKey(caller, granted.ownerUserId, collectionId, key);
    // The source goes too: its thumbnails replace it.
    const row = await writing([thumbs.thumbnail_url, thumbs.background_image_url], [], () => files.updateRow(cur, thumbs, (events) =>
      emitCollectionUpdated(events, { collectionId, kind: "media_updated" }), [thumbs.thumbnail_source]));
    return { row, noop: false };
  }

  return {
    getMedia, describeMedia, listMedia, batchListMedia, searchMedia, createMedia, updateMedia, replaceMedia, deleteMedia, setArchived,
    restoreMedia, copyMedia, moveMedia, reorderMedia, finalizeThumbnail,
  };
}
