/** Publishing and unpublishing (publish rules 1-4, handles, slugs). */
import { AppError, type Caller } from "@cms/platform";
import { COLLECTION_COLUMNS, type CollectionRow } from "../domain/collection-json.js";
import { decidePublish, decideUnpublish, handleResolution, normalizeSlug, type AccessLevel, type AliasChoice } from "../domain/rules.js";
import { emitUpdated, ownedCollection, type Deps } from "./deps.js";

export interface PublishInput {
  slug: string;
  shareAccessLevel?: AccessLevel;
  searchable?: boolean;
  openFullscreen?: boolean;
  alias: AliasChoice;
}

function stateOf(r: CollectionRow) {
  return {
    shareAccessLevel: r.share_access_level, shareAccessConfigured: r.share_access_configured,
    searchable: r.searchable, isPublished: r.is_published, openFullscreen: r.open_fullscreen,
  };
}

/** The published row; shareAccessLevelDefaulted per the publish rules. */
export async function publishCollection(deps: Deps, caller: Caller, id: number, input: PublishInput): Promise<{ row: CollectionRow; shareAccessLevelDefaulted: boolean }> {
  const { db } = deps;
  const slug = normalizeSlug(input.slug);
  const cur0 = await ownedCollection(db, id, caller);
  const how = handleResolution(input.alias, { aliasId: cur0.publish_alias_id, handleSet: cur0.publish_handle !== null });
  let target: { aliasId: string | null; handle: string };
  if (how.mode === "keep") {
    target = { aliasId: cur0.publish_alias_id, handle: cur0.publish_handle! };
  } else {
    const res = await deps.social.resolvePublishHandle({ userId: caller.userId, mode: how.mode, aliasId: how.mode === "alias" ? how.aliasId : "" });
    target = { aliasId: res.aliasId || null, handle: res.handle };
  }
  const out = await db.transaction(async (trx) => {
    const cur = await ownedCollection(trx, id, caller, { forUpdate: true });
    if (cur.is_archived) throw new AppError("invalid_request", `Collection ${id} is archived; unarchive it before publishing.`, { field: "collection_id" });
    if (cur.is_published && (target.handle !== cur.publish_handle || target.aliasId !== cur.publish_alias_id)) {
      throw new AppError("publish_handle_locked", "The public handle of a published collection cannot change; unpublish it, then publish again with the new alias.", {
        ...(input.alias.kind !== "omitted" ? { field: "alias_id" } : {}),
        current_handle: cur.publish_handle, requested_handle: target.handle,
      });
    }
    const taken = await trx("reserved_slugs").where({ user_id: caller.userId, slug }).first();
    if (taken && Number(taken.collection_id) !== id) {
      throw new AppError("slug_taken", `The slug "${slug}" is reserved by another collection on this account (possibly a deleted one); it will not free up. Choose another slug.`, { field: "slug", slug });
    }
    if (!taken) await trx("reserved_slugs").insert({ user_id: caller.userId, slug, collection_id: id });
    const d = decidePublish(stateOf(cur), { shareAccessLevel: input.shareAccessLevel, searchable: input.searchable, openFullscreen: input.openFullscreen });
    const [next] = await trx("collections").where({ id }).update({
      is_published: true,
      published_at: cur.is_published ? cur.published_at : new Date(),
      share_slug: slug,
      share_access_level: d.shareAccessLevel,
      share_access_configured: d.shareAccessConfigured,
      searchable: d.searchable,
      open_fullscreen: d.openFullscreen,
      publish_alias_id: target.aliasId,
      publish_handle: target.handle,
      updated_at: new Date(),
    }).returning(COLLECTION_COLUMNS) as CollectionRow[];
    await emitUpdated(deps, trx, next!, "published");
    return { row: next!, defaulted: d.shareAccessLevelDefaulted };
  });
  deps.ctx.bus.flush();
  return { row: out.row, shareAccessLevelDefaulted: out.defaulted };
}

export async function unpublishCollection(deps: Deps, caller: Caller, id: number, level?: AccessLevel): Promise<CollectionRow> {
  const row = await deps.db.transaction(async (trx) => {
    const cur = await ownedCollection(trx, id, caller, { forUpdate: true });
    const d = decideUnpublish(stateOf(cur), level);
    const [next] = await trx("collections").where({ id }).update({
      is_published: false,
      searchable: d.searchable,
      share_access_level: d.shareAccessLevel,
      share_access_configured: d.shareAccessConfigured,
      updated_at: new Date(),
    }).returning(COLLECTION_COLUMNS) as CollectionRow[];
    // Delivered even though the collection is no longer published (the webhook sees the unpublish).
    await emitUpdated(deps, trx, { ...next!, is_published: false }, "unpublished");
    return next!;
  });
  deps.ctx.bus.flush();
  return row;
}
