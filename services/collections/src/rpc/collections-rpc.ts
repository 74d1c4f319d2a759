/** Thin Connect handlers of CollectionsService: decode, authorize, call the application, wrap. */
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { callerOf, jsonOf, requireCaller, result } from "@cms/platform";
import type { AccessLevel, AliasChoice } from "../domain/rules.js";
import type { Deps } from "../app/deps.js";
import { batchGet, checkAccess, coverStoreKeys, createCollection, exportCollection, getBySlug, getCollection, listCollections, setArchived, shareUrlOf, statsOf, updateCollection } from "../app/crud.js";
import { deleteCollection, restoreCollection } from "../app/lifecycle.js";
import { publishCollection, unpublishCollection } from "../app/publish.js";
import { moveCollection, reorderCollections } from "../app/nesting.js";
import { browseCollections, likedCollections, searchCollections, setLike, type Scope } from "../app/discovery.js";
import { coverUploadUrl } from "../app/covers.js";
import { ownedCollection } from "../app/deps.js";
import { collectionMessage } from "./encode.js";
import {
  inviteCollaborator, listCollaborators, listReceivedInvites, listSentInvites, respondToInvite, revokeCollaborator, updateCollaboratorPermissions,
} from "../app/collaborators.js";

const level = (v: string | undefined) => v as AccessLevel | undefined;

function aliasChoice(v: unknown): AliasChoice {
  if (v === undefined) return { kind: "omitted" };
  if (v === null) return { kind: "username" };
  return { kind: "alias", aliasId: String(v) };
}

