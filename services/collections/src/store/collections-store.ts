/**
 * The knex adapter of the collections schema's stores (../app/ports.ts). It works on whatever it
 * is given: the pool, or the transaction of a unit of work.
 */
import { TtlCache, isUuid, pageWithTotal, prepared, preparedRows, uploadKeysIn, windowTotal, type Queryable } from "@cms/platform";
import type { CollectionRow } from "../domain/collection-json.js";
import type {
  CollectionPatch, CollectionsStore, CollectionsStores, CoverRow, ListFilter, NewCollection, RowPage, Scope, Searcher, SortBy,
} from "../app/ports.js";
import { createCollaboratorsStore } from "./collaborators-store.js";
import { createPendingStepsStore } from "./pending-steps-store.js";

/**
 * Columns read into a CollectionRow: everything but the generated search columns, which are
 * only used in WHERE clauses and are costly to transfer and parse (tsvector text).
 */
export const COLLECTION_COLUMNS: string[] = [
  "id", "user_id", "name", "description", "tags", "thumbnail_url", "cover_thumbnail_url", "is_nsfw",
  "share_access_level", "share_access_configured", "searchable", "is_published", "published_at", "share_slug",
  "share_id", "publish_alias_id", "publish_handle", "open_fullscreen", "playback_prefs", "position", "is_archived",
  "is_deleted", "deleted_at", "deleted_with", "parent_id", "views", "likes", "created_at", "updated_at",
];

/** The same columns qualified by a table alias, for raw SQL. */
function columnsOf(alias: string): string {
  return COLLECTION_COLUMNS.map((c) => `${alias}.${c}`).join(", ");
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (ch) => `\\${ch}`);
}

// Search: each scope is its own indexed subquery; the union is ranked with own hits first. Own
// and shared collections match generously (substring, accent-insensitive, trigram word
// similarity, full text); public, following and liked scopes strictly (every query word, or a
// substring of the name) and show only published + public (+ searchable for strangers) ones.
// Word similarity 0.5 tolerates a transposition or a missing letter in a word ("montrael"): it is
// `search_text %> q` under the pool's pg_trgm.word_similarity_threshold (SEARCH_SESSION_SETTINGS),
// so that each arm of the match is a scan of the owner's entries in collections_owner_search
// (user_id, trigrams, lexemes) and only the rows it finds are ranked.
//
// The query is folded (lower + immutable_unaccent, as search_text is built) and LIKE-escaped in
// the statement itself: both are immutable, so the planner folds them into constants from the
// bound :raw and the index conditions see plain values, without a round trip to fold it first.
// A statement prepared for a large owner (ownerStatement below) has a plan made without the
// query: there each term the query gives is a scalar subquery, computed once per execution
// instead of once per row read.
/**
 * The terms a search's match and score are made of, from the folded query. `once`: each term a
 * scalar subquery (an InitPlan), for a plan made without the query's value.
 */
