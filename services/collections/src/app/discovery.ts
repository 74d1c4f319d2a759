/**
 * Search, browse, likes and the liked list. Own and shared collections match generously
 * (substring, accent-insensitive, trigram word similarity, full text); public, following and
 * liked scopes match strictly (every query word, or a substring of the name) and show only
 * published + public (+ searchable for strangers) collections. Each scope is its own indexed
 * subquery; the union is ranked with own hits first.
 */
import { AppError, type Caller } from "@cms/platform";
import { COLLECTION_COLUMNS, columnsOf, type CollectionRow } from "../domain/collection-json.js";
import type { Deps } from "./deps.js";
import type { Page } from "./crud.js";

export type Scope = "own" | "shared" | "public" | "following" | "liked";

/** Scopes after defaults and the anonymous fallback; refuses what the caller may not use. */
export function resolveScopes(requested: Scope[], caller: Caller | undefined, fallback: Scope[]): Scope[] {
  const scopes = requested.length ? requested : caller ? fallback : ["public" as Scope];
  const personal = scopes.filter((s) => s !== "public");
  if (!caller && personal.length) throw new AppError("unauthorized", `The scope(s) ${personal.join(", ")} need a bearer access token.`);
  if (caller && scopes.some((s) => s === "own" || s === "shared") && !caller.scopes.includes("collections:read")) {
    throw new AppError("insufficient_scope", "Searching own or shared collections needs the collections:read scope.", { need: "collections:read" });
  }
  return scopes;
}

// Word similarity 0.5 tolerates a transposition or a missing letter in a word ("montrael").
const GENEROUS = `(c.search_text LIKE '%' || :q || '%' OR word_similarity(:q, c.search_text) >= 0.5 OR c.search_tsv @@ plainto_tsquery('simple', :q))`;
const STRICT = `(c.search_tsv @@ plainto_tsquery('simple', :q) OR lower(immutable_unaccent(c.name)) LIKE '%' || :q || '%')`;
const SCORE = `(CASE WHEN c.search_text LIKE '%' || :q || '%' THEN 1 ELSE 0 END + word_similarity(:q, c.search_text) + ts_rank(c.search_tsv, plainto_tsquery('simple', :q)))`;
const VISIBLE_PUBLIC = `c.is_published AND c.share_access_level = 'public' AND NOT c.is_archived`;

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (ch) => `\\${ch}`);
}

function scopeSql(scope: Scope, match: string): string {
  const base = `SELECT c.id, ${SCORE} AS score FROM collections c WHERE NOT c.is_deleted AND c.parent_id IS NULL`;
  switch (scope) {
    case "own":
      return `${base} AND c.user_id = :me AND NOT c.is_archived AND ${match}`;
    case "shared":
      return `${base} AND c.id IN (SELECT collection_id FROM collaborators WHERE user_id = :me AND status = 'accepted') AND NOT c.is_archived AND ${match}`;
    case "public":
      return `${base} AND ${VISIBLE_PUBLIC} AND c.searchable AND c.user_id IS DISTINCT FROM :me AND ${match}`;
    case "following":
      return `${base} AND ${VISIBLE_PUBLIC} AND (c.user_id, coalesce(CAST(c.publish_alias_id AS text), '')) IN (SELECT * FROM unnest(CAST(:followUsers AS uuid[]), CAST(:followAliases AS text[]))) AND ${match}`;
    case "liked":
      return `${base} AND ${VISIBLE_PUBLIC} AND c.id IN (SELECT collection_id FROM likes WHERE user_id = :me) AND ${match}`;
  }
}

async function followed(deps: Deps, caller: Caller | undefined, scopes: Scope[]) {
  if (!caller || !scopes.includes("following")) return { followUsers: [] as string[], followAliases: [] as string[] };
  const res = await deps.social.listFollowedHandles({ userId: caller.userId });
  return {
    followUsers: res.handles.map((h) => h.ownerUserId),
    followAliases: res.handles.map((h) => (h.isPrimary ? "" : h.aliasId)),
  };
}

