/** Creating, reading, updating and exporting collections. */
import {
  AppError, emitCollectionUpdated, emitObjectsOrphaned, isStoreKey, isUniqueViolation, normalizeTags, requireScope, type Caller,
} from "@cms/platform";
import { parseFields, permissionsOf, shareUrl, visibleOnPage, SELECTABLE_FIELDS, type CollectionRow, type ViewerPermissions } from "../domain/collection-json.js";
import { decideUpdateVisibility, normalizePlaybackPrefs, normalizeSlug, toCsv, type AccessLevel } from "../domain/rules.js";
import { EXPORT_COLUMNS, exportCells } from "../domain/export.js";
import { graceEnd, type CreateLinkStep } from "../domain/pending-steps.js";
import type { CollectionPatch } from "./ports.js";
import { changeOf, duplicateName, notFound, ownedCollection, readableCollection, type AppContext } from "./context.js";
import type { CoverUseCases } from "./covers.js";
import type { StepRunner } from "./pending-steps.js";

/** collections.create as the use case takes it (request defaults applied). */
export interface CreateInput {
  name: string;
  description?: string;
  thumbnailUrl?: string;
  isNsfw: boolean;
  shareAccessLevel?: AccessLevel;
  tags: string[];
  searchable: boolean;
  aliasId?: string;
  playbackPrefs?: unknown;
  parentId?: number;
  linkPosition?: number;
  linkDescription?: string;
}

/** collections.update: undefined fields stay unchanged. */
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

/** collections.list as the use case takes it (request defaults applied). */
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

/** A published sub-collection a player page links to. */
export interface PlayerPageChild { row: CollectionRow; shareUrl: string }

/** What a share URL's player page shows one viewer. */
export interface PlayerPage { row: CollectionRow; viewerIsOwner: boolean; children: PlayerPageChild[] }

/** A page's place in a list and the list's total. */
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

/** collections.export: the collection and its media, or the media as CSV. */
export type ExportOutcome =
  | { format: "csv"; content: string; columns: string[] }
  | { format: "json"; row: CollectionRow; media: Awaited<ReturnType<AppContext["media"]["exportCollectionMedia"]>>["media"] };

const playbackPrefsOf = (v: unknown) => (v === undefined || v === null ? null : normalizePlaybackPrefs(v));

/**
 * The object-store key a cover is made from (an uploaded image), null for an http(s) one. The
 * write that stores the cover orphans it: the media service's cleanup removes it unless a media
 * item's file is that object.
 */
function coverSourceOf(thumbnailUrl: string | undefined): string | null {
  return thumbnailUrl && isStoreKey(thumbnailUrl) ? thumbnailUrl : null;
}