function queryTerms(once: boolean) {
  const fold = "lower(immutable_unaccent(CAST(:raw AS text)))";
  const term = (sql: string) => (once ? `(SELECT ${sql})` : sql);
  const pattern = term(`('%' || replace(replace(replace(${fold}, '\\', '\\\\'), '%', '\\%'), '_', '\\_') || '%')`);
  const tsquery = term(`plainto_tsquery('simple', ${fold})`);
  const norm = term(fold);
  /**
   * The query found as whole words: an occurrence with no letter or digit on either side (the
   * folded query, everything but letters, digits and spaces escaped, as a regular expression).
   * For a query with a word in it, such a text's word_similarity is its maximum, 1: the query's
   * words, each padded as pg_trgm pads words, are one contiguous extent of the text's trigrams (a
   * query of punctuation alone has no trigram, and a similarity of 0). word_similarity is most of a
   * search's execution (~16 µs a hit: 3.2 of 4.4 ms over 200 hits of 69 characters), the
   * expression 1-2 µs, so it is measured only where the query is not found as whole words; the
   * score is the same (services/collections/test/search-store.test.ts compares it with
   * word_similarity's, hit by hit).
   */
  const wholeWords = term(`('(^|[^[:alnum:]])' || regexp_replace(${fold}, '([^[:alnum:][:space:]])', '\\\\\\1', 'g') || '([^[:alnum:]]|$)')`);
  const hasWord = term(`${fold} ~ '[[:alnum:]]'`);
  const wordSimilarity = `(CASE WHEN ${hasWord} AND c.search_text ~ ${wholeWords} THEN 1 ELSE word_similarity(${norm}, c.search_text) END)`;
  return {
    generous: `(c.search_text LIKE ${pattern} OR c.search_text %> ${norm} OR c.search_tsv @@ ${tsquery})`,
    strict: `(c.search_tsv @@ ${tsquery} OR lower(immutable_unaccent(c.name)) LIKE ${pattern})`,
    score: `(CASE WHEN c.search_text LIKE ${pattern} THEN 1 ELSE 0 END + ${wordSimilarity} + ts_rank(c.search_tsv, ${tsquery}))`,
  };
}
const { generous: GENEROUS, strict: STRICT, score: SCORE } = queryTerms(false);
const ONCE = queryTerms(true);
const VISIBLE_PUBLIC = `c.is_published AND c.share_access_level = 'public' AND NOT c.is_archived`;

/** The word similarity that counts as a generous match (see above). */
const WORD_SIMILARITY_THRESHOLD = 0.5;

/** Session settings of the collections pool that search relies on. */
export const SEARCH_SESSION_SETTINGS = { "pg_trgm.word_similarity_threshold": String(WORD_SIMILARITY_THRESHOLD) } as const;

/** A scope's hits; `me` is the searcher as SQL: the binding, or a literal in an owner's own statement. */
function scopeSql(scope: Scope, match: string, score = SCORE, me = ":me"): string {
  const base = `SELECT c.id, ${score} AS score, coalesce(c.user_id = ${me}, false) AS own FROM collections c WHERE NOT c.is_deleted AND c.parent_id IS NULL`;
  switch (scope) {
    case "own":
      return `${base} AND c.user_id = ${me} AND NOT c.is_archived AND ${match}`;
    case "shared":
      return `${base} AND c.id IN (SELECT collection_id FROM collaborators WHERE user_id = ${me} AND status = 'accepted') AND NOT c.is_archived AND ${match}`;
    case "public":
      return `${base} AND ${VISIBLE_PUBLIC} AND c.searchable AND c.user_id IS DISTINCT FROM ${me} AND ${match}`;
    case "following":
      return `${base} AND ${VISIBLE_PUBLIC} AND (c.user_id, coalesce(CAST(c.publish_alias_id AS text), '')) IN (SELECT * FROM unnest(CAST(:followUsers AS uuid[]), CAST(:followAliases AS text[]))) AND ${match}`;
    case "liked":
      return `${base} AND ${VISIBLE_PUBLIC} AND c.id IN (SELECT collection_id FROM likes WHERE user_id = ${me}) AND ${match}`;
  }
}

const isGenerous = (s: Scope) => s === "own" || s === "shared";

/**
 * Owners with at most this many collections are searched by a prepared statement. Its generic
 * plan is made for the average owner and may read the owner's rows through a btree and test
 * each (a query's fold and word similarity per row, ~15 µs); over a bounded number of rows that
 * costs no more than planning the statement, which is three times the execution of a search over
 * 100 rows. Over a large owner's rows the same plan was 190 ms against 5 (bench/notes/search.md),
 * so larger owners get a statement of their own (ownerStatement) or a plan made for their query.
 */
export const PREPARED_SEARCH_MAX_OWNER_ROWS = 200;

/** How long an owner found larger than the bound is searched without the gate. */
const LARGE_OWNER_MEMORY_MS = 60_000;
/**
 * How long an owner found within the bound is searched by the prepared statement without the
 * gate. An owner who grows past the bound meanwhile (a tree of thousands copied in one call)
 * keeps the generic plan at most this long; the gate's count and join, on the other hand, cost
 * 0.05-0.13 ms of a small owner's 0.3-0.4 ms search (bench/notes/search.md).
 */