/** A search or browse hit: the collection and whether the caller owns it. */
export interface Hit { row: CollectionRow; isOwn: boolean }

function hitOf(row: CollectionRow, caller: Caller | undefined): Hit {
  return { row, isOwn: Boolean(caller && row.user_id === caller.userId) };
}

/**
 * collections.search: the hits, the scopes searched, and on zero results (or an offset past
 * them) a hint; alsoInPublic only on zero results.
 */
export interface SearchResult {
  hits: Hit[];
  scope: Scope[];
  page: Page;
  alsoInPublic?: number;
  hint?: string;
}

/**
 * The total of a paged query from its window count; a page past the end has no row to carry it,
 * so the count is then asked on its own (the total stays true at any offset).
 */
async function pageTotal(deps: Deps, rows: Array<{ total: unknown }>, offset: number, countSql: string, params: Record<string, unknown>): Promise<number> {
  if (rows.length) return Number(rows[0]!.total);
  if (offset === 0) return 0;
  const { rows: counted } = await deps.db.raw(countSql, params);
  return Number(counted[0].total);
}

export async function searchCollections(deps: Deps, caller: Caller | undefined, input: { query: string; scope: Scope[]; limit: number; offset: number }): Promise<SearchResult> {
  const { db } = deps;
  const scopes = resolveScopes(input.scope, caller, ["own", "shared"]);
  const q = input.query.trim();
  if (q.length < 3) throw new AppError("invalid_request", "query needs at least 3 characters.", { field: "query" });
  const { rows: [norm] } = await db.raw("SELECT lower(immutable_unaccent(?)) AS q", [q]);
  const params = { q: escapeLike(norm.q as string), me: caller?.userId ?? null, ...(await followed(deps, caller, scopes)) };
  const union = scopes.map((s) => scopeSql(s, s === "own" || s === "shared" ? GENEROUS : STRICT)).join(" UNION ALL ");
  const hits = `WITH hits AS (SELECT id, max(score) AS score FROM (${union}) u GROUP BY id)`;
  const sql = `${hits}
    SELECT ${columnsOf("c")}, h.score, (c.user_id = :me) AS is_own, count(*) OVER () AS total
    FROM hits h JOIN collections c ON c.id = h.id
    ORDER BY (c.user_id = :me) DESC NULLS LAST, h.score DESC, c.id DESC
    LIMIT :limit OFFSET :offset`;
  const { rows } = await db.raw(sql, { ...params, limit: input.limit, offset: input.offset });
  const total = await pageTotal(deps, rows, input.offset, `${hits} SELECT count(*) AS total FROM hits`, params);
  const body: SearchResult = {
    hits: rows.map((r: CollectionRow) => hitOf(r, caller)),
    scope: scopes,
    page: { limit: input.limit, offset: input.offset, total },
  };
  if (total === 0) {
    let alsoInPublic = 0;
    if (!scopes.includes("public")) {
      const { rows: pub } = await db.raw(`SELECT count(*) AS n FROM (${scopeSql("public", STRICT)}) p`, params);
      alsoInPublic = Number(pub[0].n);
    }
    body.alsoInPublic = alsoInPublic;
    body.hint = alsoInPublic > 0
      ? `No ${scopes.join("/")} collection matches "${q}", but ${alsoInPublic} public collection(s) do: search again with scope ["public"].`
      : `No collection in scope ${scopes.join("/")} matches "${q}". Try fewer or different words${scopes.includes("public") ? "" : ", or scope [\"public\"]"}; media items are searched with media.search.`;
  } else if (input.offset >= total) {
    body.hint = `The offset ${input.offset} is past the ${total} results.`;
  }
  return body;
}

export type SortBy = "views" | "recent" | "likes";

