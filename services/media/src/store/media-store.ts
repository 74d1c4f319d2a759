/**
 * The media schema's rows behind the MediaStore port: media rows (files, links, text notes and
 * sub-collection link rows), pending one-call uploads, the collection lifecycle versions applied,
 * and job leases. createMediaStore works on the pool and on a unit of work's transaction alike;
 * the locking methods only mean something inside a transaction.
 */
import { isStoreKey, pageWithTotal, plannedRows, prepared, windowTotal, type Queryable, type Statement } from "@cms/platform";
import { foldAccents } from "../domain/rules.js";
import { LINK_VIEWER, type MediaRow } from "../domain/media-row.js";

/** Columns of a MediaRow (the generated search_text column is left out: WHERE clauses only). */
export const MEDIA_COLUMNS = [
  "id", "collection_id", "owner_user_id", "created_by", "name", "description", "tags", "main_url", "viewer", "mime_type",
  "size_bytes", "sha256", "thumbnail_url", "background_image_url", "thumbnail_source", "text_note", "display_mode", "placeholder_kind",
  "linked_collection_id", "position", "is_archived", "is_deleted", "deleted_at", "created_at", "updated_at",
];

/** A row to insert: where it goes and what it is; everything else takes its column default. */
export type NewMedia = Pick<MediaRow, "collection_id" | "owner_user_id" | "created_by" | "main_url" | "viewer" | "position">
  & Partial<Omit<MediaRow, "id" | "created_at" | "updated_at">>;

/**
 * Columns an update may change (updated_at is set by every update); deleted_with_collection
 * marks rows hidden with their collection, which its restore brings back.
 */
export type MediaPatch = Partial<Omit<MediaRow, "id" | "created_at" | "updated_at">> & { deleted_with_collection?: boolean };

/** The columns whose values may name stored objects (store keys). */
export const OBJECT_COLUMNS = ["main_url", "thumbnail_url", "background_image_url"] as const;
/** A row's object columns. */
export type ObjectColumns = Pick<MediaRow, (typeof OBJECT_COLUMNS)[number]>;
/** Values of object columns a conditional update expects the row to still hold. */
export type ObjectColumnValues = Partial<ObjectColumns>;

/** A media.list query: one collection's non-deleted rows, optionally filtered. */
export interface ListQuery { collectionId: number; includeArchived: boolean; tag?: string; viewer?: string; nameContains?: string; limit: number; offset: number }

/** The counts that explain an empty media.list page. */
export interface ListCounts { all: number; archived: number; withoutFilters: number }

/**
 * Where media.search looks: the caller's own media, or one collection; active (neither deleted
 * nor archived) or archived rows; optionally outside one collection. Link rows match only withLinks.
 */
export interface SearchScope { ownerUserId?: string; collectionId?: number; exceptCollectionId?: number; archived: boolean; withLinks?: boolean }

/** A one-call upload row waiting for its bytes (media.get_upload_url with a name). */
export interface PendingUpload {
  media_id: number; store_key: string; user_id: string; collection_id: number; owner_user_id: string; content_type: string; expires_at: Date;
}

/** A sub-collection's link row, as the lifecycle and the link moves see it. */
export interface LinkRow { id: number; collection_id: number; is_deleted: boolean; position: number }

/** What happened to collections (collection.lifecycle's action). */
export type LifecycleAction = "soft_deleted" | "restored" | "purged";