const SMALL_OWNER_MEMORY_MS = 10_000;

/**
 * What the gate last found of an owner's size, per process: a large owner's searches skip the
 * prepared statement, which for them would cost its planning and the count for nothing; a small
 * owner's skip the count. An owner who shrank below the bound meanwhile only keeps the plan made
 * for the query a little longer. Exported for the store's tests, which clear it.
 */
export const ownerSizes = new TtlCache<"small" | "large">(LARGE_OWNER_MEMORY_MS);

/**
 * The hits of the scopes (a CTE) and one page of them, with named bindings :raw :me
 * :followUsers :followAliases :limit :offset. Only the hits are scored; the page is chosen from
 * (id, score, own) and only its rows are joined back for their columns.
 *
 * `ownerGate`: the page of the prepared statement of small owners. The owner's rows are counted
 * first (up to one more than PREPARED_SEARCH_MAX_OWNER_ROWS) and a larger owner's hits are not
 * searched (a one-time filter); the page then has one row more, first, carrying `owner_rows`,
 * with null columns when the page is empty.
 *
 * `owner`: the searcher as a literal (a uuid, or it throws) instead of :me, and the
 * query's terms computed once (queryTerms), for a large owner's own prepared statement.
 */
function buildSearchSql(scopes: Scope[], ownerGate: boolean, owner?: string): { hits: string; page: string } {
  if (owner !== undefined && !isUuid(owner)) throw new Error(`not a uuid: ${owner}`);
  const union = owner === undefined
    ? scopes.map((s) => scopeSql(s, isGenerous(s) ? GENEROUS : STRICT)).join(" UNION ALL ")
    : scopes.map((s) => scopeSql(s, isGenerous(s) ? ONCE.generous : ONCE.strict, ONCE.score, `CAST('${owner}' AS uuid)`)).join(" UNION ALL ");
  const ownerRows = `owner AS (SELECT count(*) AS n FROM (SELECT 1 FROM collections WHERE user_id = :me LIMIT ${PREPARED_SEARCH_MAX_OWNER_ROWS + 1}) o)`;
  const gate = ownerGate ? ` WHERE (SELECT n FROM owner) <= ${PREPARED_SEARCH_MAX_OWNER_ROWS}` : "";
  const hits = `WITH ${ownerGate ? `${ownerRows}, ` : ""}hits AS (SELECT id, max(score) AS score, bool_or(own) AS own FROM (${union}) u${gate} GROUP BY id)`;
  const pageRows = `SELECT ${columnsOf("c")}, p.score, p.own AS is_own, p.total FROM page p JOIN collections c ON c.id = p.id`;
  // An owner's statement takes the page's bounds as subqueries too: a plan made for a limit of 20
  // is cheaper in the planner's eyes than one made for an unknown limit (a tenth of the hits),
  // so for an owner of many hits PostgreSQL would keep planning the statement for its values.
  const [limit, offset] = owner === undefined ? [":limit", ":offset"] : ["(SELECT CAST(:limit AS bigint))", "(SELECT CAST(:offset AS bigint))"];
  const page = `${hits},
    page AS (SELECT id, score, own, count(*) OVER () AS total FROM hits ORDER BY own DESC, score DESC, id DESC LIMIT ${limit} OFFSET ${offset})
    ${ownerGate
      ? `SELECT o.n AS owner_rows, x.* FROM owner o LEFT JOIN (${pageRows}) x ON true ORDER BY x.is_own DESC, x.score DESC, x.id DESC`
      : `${pageRows} ORDER BY p.own DESC, p.score DESC, p.id DESC`}`;
  return { hits, page };
}

/**
 * The statements of a set of scopes, made once per set: each search would otherwise build 2.5 KB
 * of text, and hand prepared statements a fresh string to hash and compare every time. Bounded:
 * the request allows at most five distinct scopes.
 */
const searchStatements = new Map<string, { hits: string; page: string }>();
function searchSql(scopes: Scope[], ownerGate = false): { hits: string; page: string } {
  const key = `${scopes.join(",")}${ownerGate ? "+gate" : ""}`;
  let sql = searchStatements.get(key);
  if (!sql) searchStatements.set(key, sql = buildSearchSql(scopes, ownerGate));
  return sql;
}