export async function browseCollections(deps: Deps, caller: Caller | undefined, input: { scope: Scope[]; tags: string[]; sortBy: SortBy; limit: number; offset: number }): Promise<{ hits: Hit[]; scope: Scope[]; sortBy: SortBy; page: Page }> {
  const { db } = deps;
  const scopes = resolveScopes(input.scope, caller, ["public"]);
  const params = { q: "", me: caller?.userId ?? null, ...(await followed(deps, caller, scopes)) };
  const union = scopes.map((s) => scopeSql(s, "TRUE")).join(" UNION ALL ");
  const tags = [...new Set(input.tags.map((t) => t.toLowerCase()))];
  const order = input.sortBy === "recent" ? "coalesce(c.published_at, c.created_at) DESC" : input.sortBy === "likes" ? "c.likes DESC" : "c.views DESC";
  const where = `WHERE c.id IN (SELECT id FROM (${union}) u) ${tags.length ? "AND c.tags && CAST(:tags AS text[])" : ""}`;
  const sql = `SELECT ${columnsOf("c")}, count(*) OVER () AS total FROM collections c ${where}
    ORDER BY ${order}, c.id DESC LIMIT :limit OFFSET :offset`;
  const { rows } = await db.raw(sql, { ...params, tags, limit: input.limit, offset: input.offset });
  const total = await pageTotal(deps, rows, input.offset, `SELECT count(*) AS total FROM collections c ${where}`, { ...params, tags });
  return {
    hits: rows.map((r: CollectionRow) => hitOf(r, caller)),
    scope: scopes,
    sortBy: input.sortBy,
    page: { limit: input.limit, offset: input.offset, total },
  };
}

/**
 * Liked collections still published and public, most recently liked first. (The items carry no
 * liked_at: the answer never had it, a knex select(array, alias) having dropped the alias.)
 */
export async function likedCollections(deps: Deps, caller: Caller, limit: number, offset: number): Promise<{ hits: Hit[]; page: Page }> {
  const base = deps.db("likes as l").join("collections as c", "c.id", "l.collection_id")
    .where("l.user_id", caller.userId).where("c.is_deleted", false).where("c.is_published", true).where("c.share_access_level", "public");
  const [{ total }] = await base.clone().count<{ total: number }[]>("* as total");
  const rows = await base.select(COLLECTION_COLUMNS.map((c) => `c.${c}`)).orderBy("l.created_at", "desc").limit(limit).offset(offset);
  return {
    hits: rows.map((r: CollectionRow) => hitOf(r, caller)),
    page: { limit, offset, total: Number(total) },
  };
}

/** Likes or unlikes; changed is false when there was nothing to change. */
export async function setLike(deps: Deps, caller: Caller, id: number, like: boolean): Promise<{ collectionId: number; liked: boolean; changed: boolean; likes: number }> {
  const out = await deps.db.transaction(async (trx) => {
    const row = await trx("collections").where({ id }).forUpdate().first(COLLECTION_COLUMNS);
    if (!row || row.is_deleted) throw new AppError("not_found", `Collection ${id} does not exist.`);
    const isPublic = row.is_published && row.share_access_level === "public";
    if (!isPublic && row.user_id !== caller.userId) throw new AppError("not_found", `Collection ${id} does not exist or is not public.`);
    if (like && !isPublic) throw new AppError("invalid_request", `Only published public collections can be liked; collection ${id} is not.`, { field: "collection_id" });
    let changed: boolean;
    if (like) {
      const ins = await trx("likes").insert({ user_id: caller.userId, collection_id: id }).onConflict(["user_id", "collection_id"]).ignore().returning("collection_id");
      changed = ins.length > 0;
    } else {
      changed = (await trx("likes").where({ user_id: caller.userId, collection_id: id }).delete()) > 0;
    }
    let likes = Number(row.likes);
    if (changed) {
      const [r] = await trx("collections").where({ id }).increment("likes", like ? 1 : -1).returning("likes");
      likes = Number(r.likes);
    }
    return { changed, likes };
  });
  return { collectionId: id, liked: like, changed: out.changed, likes: out.likes };
}