/** The media schema's rows, as the use cases read and write them. */
export interface MediaStore {
  byId(id: number, opts?: { forUpdate?: boolean }): Promise<MediaRow | undefined>;
  /** Non-deleted rows among ids (any order). */
  activeByIds(ids: number[]): Promise<MediaRow[]>;
  /** Rows among ids in position order. */
  byIdsInPositionOrder(ids: number[]): Promise<MediaRow[]>;
  /** A media.list page and the total it is a page of (one statement: see pageWithTotal). */
  listPage(q: ListQuery): Promise<{ rows: MediaRow[]; total: number }>;
  listCounts(q: ListQuery): Promise<ListCounts>;
  /** Active, unarchived rows of the collections, in the given collection order, then position. */
  batchPage(collectionIds: number[], limit: number, offset: number): Promise<{ rows: MediaRow[]; total: number }>;
  /** Rows whose name, description or tags match `query` (folded), newest change first. */
  searchPage(scope: SearchScope, query: string, limit: number, offset: number): Promise<{ rows: MediaRow[]; total: number }>;
  searchCount(scope: SearchScope, query: string): Promise<number>;
  /** Non-deleted rows of one collection in position order (collections.export). */
  exportRows(collectionId: number, includeArchived: boolean): Promise<MediaRow[]>;
  /** The first `limit` shown rows of a player page (active, bytes arrived) in position order, and how many there are. */
  playerItems(collectionId: number, limit: number): Promise<{ rows: MediaRow[]; total: number }>;
  /** Non-deleted rows per collection. */
  activeCounts(collectionIds: number[]): Promise<Map<number, number>>;

  /** Serialises position changes of these collections until the end of the transaction. */
  lockCollections(collectionIds: number[]): Promise<void>;
  /** The position after the last non-deleted row of the collection. */
  nextPosition(collectionId: number): Promise<number>;
  /** Rewrites positions 0..n-1 in the current order (after removals or an insert in the middle). */
  renumber(collectionId: number): Promise<void>;
  /** Moves non-deleted rows at or after `from` down by `by` (room for rows placed there), except `exceptIds`. */
  shiftPositions(collectionId: number, from: number, by: number, exceptIds?: number[]): Promise<void>;
  insert(row: NewMedia): Promise<MediaRow>;
  update(id: number, patch: MediaPatch): Promise<MediaRow>;
  /**
   * The update of one row, not yet sent (for a unit of one statement): the row, or none when it
   * is gone or, given `unchanged`, no longer holds those values.
   */
  updating(id: number, patch: MediaPatch, unchanged?: ObjectColumnValues): Statement<MediaRow>;
  /** Marks rows deleted by media.delete (restorable one by one). */
  softDelete(ids: number[]): Promise<void>;
  /** Deletes the rows; what their object columns named as they went, for the objects to orphan. */
  remove(ids: number[]): Promise<ObjectColumns[]>;
  /** Non-deleted ids of the collection in position order. */
  activeIdsInOrder(collectionId: number): Promise<number[]>;
  /** Gives the listed ids positions 0..n-1 in that order. */
  setOrder(ids: number[]): Promise<void>;
  /** Remembers the hash of the stored file while the row still names `storeKey` and has none. */
  rememberSha256(id: number, storeKey: string, sha256: string): Promise<void>;

  /** Every link row that shows the child collection somewhere, deleted ones included. */
  linkRowsOf(childCollectionId: number): Promise<LinkRow[]>;

  /**
   * Records `version` as applied to each collection whose last applied version is older, and
   * returns those collections: the rest already saw this change or a newer one. Concurrent
   * claims of one collection wait for each other.
   */
  claimLifecycle(collectionIds: number[], version: number, action: LifecycleAction): Promise<number[]>;
  /** Hides the non-deleted rows of the collections with them; how many. */
  hideWithCollections(collectionIds: number[]): Promise<number>;
  /** The collections (not in `except`) that show one of these collections by a visible link row. */
  parentsLinkingTo(childIds: number[], except: number[]): Promise<number[]>;
  /** Hides the link rows showing these collections inside other collections (not in `except`); their parents, one per row. */
  hideLinksTo(childIds: number[], except: number[]): Promise<number[]>;
  /** Brings back the rows hidden with the collections; how many. */
  unhideWithCollections(collectionIds: number[]): Promise<number>;
  /** Link rows showing these collections in other collections (not in `except`) hidden with them. */
  hiddenLinksTo(childIds: number[], except: number[]): Promise<LinkRow[]>;
  /** Brings back one hidden link row at `position`. */
  unhideLink(id: number, position: number): Promise<void>;
  /** Every row of the collections and every link row showing them anywhere. */
  rowsOfOrLinkingTo(collectionIds: number[]): Promise<MediaRow[]>;