/**
 * A large owner's own statement of a search of `scopes`, prepared. A plan made for each query
 * costs the database as much as the search it plans (0.9 of 2.2 ms over 20,000 collections,
 * bench/notes/search.md); a prepared statement is planned once, but a generic plan of a statement
 * binding the owner is made for the average owner, which for a large one is the 190 ms plan of
 * PREPARED_SEARCH_MAX_OWNER_ROWS. With the owner written into the statement its plan is made for
 * this owner's rows, and only the query is unknown to it: each term of the query is computed once
 * per execution (queryTerms), and the plan, read from the owner's entries of
 * collections_owner_search, is as fast as the one made for a query. Only for a query with three
 * letters or digits in a row: the plan is made for one that gives trigrams, and for one that
 * gives none PostgreSQL would read the trigram index whole (280 against 120 ms).
 *
 * Bounded: each statement stays prepared on every connection that ran it, ~0.4 MB of the server's
 * memory each, so only the first OWNER_STATEMENTS_MAX (owner, scopes) of the process get one and
 * other owners keep a plan made for their query. Exported for the store's tests.
 */
export const ownerStatements = new Map<string, string>();
export const OWNER_STATEMENTS_MAX = 16;
function ownerStatement(scopes: Scope[], owner: string, query: string): string | undefined {
  if (!/[a-z0-9]{3}/i.test(query)) return undefined;
  const key = `${owner} ${scopes.join(",")}`;
  let sql = ownerStatements.get(key);
  if (sql === undefined && ownerStatements.size < OWNER_STATEMENTS_MAX && isUuid(owner)) {
    ownerStatements.set(key, sql = buildSearchSql(scopes, false, owner).page);
  }
  return sql;
}

function searchParams(query: string, who: Searcher) {
  return { raw: query.trim(), me: who.userId, followUsers: who.follows.users, followAliases: who.follows.aliases };
}

/**
 * The statement and bindings of the first page of an own-scope search as search() runs it (for
 * EXPLAIN in the bench, and the store's tests): planned for the query, the prepared one of small
 * owners gated by their count, or a large owner's own.
 */
export function searchPlanSql(query: string, userId: string, limit: number, statement: "planned" | "gated" | "owner" = "planned"): [string, Record<string, unknown>] {
  const sql = statement === "owner" ? buildSearchSql(["own"], false, userId).page : searchSql(["own"], statement === "gated").page;
  return [sql, { ...searchParams(query, { userId, follows: { users: [], aliases: [] } }), limit, offset: 0 }];
}

