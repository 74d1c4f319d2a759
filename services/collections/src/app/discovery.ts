/**
 * Search, browse, likes and the liked list. Which collections each scope shows, and how
 * strictly they match, is the store's query (../store/collections-store.ts); the scopes a caller
 * may use, the hints and the like rules are here.
 */
import { AppError, type Caller } from "@cms/platform";
import type { CollectionRow } from "../domain/collection-json.js";
import type { Page } from "./crud.js";
import type { Follows, Scope, Searcher, SortBy } from "./ports.js";
import type { AppContext } from "./context.js";

export type { Scope, SortBy } from "./ports.js";

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

/** A search or browse hit: the collection and whether the caller owns it. */
export interface Hit { row: CollectionRow; isOwn: boolean }

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

function hitOf(row: CollectionRow, caller: Caller | undefined): Hit {
  return { row, isOwn: Boolean(caller && row.user_id === caller.userId) };
}

/** Search, browse, the liked list and likes. */
export function discoveryUseCases(app: AppContext) {
  const { collections } = app.stores;

  async function searcher(caller: Caller | undefined, scopes: Scope[]): Promise<Searcher> {
    const follows: Follows = { users: [], aliases: [] };
    if (caller && scopes.includes("following")) {
      const res = await app.social.listFollowedHandles({ userId: caller.userId });
      follows.users = res.handles.map((h) => h.ownerUserId);
      follows.aliases = res.handles.map((h) => (h.isPrimary ? "" : h.aliasId));
    }
    return { userId: caller?.userId ?? null, follows };
  }

  return {
    async searchCollections(caller: Caller | undefined, input: { query: string; scope: Scope[]; limit: number; offset: number }): Promise<SearchResult> {
      const scopes = resolveScopes(input.scope, caller, ["own", "shared"]);
      const q = input.query.trim();
      if (q.length < 3) throw new AppError("invalid_request", "query needs at least 3 characters.", { field: "query" });
      const who = await searcher(caller, scopes);
      const { rows, total } = await collections.search(q, scopes, who, input.limit, input.offset);
      const body: SearchResult = {
        hits: rows.map((r) => hitOf(r, caller)),
        scope: scopes,
        page: { limit: input.limit, offset: input.offset, total },
      };
      if (total === 0) {
        const alsoInPublic = scopes.includes("public") ? 0 : await collections.countPublicMatches(q, who);
        body.alsoInPublic = alsoInPublic;
        body.hint = alsoInPublic > 0
          ? `No ${scopes.join("/")} collection matches "${q}", but ${alsoInPublic} public collection(s) do: search again with scope ["public"].`
          : `No collection in scope ${scopes.join("/")} matches "${q}". Try fewer or different words${scopes.includes("public") ? "" : ", or scope [\"public\"]"}; media items are searched with media.search.`;
      } else if (input.offset >= total) {
        body.hint = `The offset ${input.offset} is past the ${total} results.`;
      }
      return body;
    },

    async browseCollections(caller: Caller | undefined, input: { scope: Scope[]; tags: string[]; sortBy: SortBy; limit: number; offset: number }): Promise<{ hits: Hit[]; scope: Scope[]; sortBy: SortBy; page: Page }> {
      const scopes = resolveScopes(input.scope, caller, ["public"]);
      const tags = [...new Set(input.tags.map((t) => t.toLowerCase()))];
      const { rows, total } = await collections.browse(scopes, await searcher(caller, scopes), tags, input.sortBy, input.limit, input.offset);
      return {
        hits: rows.map((r) => hitOf(r, caller)),
        scope: scopes,
        sortBy: input.sortBy,
        page: { limit: input.limit, offset: input.offset, total },
      };
    },

    /** Liked collections still published and public, most recently liked first. */
    async likedCollections(caller: Caller, limit: number, offset: number): Promise<{ hits: Hit[]; page: Page }> {
      const { rows, total } = await collections.liked(caller.userId, limit, offset);
      return { hits: rows.map((r) => hitOf(r, caller)), page: { limit, offset, total } };
    },

    /** Likes or unlikes; changed is false when there was nothing to change. */
    async setLike(caller: Caller, id: number, like: boolean): Promise<{ collectionId: number; liked: boolean; changed: boolean; likes: number }> {
      const out = await app.unitOfWork(async (s) => {
        const row = await s.collections.byId(id, { lock: true });
        if (!row || row.is_deleted) throw new AppError("not_found", `Collection ${id} does not exist.`);
        const isPublic = row.is_published && row.share_access_level === "public";
        if (!isPublic && row.user_id !== caller.userId) throw new AppError("not_found", `Collection ${id} does not exist or is not public.`);
        if (like && !isPublic) throw new AppError("invalid_request", `Only published public collections can be liked; collection ${id} is not.`, { field: "collection_id" });
        const changed = like ? await s.collections.addLike(caller.userId, id) : await s.collections.removeLike(caller.userId, id);
        const likes = changed ? await s.collections.adjustLikes(id, like ? 1 : -1) : Number(row.likes);
        return { changed, likes };
      });
      return { collectionId: id, liked: like, changed: out.changed, likes: out.likes };
    },
  };
}