  insertPending(p: PendingUpload): Promise<void>;
  /**
   * The pending upload of a row; with lock, locked for the transaction ("skip" answers undefined
   * for one another transaction holds, so check `pending` again to tell busy from gone).
   */
  pending(mediaId: number, opts?: { lock?: "wait" | "skip" }): Promise<PendingUpload | undefined>;
  pendingByKey(storeKey: string): Promise<PendingUpload | undefined>;
  /** The oldest pending uploads. */
  pendingBatch(limit: number): Promise<PendingUpload[]>;
  removePending(mediaId: number): Promise<void>;

  /** The keys no media row (file, thumbnail, background) nor a pending one-call upload uses. */
  unreferencedKeys(keys: string[]): Promise<string[]>;
  /**
   * Holds stored objects until the end of the transaction: "share" by a write making a row name an
   * existing object, "exclusive" by the cleanup deciding whether it goes.
   */
  lockStoreKeys(keys: string[], mode: "share" | "exclusive"): Promise<void>;
  /** Whether a media row uses the key (file, thumbnail or background). */
  isReferenced(storeKey: string): Promise<boolean>;

  /**
   * Takes the named job's lease for `ttlMs` unless another holder's lease is still running; one
   * replica at a time runs a job without a transaction held open for the job's length.
   */
  claimLease(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /**
   * Moves the list counts' appended changes into the per-collection counts (at most `batch`
   * a statement, until none is left); how many changes were moved.
   */
  foldListCounts(batch?: number): Promise<number>;
  releaseLease(name: string, holder: string): Promise<void>;
}

/** Store keys referenced by rows (main file, thumbnails), for removal from the object store. */
export function storeKeysOf(rows: ObjectColumns[]): string[] {
  const keys = new Set<string>();
  for (const r of rows) for (const c of OBJECT_COLUMNS) { const u = r[c]; if (u && isStoreKey(u)) keys.add(u); }
  return [...keys];
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/**
 * The conditions of a search scope, with named bindings (:owner :collection :except :pattern
 * :words, those its shape uses). The pattern is a plain bound value (folded in searchBindings like
 * unaccent+lower), so the planner can use the trigram index; an expression around the parameter
 * would force a sequential scan. The constant conditions are literals, as the index's predicate.
 */
function searchWhere(scope: SearchScope): string {
  const conditions = ["NOT is_deleted", scope.archived ? "is_archived" : "NOT is_archived"];
  if (scope.collectionId !== undefined) conditions.push("collection_id = :collection");
  if (scope.ownerUserId !== undefined) conditions.push("owner_user_id = :owner");
  if (scope.exceptCollectionId !== undefined) conditions.push("collection_id <> :except");
  if (!scope.withLinks) conditions.push(`viewer <> '${LINK_VIEWER}'`);
  conditions.push("(search_text LIKE :pattern OR tags && CAST(:words AS text[]))");
  return conditions.join(" AND ");
}

function searchBindings(scope: SearchScope, query: string): Record<string, unknown> {
  const b: Record<string, unknown> = { pattern: `%${escapeLike(foldAccents(query))}%`, words: query.split(/\s+/).filter(Boolean) };
  if (scope.collectionId !== undefined) b.collection = scope.collectionId;
  if (scope.ownerUserId !== undefined) b.owner = scope.ownerUserId;
  if (scope.exceptCollectionId !== undefined) b.except = scope.exceptCollectionId;
  return b;
}

const qualifiedColumns = MEDIA_COLUMNS.map((c) => `m.${c}`).join(", ");
/**
 * A page of a search scope's hits, newest first, with their number (named bindings of
 * searchWhere, :limit, :offset). The total's window and the sort run over the hits' ids and
 * times only; the page's rows alone are read whole (a common word's 3,000 hits in 50,000 items:
 * 6.1-9.8 ms against 8.7-13.2 with the window over whole rows). Made once per scope's shape.
 */
const searchPageStatements = new Map<string, string>();
function searchPageSql(scope: SearchScope): string {
  const where = searchWhere(scope);
  let sql = searchPageStatements.get(where);
  if (!sql) {
    sql = `WITH hits AS (SELECT id, updated_at FROM media WHERE ${where}),
      page AS (SELECT id, updated_at, count(*) OVER () AS total FROM hits ORDER BY updated_at DESC, id DESC LIMIT :limit OFFSET :offset)
      SELECT ${qualifiedColumns}, p.total FROM page p JOIN media m ON m.id = p.id ORDER BY p.updated_at DESC, p.id DESC`;
    searchPageStatements.set(where, sql);
  }
  return sql;
}

/** The statement and bindings of the first page of a search of a user's own media, as searchPage runs it (for EXPLAIN in the bench). */
export function mediaSearchPlanSql(query: string, ownerUserId: string, limit: number): [string, Record<string, unknown>] {
  const scope = { ownerUserId, archived: false };
  return [searchPageSql(scope), { ...searchBindings(scope, query.trim().toLowerCase()), limit, offset: 0 }];
}

/** A collection's kept list total: its count row plus the changes not folded into it yet. */
const keptTotal = (column: string) => `coalesce((SELECT ${column} FROM media_list_counts WHERE collection_id = ?), 0)
  + coalesce((SELECT sum(${column}) FROM media_list_count_changes WHERE collection_id = ?), 0)`;
const KEPT_LISTED = keptTotal("listed");
const KEPT_LISTED_AND_ARCHIVED = keptTotal("listed + archived");

/** The knex adapter of MediaStore, on the pool or on a unit of work's transaction. */
export function createMediaStore(q: Queryable): MediaStore {
  const media = () => q("media");
  const updating = (id: number, patch: MediaPatch, unchanged: ObjectColumnValues = {}) => {
    const row = media().where({ id });
    for (const [column, value] of Object.entries(unchanged)) {
      if (value === null) row.whereNull(column);
      else row.where(column, value);
    }
    return row.update({ ...patch, updated_at: q.fn.now() }).returning(MEDIA_COLUMNS) as unknown as Statement<MediaRow>;
  };
  /** The visible link rows showing these collections inside collections not in `except`. */
  const visibleLinksTo = (childIds: number[], except: number[]) =>
    media().whereIn("linked_collection_id", childIds).whereNotIn("collection_id", except).where({ is_deleted: false });
  // The constant conditions are SQL literals, not bound values: the list page is a prepared
  // statement, and its generic plan can use a partial index (WHERE NOT is_deleted) only when
  // the statement's own text implies the index's predicate. With `is_deleted = $n` that plan
  // was a Seq Scan and a sort (39 ms for a page of a 20,000-item collection, 5 ms by the index).
  const active = (collectionId: number) => media().where({ collection_id: collectionId }).whereRaw("NOT is_deleted");

  function listed(l: ListQuery, filters: boolean) {
    const qb = active(l.collectionId);
    if (!l.includeArchived) qb.whereRaw("NOT is_archived");
    if (!filters) return qb;
    if (l.tag) qb.whereRaw("? = ANY(tags)", [l.tag.toLowerCase()]);
    if (l.viewer) qb.where({ viewer: l.viewer });
    if (l.nameContains) qb.whereRaw("name ILIKE ?", [`%${escapeLike(l.nameContains)}%`]);
    return qb;
  }

  const count = async (qb: ReturnType<typeof media>): Promise<number> => Number((await qb.count<{ n: number }[]>("* as n"))[0]!.n);
  const searchCount = async (scope: SearchScope, query: string): Promise<number> =>
    Number((await q.raw(`SELECT count(*) AS n FROM media WHERE ${searchWhere(scope)}`, searchBindings(scope, query))).rows[0].n);

  return {
    async byId(id, opts = {}) {
      const qb = prepared(media().where({ id }).first(MEDIA_COLUMNS));
      if (opts.forUpdate) qb.forUpdate();
      return qb;
    },
    async activeByIds(ids) {
      return media().whereIn("id", ids).where({ is_deleted: false }).select(MEDIA_COLUMNS);
    },
    async byIdsInPositionOrder(ids) {
      return media().whereIn("id", ids).orderBy("position").select(MEDIA_COLUMNS);
    },
    async listPage(l) {
      // The page comes straight from the (collection_id, position, id) index; without a filter
      // its total is the collection's kept total (keptTotal), not a count of its rows.
      const filtered = Boolean(l.tag || l.viewer || l.nameContains);
      const kept = filtered ? undefined : q.select(q.raw(l.includeArchived ? KEPT_LISTED_AND_ARCHIVED : KEPT_LISTED, [l.collectionId, l.collectionId]));
      return pageWithTotal<MediaRow>(listed(l, true), (page) => page.select(MEDIA_COLUMNS).orderBy([{ column: "position" }, { column: "id" }]).limit(l.limit).offset(l.offset), kept);
    },
    async listCounts(l) {
      const [{ all, archived }] = await active(l.collectionId).select(q.raw("count(*) AS all"), q.raw("count(*) FILTER (WHERE is_archived) AS archived"));
      return { all: Number(all), archived: Number(archived), withoutFilters: await count(listed(l, false)) };
    },
    async batchPage(collectionIds, limit, offset) {
      const qb = media().whereIn("collection_id", collectionIds).where({ is_deleted: false, is_archived: false });
      const total = await count(qb.clone());
      const rows: MediaRow[] = await qb.select(MEDIA_COLUMNS).orderByRaw("array_position(?::bigint[], collection_id), position, id", [collectionIds]).limit(limit).offset(offset);
      return { rows, total };
    },
    async searchPage(scope, query, limit, offset) {
      // Planned for its values on every call: a generic plan would not know the pattern's rarity.
      const rows = await plannedRows<MediaRow & { total?: unknown }>(q, searchPageSql(scope), { ...searchBindings(scope, query), limit, offset });
      const total = await windowTotal(rows, offset, () => searchCount(scope, query));
      for (const r of rows) delete r.total;
      return { rows, total };
    },
    searchCount,
    async exportRows(collectionId, includeArchived) {
      const qb = active(collectionId).orderBy([{ column: "position" }, { column: "id" }]);
      if (!includeArchived) qb.where({ is_archived: false });
      return qb.select(MEDIA_COLUMNS);
    },
    async playerItems(collectionId, limit) {
      const shown = active(collectionId).where({ is_archived: false })
        .whereNotExists((w) => w.select(1).from("pending_uploads").whereRaw("pending_uploads.media_id = media.id"));
      const [rows, [{ total }]] = await Promise.all([
        shown.clone().orderBy([{ column: "position" }, { column: "id" }]).limit(limit).select(MEDIA_COLUMNS),
        shown.clone().count<{ total: number }[]>("* as total"),
      ]);
      return { rows, total: Number(total) };
    },
    async activeCounts(collectionIds) {
      if (!collectionIds.length) return new Map();
      const rows = await media().whereIn("collection_id", collectionIds).where({ is_deleted: false })
        .groupBy("collection_id").select("collection_id").count<{ collection_id: number; count: number }[]>("* as count");
      return new Map(rows.map((r) => [Number(r.collection_id), Number(r.count)]));
    },

    async lockCollections(collectionIds) {
      // In id order, so that two transactions locking overlapping sets cannot deadlock.
      for (const id of [...new Set(collectionIds)].sort((a, b) => a - b)) {
        await q.raw("SELECT pg_advisory_xact_lock(?, ?)", [0x6d656469, id % 2147483647]);
      }
    },
    async nextPosition(collectionId) {
      const row = await active(collectionId).max<{ max: number | null }>("position as max").first();
      return row?.max === null || row?.max === undefined ? 0 : Number(row.max) + 1;
    },
    async renumber(collectionId) {
      await q.raw(
        `UPDATE media m SET position = r.pos FROM (
           SELECT id, row_number() OVER (ORDER BY position, id) - 1 AS pos FROM media WHERE collection_id = ? AND NOT is_deleted
         ) r WHERE m.id = r.id AND m.position <> r.pos`,
        [collectionId],
      );
    },
    async shiftPositions(collectionId, from, by, exceptIds = []) {
      const qb = active(collectionId).where("position", ">=", from);
      if (exceptIds.length) qb.whereNotIn("id", exceptIds);
      await qb.increment("position", by);
    },
    async insert(row) {
      const [r] = await media().insert(row).returning(MEDIA_COLUMNS);
      return r as MediaRow;
    },
    async update(id, patch) {
      const [r] = await updating(id, patch);
      return r as MediaRow;
    },
    updating,
    async softDelete(ids) {
      await media().whereIn("id", ids).update({ is_deleted: true, deleted_at: q.fn.now(), updated_at: q.fn.now() });
    },
    async remove(ids) {
      if (!ids.length) return [];
      return media().whereIn("id", ids).delete().returning([...OBJECT_COLUMNS]);
    },
    async activeIdsInOrder(collectionId) {
      const rows: Array<{ id: number }> = await active(collectionId).orderBy([{ column: "position" }, { column: "id" }]).select("id");
      return rows.map((r) => Number(r.id));
    },
    async setOrder(ids) {
      if (!ids.length) return;
      await q.raw(`UPDATE media m SET position = o.pos - 1, updated_at = now() FROM unnest(?::bigint[]) WITH ORDINALITY AS o(id, pos) WHERE m.id = o.id AND m.position <> o.pos - 1`, [ids]);
    },
    async rememberSha256(id, storeKey, sha256) {
      await media().where({ id, main_url: storeKey }).whereNull("sha256").update({ sha256 });
    },

    async linkRowsOf(childCollectionId) {
      return media().where({ linked_collection_id: childCollectionId }).orderBy("id").select("id", "collection_id", "is_deleted", "position");
    },

    async claimLifecycle(collectionIds, version, action) {
      if (!collectionIds.length) return [];
      const { rows } = await q.raw(
        `INSERT INTO collection_lifecycle_versions AS v (collection_id, version, action)
           SELECT id, ?, ? FROM unnest(?::bigint[]) AS id ORDER BY id
         ON CONFLICT (collection_id) DO UPDATE SET version = EXCLUDED.version, action = EXCLUDED.action, applied_at = now()
           WHERE v.version < EXCLUDED.version
         RETURNING collection_id`,
        [version, action, [...new Set(collectionIds)]],
      );
      return rows.map((r: { collection_id: number }) => Number(r.collection_id));
    },
    async hideWithCollections(collectionIds) {
      if (!collectionIds.length) return 0;
      return media().whereIn("collection_id", collectionIds).where({ is_deleted: false })
        .update({ is_deleted: true, deleted_at: q.fn.now(), deleted_with_collection: true, updated_at: q.fn.now() });
    },
    async parentsLinkingTo(childIds, except) {
      if (!childIds.length) return [];
      const rows: Array<{ collection_id: number }> = await visibleLinksTo(childIds, except).distinct("collection_id");
      return rows.map((r) => Number(r.collection_id));
    },
    async hideLinksTo(childIds, except) {
      if (!childIds.length) return [];
      const rows: Array<{ collection_id: number }> = await visibleLinksTo(childIds, except)
        .update({ is_deleted: true, deleted_at: q.fn.now(), deleted_with_collection: true, updated_at: q.fn.now() })
        .returning(["collection_id"]);
      return rows.map((r) => Number(r.collection_id));
    },
    async unhideWithCollections(collectionIds) {
      if (!collectionIds.length) return 0;
      return media().whereIn("collection_id", collectionIds).where({ is_deleted: true, deleted_with_collection: true })
        .update({ is_deleted: false, deleted_at: null, deleted_with_collection: false, updated_at: q.fn.now() });
    },
    async hiddenLinksTo(childIds, except) {
      if (!childIds.length) return [];
      return media().whereIn("linked_collection_id", childIds).whereNotIn("collection_id", except)
        .where({ is_deleted: true, deleted_with_collection: true }).orderBy(["collection_id", "id"]).select("id", "collection_id", "is_deleted", "position");
    },
    async unhideLink(id, position) {
      await media().where({ id }).update({ is_deleted: false, deleted_at: null, deleted_with_collection: false, position, updated_at: q.fn.now() });
    },
    async rowsOfOrLinkingTo(collectionIds) {
      if (!collectionIds.length) return [];
      return media().where((w) => w.whereIn("collection_id", collectionIds).orWhereIn("linked_collection_id", collectionIds)).select(MEDIA_COLUMNS);
    },

    async insertPending(p) {
      await q("pending_uploads").insert(p);
    },
    async pending(mediaId, opts = {}) {
      const qb = q("pending_uploads").where({ media_id: mediaId }).first();
      if (opts.lock) qb.forUpdate();
      if (opts.lock === "skip") qb.skipLocked();
      return qb;
    },
    async pendingByKey(storeKey) {
      return q("pending_uploads").where({ store_key: storeKey }).first();
    },
    async pendingBatch(limit) {
      return q("pending_uploads").orderBy("created_at").limit(limit).select("*");
    },
    async removePending(mediaId) {
      await q("pending_uploads").where({ media_id: mediaId }).delete();
    },

    async unreferencedKeys(keys) {
      if (!keys.length) return [];
      // Prepared: every removal of replaced or deleted objects asks it (one text, one array).
      const { rows } = await prepared(q.raw(
        `SELECT k FROM unnest(?::text[]) AS k WHERE NOT EXISTS (SELECT 1 FROM media WHERE main_url = k)
           AND NOT EXISTS (SELECT 1 FROM media WHERE thumbnail_url = k)
           AND NOT EXISTS (SELECT 1 FROM media WHERE background_image_url = k)
           AND NOT EXISTS (SELECT 1 FROM pending_uploads WHERE store_key = k)`,
        [keys],
      ));
      return rows.map((r: { k: string }) => r.k);
    },
    async lockStoreKeys(keys, mode) {
      if (!keys.length) return;
      // One bigint key per object (a space apart from the collections' two-int locks), taken in
      // key order (the lock calls run after the sort) so that two cleanups locking overlapping
      // sets cannot deadlock.
      const lock = mode === "share" ? "pg_advisory_xact_lock_shared" : "pg_advisory_xact_lock";
      await q.raw(`SELECT ${lock}(hashtextextended(k, 0)) FROM unnest(?::text[]) AS k ORDER BY k`, [[...new Set(keys)]]);
    },
    async isReferenced(storeKey) {
      const { rows } = await q.raw("SELECT 1 FROM media WHERE main_url = ? OR thumbnail_url = ? OR background_image_url = ? LIMIT 1", [storeKey, storeKey, storeKey]);
      return rows.length > 0;
    },

    async foldListCounts(batch = 50_000) {
      let moved = 0;
      for (;;) {
        const { rows } = await q.raw(
          `WITH moved AS (
             DELETE FROM media_list_count_changes WHERE id IN (SELECT id FROM media_list_count_changes ORDER BY id LIMIT ?)
             RETURNING collection_id, listed, archived),
           folded AS (
             INSERT INTO media_list_counts AS c (collection_id, listed, archived)
             SELECT collection_id, sum(listed), sum(archived) FROM moved GROUP BY collection_id
             ON CONFLICT (collection_id) DO UPDATE SET listed = c.listed + excluded.listed, archived = c.archived + excluded.archived)
           SELECT count(*)::int AS n FROM moved`,
          [batch],
        );
        moved += rows[0].n;
        if (rows[0].n < batch) return moved;
      }
    },
    async claimLease(name, holder, ttlMs) {
      const { rows } = await q.raw(
        `INSERT INTO job_leases AS l (name, holder, expires_at) VALUES (?, ?, now() + ? * interval '1 millisecond')
         ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at WHERE l.expires_at < now()
         RETURNING holder`,
        [name, holder, ttlMs],
      );
      return rows.length > 0;
    },
    async releaseLease(name, holder) {
      await q("job_leases").where({ name, holder }).delete();
    },
  };
}
