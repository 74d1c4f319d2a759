/**
 * Publishing and unpublishing (publish rules 1-4, handles, slugs). The handle is resolved with
 * the social service before the unit of work opens.
 */
import { AppError, emitCollectionUpdated, type Caller } from "@cms/platform";
import type { CollectionRow } from "../domain/collection-json.js";
import { decidePublish, decideUnpublish, handleResolution, normalizeSlug, type AccessLevel, type AliasChoice, type PublishState } from "../domain/rules.js";
import { changeOf, ownedCollection, type AppContext } from "./context.js";

/** collections.publish as the use case takes it (request defaults applied). */
export interface PublishInput {
  slug: string;
  shareAccessLevel?: AccessLevel;
  searchable: boolean;
  openFullscreen?: boolean;
  alias: AliasChoice;
}

function stateOf(r: CollectionRow): PublishState {
  return {
    shareAccessLevel: r.share_access_level, shareAccessConfigured: r.share_access_configured,
    searchable: r.searchable, isPublished: r.is_published, openFullscreen: r.open_fullscreen,
  };
}

/** Publish and unpublish. */
export function publishUseCases(app: AppContext) {
  return {
    /** The published row; shareAccessLevelDefaulted per the publish rules. */
    async publishCollection(caller: Caller, id: number, input: PublishInput): Promise<{ row: CollectionRow; shareAccessLevelDefaulted: boolean }> {
      const slug = normalizeSlug(input.slug);
      const before = await ownedCollection(app.stores, id, caller);
      const how = handleResolution(input.alias, { aliasId: before.publish_alias_id, handleSet: before.publish_handle !== null });
      let target: { aliasId: string | null; handle: string };
      if (how.mode === "keep") {
        target = { aliasId: before.publish_alias_id, handle: before.publish_handle! };
      } else {
        const res = await app.social.resolvePublishHandle({ userId: caller.userId, mode: how.mode, aliasId: how.mode === "alias" ? how.aliasId : "" });
        target = { aliasId: res.aliasId || null, handle: res.handle };
      }
      return app.unitOfWork(async (s, events) => {
        const cur = await ownedCollection(s, id, caller, { lock: true });
        if (cur.is_archived) throw new AppError("invalid_request", `Collection ${id} is archived; unarchive it before publishing.`, { field: "collection_id" });
        if (cur.is_published && (target.handle !== cur.publish_handle || target.aliasId !== cur.publish_alias_id)) {
          throw new AppError("publish_handle_locked", "The public handle of a published collection cannot change; unpublish it, then publish again with the new alias.", {
            ...(input.alias.kind !== "omitted" ? { field: "alias_id" } : {}),
            current_handle: cur.publish_handle, requested_handle: target.handle,
          });
        }
        const holder = await s.collections.slugHolder(caller.userId, slug);
        if (holder !== undefined && holder !== id) {
          throw new AppError("slug_taken", `The slug "${slug}" is reserved by another collection on this account (possibly a deleted one); it will not free up. Choose another slug.`, { field: "slug", slug });
        }
        if (holder === undefined) await s.collections.reserveSlug(caller.userId, slug, id);
        const d = decidePublish(stateOf(cur), { shareAccessLevel: input.shareAccessLevel, searchable: input.searchable, openFullscreen: input.openFullscreen });
        const now = app.now();
        const next = await s.collections.update(id, {
          is_published: true,
          published_at: cur.is_published ? cur.published_at : now,
          share_slug: slug,
          share_access_level: d.shareAccessLevel,
          share_access_configured: d.shareAccessConfigured,
          searchable: d.searchable,
          open_fullscreen: d.openFullscreen,
          publish_alias_id: target.aliasId,
          publish_handle: target.handle,
          updated_at: now,
        });
        await emitCollectionUpdated(events, changeOf(next, "published"));
        return { row: next, shareAccessLevelDefaulted: d.shareAccessLevelDefaulted };
      });
    },

    async unpublishCollection(caller: Caller, id: number, level?: AccessLevel): Promise<CollectionRow> {
      return app.unitOfWork(async (s, events) => {
        const cur = await ownedCollection(s, id, caller, { lock: true });
        const d = decideUnpublish(stateOf(cur), level);
        const next = await s.collections.update(id, {
          is_published: false,
          searchable: d.searchable,
          share_access_level: d.shareAccessLevel,
          share_access_configured: d.shareAccessConfigured,
          updated_at: app.now(),
        });
        // Delivered even though the collection is no longer published (the webhook sees the unpublish).
        await emitCollectionUpdated(events, changeOf({ ...next, is_published: false }, "unpublished"));
        return next;
      });
    },
  };
}