/** The collections store on the pool or a unit's transaction. */
export function createCollectionsStore(q: Queryable): CollectionsStore {
  const live = (userId: string, parentId: number | null) => q("collections").where({ user_id: userId, is_deleted: false })
    .modify((b) => (parentId === null ? b.whereNull("parent_id") : b.where("parent_id", parentId)));

  /** A count statement's total, asked when a page has no row to carry its own (windowTotal). */
  const counted = (countSql: string, bindings: Record<string, unknown>) => async () => Number((await q.raw(countSql, bindings)).rows[0].total);

  /**
   * A page of search hits by `page` (the statement without the gate): prepared for an owner
   * known to be small, the owner's own prepared statement for a large one (when it has one),
   * planned for its query for any other search; the gated prepared statement when a personal
   * search's owner is of unknown size.
   */
  async function searchPage(scopes: Scope[], who: Searcher, bindings: Record<string, unknown>, page: string): Promise<Array<CollectionRow & { total: unknown }>> {
    if (who.userId !== null && scopes.includes("own") && scopes.every(isGenerous)) {
      const seen = ownerSizes.get(who.userId);
      if (seen === "small") return preparedRows(q, page, bindings);
      if (seen === undefined) {
        const [first, ...rest] = await preparedRows<CollectionRow & { total: unknown; owner_rows: unknown }>(q, searchSql(scopes, true).page, bindings);
        if (Number(first.owner_rows) <= PREPARED_SEARCH_MAX_OWNER_ROWS) {
          ownerSizes.set(who.userId, "small", SMALL_OWNER_MEMORY_MS);
          const rows = first.id === null ? [] : [first, ...rest];
          for (const r of rows) delete r.owner_rows;
          return rows;
        }
        ownerSizes.set(who.userId, "large");
      }
      const own = ownerStatement(scopes, who.userId, String(bindings.raw));
      if (own !== undefined) return preparedRows(q, own, bindings);
    }
    return (await q.raw(page, bindings)).rows;
  }

  return {
    async byId(id, opts = {}) {
      const b = prepared(q("collections").where({ id }).first(COLLECTION_COLUMNS));
      if (opts.lock) b.forUpdate();
      return b as Promise<CollectionRow | undefined>;
    },
    async accessOf(id, userId) {
      const { rows: [r] } = await prepared(q.raw(
        `SELECT c.user_id, c.is_archived, c.is_deleted, c.is_published, c.share_access_level, m.can_upload, m.can_edit, m.can_delete
         FROM collections c LEFT JOIN collaborators m ON m.collection_id = c.id AND m.user_id = CAST(NULLIF(?, '') AS uuid) AND m.status = 'accepted'
         WHERE c.id = ?`,
        [userId, id],
      ));
      if (!r) return undefined;
      const { can_upload, can_edit, can_delete, ...row } = r;
      return can_upload === null ? row : { ...row, membership: { can_upload, can_edit, can_delete } };
    },
    async lockAll(ids) {
      if (ids.length) await q("collections").whereIn("id", ids).orderBy("id").forUpdate().select("id");
    },
    async reserveId() {
      const { rows } = await q.raw("SELECT nextval(pg_get_serial_sequence('collections', 'id')) AS id");
      return Number(rows[0].id);
    },
    async insert(values: NewCollection) {
      const { id, ...rest } = values;
      const [row] = await q("collections").insert(id === undefined ? rest : values).returning(COLLECTION_COLUMNS);
      return row as CollectionRow;
    },
    async update(id, patch: CollectionPatch) {
      const [row] = await q("collections").where({ id }).update(patch).returning(COLLECTION_COLUMNS);
      return row as CollectionRow;
    },
    async coverSource(id) {
      return (await q("collections").where({ id }).first("cover_source"))?.cover_source ?? null;
    },
    async remove(ids) {
      if (!ids.length) return;
      // Children first would need an order; detaching the set from its parents lets one DELETE go.
      await q("collections").whereIn("id", ids).update({ parent_id: null });
      await q("collections").whereIn("id", ids).delete();
    },
    async nameTaken(userId, parentId, name) {
      return Boolean(await live(userId, parentId).where({ name }).first("id"));
    },
    async nextPosition(userId, parentId) {
      const row = await live(userId, parentId).max<{ max: number | null }>("position as max").first();
      return row?.max === null || row?.max === undefined ? 0 : Number(row.max) + 1;
    },
    async addView(id) {
      await q("collections").where({ id }).increment("views", 1);
    },
    async publishedBySlug(userId, slug, handle) {
      return q("collections").where({ user_id: userId, share_slug: slug, is_published: true, is_deleted: false })
        .whereRaw("lower(publish_handle) = lower(?)", [handle]).first(COLLECTION_COLUMNS) as Promise<CollectionRow | undefined>;
    },
    async publishedChildren(parentId) {
      return q("collections").where({ parent_id: parentId, is_published: true, is_deleted: false, is_archived: false })
        .orderBy([{ column: "position" }, { column: "id" }]).select(COLLECTION_COLUMNS) as Promise<CollectionRow[]>;
    },
    async ownedAmong(userId, ids, includeArchived) {
      const b = q("collections").select(COLLECTION_COLUMNS).whereIn("id", ids).where({ user_id: userId, is_deleted: false });
      if (!includeArchived) b.where({ is_archived: false });
      return b as Promise<CollectionRow[]>;
    },
    async list(f: ListFilter): Promise<RowPage<CollectionRow>> {
      // Constant conditions as SQL literals, so that the generic plan of the prepared page can use
      // partial indexes (see the media store's list).
      const b = q("collections").whereRaw("NOT is_deleted");
      if (f.parentId !== undefined) b.where({ parent_id: f.parentId });
      else {
        b.where({ user_id: f.userId });
        if (!f.includeSubcollections) b.whereNull("parent_id");
      }
      if (!f.includeArchived) b.whereRaw("NOT is_archived");
      if (f.nameContains) b.whereRaw("name ILIKE ?", [`%${escapeLike(f.nameContains)}%`]);
      if (f.tag) b.whereRaw("? = ANY(tags)", [f.tag.toLowerCase()]);
      if (f.isNsfw !== undefined) b.where({ is_nsfw: f.isNsfw });
      return pageWithTotal<CollectionRow>(b, (page) => page.select(COLLECTION_COLUMNS).orderBy([{ column: "position" }, { column: "id" }]).limit(f.limit).offset(f.offset));
    },
    async ownedForReorder(userId) {
      return q("collections").select(COLLECTION_COLUMNS).where({ user_id: userId, is_deleted: false })
        .orderBy([{ column: "position" }, { column: "id" }]).forUpdate() as Promise<CollectionRow[]>;
    },
    async setPosition(id, position) {
      await q("collections").where({ id }).update({ position, updated_at: new Date() });
    },
    async subtreeIds(id, opts = {}) {
      const { rows } = await q.raw(
        `WITH RECURSIVE t AS (
           SELECT id FROM collections WHERE id = ?
           UNION ALL SELECT c.id FROM collections c JOIN t ON c.parent_id = t.id ${opts.includeDeleted ? "" : "WHERE NOT c.is_deleted"}
         ) SELECT id FROM t`,
        [id],
      );
      return rows.map((r: { id: number }) => Number(r.id));
    },
    async ancestorIds(id) {
      const { rows } = await q.raw(
        `WITH RECURSIVE a AS (
           SELECT parent_id AS id, 1 AS depth FROM collections WHERE id = ?
           UNION ALL SELECT c.parent_id, a.depth + 1 FROM collections c JOIN a ON c.id = a.id WHERE a.depth < 1000
         ) SELECT id FROM a WHERE id IS NOT NULL ORDER BY depth`,
        [id],
      );
      return rows.map((r: { id: number }) => Number(r.id));
    },
    async firstDeletedAmong(ids) {
      if (!ids.length) return undefined;
      const row = await q("collections").whereIn("id", ids).where({ is_deleted: true }).first("id");
      return row ? Number(row.id) : undefined;
    },
    async liveAmong(ids) {
      if (!ids.length) return [];
      return (await q("collections").whereIn("id", ids).where({ is_deleted: false }).pluck("id")).map(Number);
    },
    async deletedWith(id) {
      return (await q("collections").where({ deleted_with: id }).pluck("id")).map(Number);
    },
    async markDeleted(id, others, at) {
      await q("collections").where({ id }).update({ is_deleted: true, deleted_at: at, deleted_with: null, updated_at: at });
      if (others.length) await q("collections").whereIn("id", others).update({ is_deleted: true, deleted_at: at, deleted_with: id, updated_at: at });
    },
    async markRestored(ids, at) {
      await q("collections").whereIn("id", ids).update({ is_deleted: false, deleted_at: null, deleted_with: null, updated_at: at });
    },
    async coversOf(ids) {
      if (!ids.length) return [];
      return q("collections").whereIn("id", ids).select("id", "is_deleted", "thumbnail_url", "cover_thumbnail_url") as Promise<CoverRow[]>;
    },
    async deletedRootsBefore(before) {
      return q("collections").where({ is_deleted: true }).whereNull("deleted_with").where("deleted_at", "<", before)
        .select("id", "user_id", "deleted_at") as Promise<Array<{ id: number; user_id: string; deleted_at: Date }>>;
    },
    async addTombstones(rows) {
      if (rows.length) await q("purged_collections").insert(rows).onConflict("id").ignore();
    },
    async tombstone(id) {
      return q("purged_collections").where({ id }).first("user_id") as Promise<{ user_id: string } | undefined>;
    },
    async nextLifecycleVersion() {
      const { rows } = await q.raw("SELECT nextval('collection_lifecycle_version') AS v");
      return Number(rows[0].v);
    },
    async slugHolder(userId, slug) {
      const row = await q("reserved_slugs").where({ user_id: userId, slug }).first("collection_id");
      return row ? Number(row.collection_id) : undefined;
    },
    async reserveSlug(userId, slug, collectionId) {
      await q("reserved_slugs").insert({ user_id: userId, slug, collection_id: collectionId });
    },
    async addLike(userId, id) {
      const ins = await q("likes").insert({ user_id: userId, collection_id: id }).onConflict(["user_id", "collection_id"]).ignore().returning("collection_id");
      return ins.length > 0;
    },
    async removeLike(userId, id) {
      return (await q("likes").where({ user_id: userId, collection_id: id }).delete()) > 0;
    },
    async adjustLikes(id, delta) {
      const [r] = await q("collections").where({ id }).increment("likes", delta).returning("likes");
      return Number(r.likes);
    },
    async liked(userId, limit, offset) {
      // (The items carry no liked_at: the answer never had it.)
      const base = q("likes as l").join("collections as c", "c.id", "l.collection_id")
        .where("l.user_id", userId).where("c.is_deleted", false).where("c.is_published", true).where("c.share_access_level", "public");
      const [{ total }] = await base.clone().count<{ total: number }[]>("* as total");
      const rows = await base.select(COLLECTION_COLUMNS.map((c) => `c.${c}`)).orderBy("l.created_at", "desc").limit(limit).offset(offset);
      return { rows: rows as CollectionRow[], total: Number(total) };
    },
    async search(query, scopes, who, limit, offset) {
      const p = searchParams(query, who);
      const { hits, page } = searchSql(scopes);
      const rows = await searchPage(scopes, who, { ...p, limit, offset }, page);
      return { rows, total: await windowTotal(rows, offset, counted(`${hits} SELECT count(*) AS total FROM hits`, p)) };
    },
    async countPublicMatches(query, who) {
      const { rows } = await q.raw(`SELECT count(*) AS n FROM (${scopeSql("public", STRICT, "0")}) p`, searchParams(query, who));
      return Number(rows[0].n);
    },
    async browse(scopes, who, tags, sortBy: SortBy, limit, offset) {
      const p = { me: who.userId, followUsers: who.follows.users, followAliases: who.follows.aliases, tags };
      const union = scopes.map((s) => scopeSql(s, "TRUE", "0")).join(" UNION ALL ");
      const order = sortBy === "recent" ? "coalesce(c.published_at, c.created_at) DESC" : sortBy === "likes" ? "c.likes DESC" : "c.views DESC";
      const where = `WHERE c.id IN (SELECT id FROM (${union}) u) ${tags.length ? "AND c.tags && CAST(:tags AS text[])" : ""}`;
      const sql = `SELECT ${columnsOf("c")}, count(*) OVER () AS total FROM collections c ${where}
        ORDER BY ${order}, c.id DESC LIMIT :limit OFFSET :offset`;
      const { rows } = await q.raw(sql, { ...p, limit, offset });
      const total = await windowTotal(rows, offset, counted(`SELECT count(*) AS total FROM collections c ${where}`, p));
      return { rows, total };
    },
    async coverKeysAmong(keys) {
      if (!keys.length) return [];
      const { rows } = await q.raw(
        `SELECT k FROM unnest(?::text[]) AS k WHERE EXISTS (SELECT 1 FROM collections WHERE thumbnail_url = k)
            OR EXISTS (SELECT 1 FROM collections WHERE cover_thumbnail_url = k)`,
        [keys],
      );
      return rows.map((r: { k: string }) => r.k);
    },
  };
}

/** Every store of the collections schema over one query runner (the pool, or a unit's transaction). */
export function createCollectionsStores(q: Queryable): CollectionsStores {
  return {
    collections: createCollectionsStore(q), collaborators: createCollaboratorsStore(q), steps: createPendingStepsStore(q),
    uploadKeys: uploadKeysIn(q, "cover_upload_keys"),
  };
}