/** Create, read, update, archive, share URL, stats and export. */
export function crudUseCases(app: AppContext, covers: CoverUseCases, steps: StepRunner) {
  const { stores } = app;

  /** A public collection read by someone other than its owner counts as a view. */
  async function countView(row: CollectionRow, readerId: string | undefined): Promise<void> {
    if (row.is_published && row.share_access_level === "public" && readerId !== row.user_id) await stores.collections.addView(row.id);
  }

  /** The published collection at handle/slug if `viewerId` (undefined: anonymous) may see it; not_found otherwise. */
  async function publishedForViewer(viewerId: string | undefined, handle: string, slug: string): Promise<{ row: CollectionRow; perms: ViewerPermissions }> {
    const bare = handle.replace(/^@/, "");
    const who = await app.social.resolveHandle({ handle: bare.toLowerCase() });
    const missing = () => new AppError("not_found", `No published collection at ${handle}/${slug}.`);
    if (!who.found) throw missing();
    // The slug as publish stored it ("My Trip" was published as my-trip).
    let stored: string;
    try { stored = normalizeSlug(slug); } catch { throw missing(); }
    const row = await stores.collections.publishedBySlug(who.userId, stored, bare);
    if (!row) throw missing();
    const m = viewerId && viewerId !== row.user_id ? await stores.collaborators.membership(row.id, viewerId) : undefined;
    const perms = permissionsOf(row, viewerId, m);
    if (!visibleOnPage(row, perms, viewerId !== undefined)) throw missing();
    return { row, perms };
  }

  return {
    /**
     * The created collection; linkMediaId is its link row in the parent (sub-collections only).
     * The link row lives in the media service: it is inserted after the commit, as a recorded
     * step that is undone (the collection removed again) when media does not follow.
     */
    async createCollection(caller: Caller, input: CreateInput): Promise<{ row: CollectionRow; linkMediaId?: number }> {
      const { parentId } = input;
      if (parentId !== undefined) requireScope(caller, "media:write", "to create a sub-collection (its link row is a media item of the parent)");
      if (input.searchable) {
        throw new AppError("invalid_request", "searchable cannot be true on create: a new collection is unpublished. Publish it with searchable=true instead.", { field: "searchable" });
      }
      const tags = normalizeTags(input.tags, "collection");
      const playbackPrefs = playbackPrefsOf(input.playbackPrefs);
      let publishHandle: string | null = null;
      if (input.aliasId) {
        const res = await app.social.resolvePublishHandle({ userId: caller.userId, mode: "alias", aliasId: input.aliasId });
        publishHandle = res.handle;
      }
      if (parentId !== undefined) {
        const parent = await ownedCollection(stores, parentId, caller);
        if (parent.is_archived) throw new AppError("invalid_request", `Parent collection ${parentId} is archived.`, { field: "parent_collection_id" });
      }
      const prepared = input.thumbnailUrl ? await covers.prepareCover(caller, input.thumbnailUrl) : undefined;
      const source = coverSourceOf(input.thumbnailUrl);
      // The cover's keys carry the collection's id, and the cover is stored before the row.
      const id = prepared ? await stores.collections.reserveId() : undefined;
      const cover = prepared ? await covers.storeCover(caller.userId, id!, prepared) : undefined;

      let created;
      try {
        created = await covers.withStoredCover(cover, () => app.unitOfWork(async (s, events) => {
          const row = await s.collections.insert({
            id,
            user_id: caller.userId,
            name: input.name,
            description: input.description ?? null,
            tags,
            is_nsfw: input.isNsfw,
            share_access_level: input.shareAccessLevel ?? "private",
            share_access_configured: input.shareAccessLevel !== undefined,
            publish_alias_id: input.aliasId ?? null,
            publish_handle: publishHandle,
            playback_prefs: playbackPrefs as Record<string, unknown> | null,
            parent_id: parentId ?? null,
            position: await s.collections.nextPosition(caller.userId, parentId ?? null),
            thumbnail_url: cover?.main ?? null,
            cover_thumbnail_url: cover?.thumbnail ?? null,
            cover_source: source,
          });
          await emitObjectsOrphaned(events, [source]);
          await emitCollectionUpdated(events, changeOf(row, "created"));
          if (parentId === undefined) return { row };
          const work: CreateLinkStep = {
            kind: "create_link", collectionId: row.id, parentId, ownerUserId: caller.userId, position: input.linkPosition, description: input.linkDescription,
          };
          return { row, step: { id: await s.steps.add(work, graceEnd(app.now())), work } };
        }));
      } catch (err) {
        if (isUniqueViolation(err)) throw duplicateName(input.name, parentId ?? null);
        throw err;
      }
      if (!created.step) return { row: created.row };
      const link = await steps.carryOut(created.step, `Collection "${input.name}" was not created`);
      return { row: created.row, linkMediaId: link.linkMediaId };
    },

    async updateCollection(caller: Caller, id: number, input: UpdateInput): Promise<CollectionRow> {
      // Ownership before any work on the caller's behalf (a cover fetch, an alias lookup); the
      // unit of work checks again under the row lock.
      const before = await ownedCollection(stores, id, caller);
      // The key the cover was made from is consumed: naming it again (a retry) keeps the cover.
      const source = coverSourceOf(input.thumbnailUrl);
      const newCover = Boolean(input.thumbnailUrl) && !(source && source === await stores.collections.coverSource(id));
      const prepared = newCover ? await covers.prepareCover(caller, input.thumbnailUrl!) : undefined;
      let aliasHandle: { aliasId: string | null; handle: string } | undefined;
      if (input.aliasId !== undefined) {
        const res = await app.social.resolvePublishHandle(input.aliasId === null
          ? { userId: caller.userId, mode: "username" }
          : { userId: caller.userId, mode: "alias", aliasId: input.aliasId });
        aliasHandle = { aliasId: res.aliasId || null, handle: res.handle };
      }
      const tags = input.tags === undefined ? undefined : normalizeTags(input.tags, "collection");
      const playbackPrefs = input.playbackPrefs === undefined ? undefined : playbackPrefsOf(input.playbackPrefs);
      const cover = prepared ? await covers.storeCover(caller.userId, id, prepared) : undefined;
      try {
        return await covers.withStoredCover(cover, () => app.unitOfWork(async (s, events) => {
          const cur = await ownedCollection(s, id, caller, { lock: true });
          const patch: CollectionPatch = {};
          const kinds: string[] = [];
          if (input.name !== undefined && input.name !== cur.name) { patch.name = input.name; kinds.push("renamed"); }
          if (input.description !== undefined) patch.description = input.description;
          if (tags !== undefined) patch.tags = tags;
          if (input.isNsfw !== undefined) patch.is_nsfw = input.isNsfw;
          if (input.position !== undefined) patch.position = input.position;
          if (input.openFullscreen !== undefined) patch.open_fullscreen = input.openFullscreen;
          if (playbackPrefs !== undefined) patch.playback_prefs = playbackPrefs as Record<string, unknown> | null;
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
            await emitObjectsOrphaned(events, [cur.thumbnail_url, cur.cover_thumbnail_url, source]);
            patch.thumbnail_url = cover.main;
            patch.cover_thumbnail_url = cover.thumbnail;
            patch.cover_source = source;
            kinds.push("cover_changed");
          }
          if (!Object.keys(patch).length) return cur;
          patch.updated_at = app.now();
          const next = await s.collections.update(id, patch);
          await emitCollectionUpdated(events, changeOf(next, kinds[0] ?? "updated"));
          return next;
        }));
      } catch (err) {
        if (isUniqueViolation(err)) throw duplicateName(input.name ?? "", before.parent_id === null ? null : Number(before.parent_id));
        throw err;
      }
    },

    /** The collection and what the caller may do on it. */
    async getCollection(caller: Caller, id: number): Promise<{ row: CollectionRow; perms: ViewerPermissions }> {
      const { row, perms } = await readableCollection(stores, id, caller);
      await countView(row, caller.userId);
      return { row, perms };
    },

    async getBySlug(caller: Caller | undefined, handle: string, slug: string): Promise<CollectionRow> {
      const { row } = await publishedForViewer(caller?.userId, handle, slug);
      await countView(row, caller?.userId);
      return row;
    },

    /**
     * A share URL's player page for one viewer (undefined: anonymous): the collection, whether
     * the viewer owns it, and the published sub-collections the viewer may open from it.
     */
    async playerPage(viewerId: string | undefined, handle: string, slug: string): Promise<PlayerPage> {
      const { row, perms } = await publishedForViewer(viewerId, handle, slug);
      await countView(row, viewerId);
      const children: PlayerPageChild[] = [];
      for (const child of await stores.collections.publishedChildren(row.id)) {
        const m = viewerId && viewerId !== child.user_id ? await stores.collaborators.membership(child.id, viewerId) : undefined;
        const url = shareUrl(app.config.appUrl, child);
        if (url && visibleOnPage(child, permissionsOf(child, viewerId, m), viewerId !== undefined)) {
          children.push({ row: child, shareUrl: url });
        }
      }
      return { row, viewerIsOwner: perms.is_owner, children };
    },

    /** The found rows in the order of `ids`, and the ids not found. */
    async batchGet(caller: Caller, ids: number[], includeArchived: boolean): Promise<{ rows: CollectionRow[]; missingIds: number[] }> {
      const rows = await stores.collections.ownedAmong(caller.userId, ids, includeArchived);
      const byId = new Map(rows.map((r) => [Number(r.id), r]));
      return {
        rows: ids.filter((id) => byId.has(id)).map((id) => byId.get(id)!),
        missingIds: ids.filter((id) => !byId.has(id)),
      };
    },

    async listCollections(caller: Caller, input: ListInput): Promise<CollectionList> {
      if (input.parentId !== undefined && input.includeSubcollections) {
        throw new AppError("invalid_request", "parent_collection_id and include_subcollections=true cannot be combined.", { field: "include_subcollections" });
      }
      const fields = parseFields(input.fields);
      if (fields) {
        const bad = fields.find((f) => !(SELECTABLE_FIELDS as readonly string[]).includes(f));
        if (bad) throw new AppError("invalid_request", `Unknown field "${bad}" in fields; selectable: ${SELECTABLE_FIELDS.join(", ")}.`, { field: "fields" });
      }
      if (input.parentId !== undefined) await readableCollection(stores, input.parentId, caller);
      const { rows, total } = await stores.collections.list({ ...input, userId: caller.userId });
      const withPerms = fields?.includes("viewer_permissions") ?? false;
      const items = rows.map((row) => (withPerms
        ? { row, perms: permissionsOf(row, caller.userId, row.user_id === caller.userId ? undefined : { can_upload: false, can_edit: false, can_delete: false }) }
        : { row }));
      return { items, fields, page: { limit: input.limit, offset: input.offset, total } };
    },

    async setArchived(caller: Caller, id: number, archived: boolean): Promise<CollectionRow> {
      return app.unitOfWork(async (s, events) => {
        const cur = await ownedCollection(s, id, caller, { lock: true });
        if (cur.is_archived === archived) return cur;
        const next = await s.collections.update(id, { is_archived: archived, updated_at: app.now() });
        await emitCollectionUpdated(events, changeOf(next, archived ? "archived" : "unarchived"));
        return next;
      });
    },

    /** The share URL of a published collection, with the handle and slug it is made of. */
    async shareUrlOf(caller: Caller, id: number): Promise<{ url: string; handle: string; slug: string; shareAccessLevel: string }> {
      const { row } = await readableCollection(stores, id, caller);
      const url = shareUrl(app.config.appUrl, row);
      if (!url) throw new AppError("invalid_request", `Collection ${id} is not published; publish it first.`, { field: "collection_id" });
      // A share URL exists only with a handle and a slug.
      return { url, handle: row.publish_handle!, slug: row.share_slug!, shareAccessLevel: row.share_access_level };
    },

    async statsOf(caller: Caller, id: number): Promise<{ collectionId: number; likes: number; views: number }> {
      const row = await stores.collections.byId(id);
      if (!row || row.is_deleted) throw notFound(id);
      const isPublic = row.is_published && row.share_access_level === "public";
      if (!isPublic) await readableCollection(stores, id, caller);
      return { collectionId: id, likes: Number(row.likes), views: Number(row.views) };
    },

    async exportCollection(caller: Caller, id: number, format: "json" | "csv", includeArchived: boolean): Promise<ExportOutcome> {
      const { row } = await readableCollection(stores, id, caller);
      const { media } = await app.media.exportCollectionMedia({ collectionId: BigInt(id), includeArchived });
      if (format === "csv") return { format, content: toCsv(EXPORT_COLUMNS, media.map(exportCells)), columns: EXPORT_COLUMNS };
      return { format, row, media };
    },
  };
}