export function collectionsRoutes(deps: Deps) {
  return (router: ConnectRouter) =>
    router.service(CollectionsService, {
      async createCollection(req, ctx) {
        return result(await createCollection(deps, requireCaller(ctx), {
          name: req.name,
          description: req.description,
          thumbnailUrl: req.thumbnailUrl,
          isNsfw: req.isNsfw,
          shareAccessLevel: level(req.shareAccessLevel),
          tags: req.tags,
          searchable: req.searchable,
          aliasId: req.aliasId,
          playbackPrefs: jsonOf(req.playbackPrefs),
          parentId: req.parentCollectionId === undefined ? undefined : Number(req.parentCollectionId),
          linkPosition: req.linkPosition,
          linkDescription: req.linkDescription,
        }));
      },
      async updateCollection(req, ctx) {
        return result(await updateCollection(deps, requireCaller(ctx), Number(req.collectionId), {
          name: req.name,
          description: jsonOf(req.description) as string | null | undefined,
          tags: jsonOf(req.tags) as string[] | undefined,
          thumbnailUrl: req.thumbnailUrl,
          isNsfw: req.isNsfw,
          shareAccessLevel: level(req.shareAccessLevel),
          position: req.position,
          searchable: req.searchable,
          openFullscreen: req.openFullscreen,
          aliasId: jsonOf(req.aliasId) as string | null | undefined,
          playbackPrefs: jsonOf(req.playbackPrefs),
        }));
      },
      async getCollection(req, ctx) {
        return result(await getCollection(deps, requireCaller(ctx), Number(req.collectionId)));
      },
      async getCollectionBySlug(req, ctx) {
        return result(await getBySlug(deps, callerOf(ctx), req.handle, req.slug));
      },
      async batchGetCollections(req, ctx) {
        return result(await batchGet(deps, requireCaller(ctx), req.ids.map(Number), req.includeArchived ?? false));
      },
      async listCollections(req, ctx) {
        return result(await listCollections(deps, requireCaller(ctx), {
          nameContains: req.nameContains,
          fields: jsonOf(req.fields),
          tag: req.tag,
          isNsfw: req.isNsfw,
          includeArchived: req.includeArchived ?? false,
          parentId: req.parentCollectionId === undefined ? undefined : Number(req.parentCollectionId),
          includeSubcollections: req.includeSubcollections ?? false,
          limit: req.limit ?? 100,
          offset: req.offset ?? 0,
        }));
      },
      async searchCollections(req, ctx) {
        return result(await searchCollections(deps, callerOf(ctx), { query: req.query, scope: req.scope as Scope[], limit: req.limit ?? 20, offset: req.offset ?? 0 }));
      },
      async browseCollections(req, ctx) {
        return result(await browseCollections(deps, callerOf(ctx), {
          scope: req.scope as Scope[], tags: req.tags, sortBy: (req.sortBy ?? "views") as "views" | "recent" | "likes", limit: req.limit ?? 20, offset: req.offset ?? 0,
        }));
      },
      async listLikedCollections(req, ctx) {
        return result(await likedCollections(deps, requireCaller(ctx), req.limit ?? 100, req.offset ?? 0));
      },
      async likeCollection(req, ctx) {
        return result(await setLike(deps, requireCaller(ctx), Number(req.collectionId), true));
      },
      async unlikeCollection(req, ctx) {
        return result(await setLike(deps, requireCaller(ctx), Number(req.collectionId), false));
      },
      async getCollectionStats(req, ctx) {
        return result(await statsOf(deps, requireCaller(ctx), Number(req.collectionId)));
      },
      async getShareUrl(req, ctx) {
        return result(await shareUrlOf(deps, requireCaller(ctx), Number(req.collectionId)));
      },
      async archiveCollection(req, ctx) {
        return result(await setArchived(deps, requireCaller(ctx), Number(req.collectionId), true));
      },
      async unarchiveCollection(req, ctx) {
        return result(await setArchived(deps, requireCaller(ctx), Number(req.collectionId), false));
      },
      async deleteCollection(req, ctx) {
        return result(await deleteCollection(deps, requireCaller(ctx), Number(req.collectionId), {
          mode: (req.mode ?? "soft") as "soft" | "hard", cascadeMedia: req.cascadeMedia ?? false, confirm: req.confirm ?? false, dryRun: req.dryRun ?? false,
        }));
      },
      async restoreCollection(req, ctx) {
        return result(await restoreCollection(deps, requireCaller(ctx), Number(req.collectionId), { dryRun: req.dryRun ?? false }));
      },
      async exportCollection(req, ctx) {
        const out = await exportCollection(deps, requireCaller(ctx), Number(req.collectionId), (req.format ?? "json") as "json" | "csv", req.includeArchived ?? false);
        return out.format === "csv"
          ? { format: out.format, body: { case: "csv", value: { content: out.content, columns: out.columns } } }
          : { format: out.format, body: { case: "json", value: { collection: collectionMessage(out.row, deps.appUrl), media: out.media } } };
      },
      async moveCollection(req, ctx) {
        const dest = jsonOf(req.parentCollectionId);
        return result(await moveCollection(deps, requireCaller(ctx), Number(req.collectionId), dest === undefined || dest === null ? null : Number(dest)));
      },
      async reorderCollections(req, ctx) {
        return result(await reorderCollections(deps, requireCaller(ctx), req.orderedIds.map(Number)));
      },
      async publishCollection(req, ctx) {
        return result(await publishCollection(deps, requireCaller(ctx), Number(req.collectionId), {
          slug: req.slug, shareAccessLevel: level(req.shareAccessLevel), searchable: req.searchable, openFullscreen: req.openFullscreen, alias: aliasChoice(jsonOf(req.aliasId)),
        }));
      },
      async unpublishCollection(req, ctx) {
        return result(await unpublishCollection(deps, requireCaller(ctx), Number(req.collectionId), level(req.shareAccessLevel)));
      },
      async getCollectionUploadUrl(req, ctx: HandlerContext) {
        const caller = requireCaller(ctx);
        await ownedCollection(deps.db, Number(req.collectionId), caller);
        return result(await coverUploadUrl(deps, caller, Number(req.collectionId), req.contentType, req.contentLength, req.filename));
      },
      async inviteCollaborator(req, ctx) {
        return result(await inviteCollaborator(deps, requireCaller(ctx), Number(req.collectionId), req.username, {
          can_upload: req.canUpload, can_edit: req.canEdit, can_delete: req.canDelete,
        }));
      },
      async acceptInvite(req, ctx) {
        return result(await respondToInvite(deps, requireCaller(ctx), Number(req.collectionId), req.inviterUserId, "accepted"));
      },
      async declineInvite(req, ctx) {
        return result(await respondToInvite(deps, requireCaller(ctx), Number(req.collectionId), req.inviterUserId, "declined"));
      },
      async listSentInvites(_req, ctx) {
        return result(await listSentInvites(deps, requireCaller(ctx)));
      },
      async listReceivedInvites(_req, ctx) {
        return result(await listReceivedInvites(deps, requireCaller(ctx)));
      },
      async listCollaborators(req, ctx) {
        return result(await listCollaborators(deps, requireCaller(ctx), Number(req.collectionId)));
      },
      async revokeCollaborator(req, ctx) {
        return result(await revokeCollaborator(deps, requireCaller(ctx), Number(req.collectionId), req.userId));
      },
      async updateCollaboratorPermissions(req, ctx) {
        return result(await updateCollaboratorPermissions(deps, requireCaller(ctx), Number(req.collectionId), req.userId, {
          can_upload: req.canUpload, can_edit: req.canEdit, can_delete: req.canDelete,
        }));
      },
      async checkAccess(req) {
        return checkAccess(deps, req.userId, Number(req.collectionId), req.action);
      },
      async coverStoreKeys(req) {
        return coverStoreKeys(deps, req.storeKeys);
      },
    });
}
