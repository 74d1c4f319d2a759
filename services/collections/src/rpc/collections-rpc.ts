/** Thin Connect handlers of CollectionsService: decode, authorize, call the application, encode. */
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { callerOf, jsonOf, requireCaller } from "@cms/platform";
import type { AccessLevel, AliasChoice } from "../domain/rules.js";
import { shareUrl } from "../domain/collection-json.js";
import type { Deps } from "../app/deps.js";
import { batchGet, checkAccess, coverStoreKeys, createCollection, exportCollection, getBySlug, getCollection, listCollections, setArchived, shareUrlOf, statsOf, updateCollection } from "../app/crud.js";
import { deleteCollection, restoreCollection } from "../app/lifecycle.js";
import { publishCollection, unpublishCollection } from "../app/publish.js";
import { moveCollection, reorderCollections } from "../app/nesting.js";
import { browseCollections, likedCollections, searchCollections, setLike, type Scope, type SortBy } from "../app/discovery.js";
import { coverUploadUrl } from "../app/covers.js";
import { ownedCollection } from "../app/deps.js";
import {
  collaboratorMessage, collectionMessage, deleteResponse, hitMessage, inviteMessage, listResponse, paginationMessage, restoreResponse,
  receivedInviteMessage, searchResponse, sentInviteMessage, uploadTargetsMessage,
} from "./encode.js";
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
        const out = await createCollection(deps, requireCaller(ctx), {
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
        });
        return { collection: collectionMessage(out.row, deps.appUrl), linkMediaId: out.linkMediaId === undefined ? undefined : BigInt(out.linkMediaId) };
      },
      async updateCollection(req, ctx) {
        const row = await updateCollection(deps, requireCaller(ctx), Number(req.collectionId), {
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
        });
        return { collection: collectionMessage(row, deps.appUrl) };
      },
      async getCollection(req, ctx) {
        const { row, perms } = await getCollection(deps, requireCaller(ctx), Number(req.collectionId));
        return { collection: collectionMessage(row, deps.appUrl, perms) };
      },
      async getCollectionBySlug(req, ctx) {
        return { collection: collectionMessage(await getBySlug(deps, callerOf(ctx), req.handle, req.slug), deps.appUrl) };
      },
      async batchGetCollections(req, ctx) {
        const { rows, missingIds } = await batchGet(deps, requireCaller(ctx), req.ids.map(Number), req.includeArchived ?? false);
        return { collections: rows.map((r) => collectionMessage(r, deps.appUrl)), missingIds: missingIds.map(BigInt) };
      },
      async listCollections(req, ctx) {
        const list = await listCollections(deps, requireCaller(ctx), {
          nameContains: req.nameContains,
          fields: jsonOf(req.fields),
          tag: req.tag,
          isNsfw: req.isNsfw,
          includeArchived: req.includeArchived ?? false,
          parentId: req.parentCollectionId === undefined ? undefined : Number(req.parentCollectionId),
          includeSubcollections: req.includeSubcollections ?? false,
          limit: req.limit ?? 100,
          offset: req.offset ?? 0,
        });
        return listResponse(list, deps.appUrl);
      },
      async searchCollections(req, ctx) {
        const res = await searchCollections(deps, callerOf(ctx), { query: req.query, scope: req.scope as Scope[], limit: req.limit ?? 20, offset: req.offset ?? 0 });
        return searchResponse(res, deps.appUrl);
      },
      async browseCollections(req, ctx) {
        const res = await browseCollections(deps, callerOf(ctx), {
          scope: req.scope as Scope[], tags: req.tags, sortBy: (req.sortBy ?? "views") as SortBy, limit: req.limit ?? 20, offset: req.offset ?? 0,
        });
        return { collections: res.hits.map((h) => hitMessage(h, deps.appUrl)), scope: res.scope, sortBy: res.sortBy, pagination: paginationMessage(res.page) };
      },
      async listLikedCollections(req, ctx) {
        const res = await likedCollections(deps, requireCaller(ctx), req.limit ?? 100, req.offset ?? 0);
        return { collections: res.hits.map((h) => hitMessage(h, deps.appUrl)), pagination: paginationMessage(res.page) };
      },
      async likeCollection(req, ctx) {
        const out = await setLike(deps, requireCaller(ctx), Number(req.collectionId), true);
        return { collectionId: BigInt(out.collectionId), liked: out.liked, changed: out.changed, stats: { likes: BigInt(out.likes) } };
      },
      async unlikeCollection(req, ctx) {
        const out = await setLike(deps, requireCaller(ctx), Number(req.collectionId), false);
        return { collectionId: BigInt(out.collectionId), liked: out.liked, changed: out.changed, stats: { likes: BigInt(out.likes) } };
      },
      async getCollectionStats(req, ctx) {
        const s = await statsOf(deps, requireCaller(ctx), Number(req.collectionId));
        return { collectionId: BigInt(s.collectionId), stats: { likes: BigInt(s.likes), views: BigInt(s.views) } };
      },
      async getShareUrl(req, ctx) {
        return shareUrlOf(deps, requireCaller(ctx), Number(req.collectionId));
      },
      async archiveCollection(req, ctx) {
        return { collection: collectionMessage(await setArchived(deps, requireCaller(ctx), Number(req.collectionId), true), deps.appUrl) };
      },
      async unarchiveCollection(req, ctx) {
        return { collection: collectionMessage(await setArchived(deps, requireCaller(ctx), Number(req.collectionId), false), deps.appUrl) };
      },
      async deleteCollection(req, ctx) {
        return deleteResponse(await deleteCollection(deps, requireCaller(ctx), Number(req.collectionId), {
          mode: (req.mode ?? "soft") as "soft" | "hard", cascadeMedia: req.cascadeMedia ?? false, confirm: req.confirm ?? false, dryRun: req.dryRun ?? false,
        }));
      },
      async restoreCollection(req, ctx) {
        return restoreResponse(await restoreCollection(deps, requireCaller(ctx), Number(req.collectionId), { dryRun: req.dryRun ?? false }), deps.appUrl);
      },
      async exportCollection(req, ctx) {
        const out = await exportCollection(deps, requireCaller(ctx), Number(req.collectionId), (req.format ?? "json") as "json" | "csv", req.includeArchived ?? false);
        return out.format === "csv"
          ? { format: out.format, body: { case: "csv", value: { content: out.content, columns: out.columns } } }
          : { format: out.format, body: { case: "json", value: { collection: collectionMessage(out.row, deps.appUrl), media: out.media } } };
      },
      async moveCollection(req, ctx) {
        const dest = jsonOf(req.parentCollectionId);
        const out = await moveCollection(deps, requireCaller(ctx), Number(req.collectionId), dest === undefined || dest === null ? null : Number(dest));
        return {
          collection: collectionMessage(out.row, deps.appUrl),
          noop: out.noop,
          removedLinkMediaIds: out.removedLinkMediaIds.map(BigInt),
          linkMediaId: out.linkMediaId === undefined ? undefined : BigInt(out.linkMediaId),
        };
      },
      async reorderCollections(req, ctx) {
        const out = await reorderCollections(deps, requireCaller(ctx), req.orderedIds.map(Number));
        return { collections: out.positions.map((p) => ({ id: BigInt(p.id), position: p.position })), reordered: out.reordered };
      },
      async publishCollection(req, ctx) {
        const out = await publishCollection(deps, requireCaller(ctx), Number(req.collectionId), {
          slug: req.slug, shareAccessLevel: level(req.shareAccessLevel), searchable: req.searchable, openFullscreen: req.openFullscreen, alias: aliasChoice(jsonOf(req.aliasId)),
        });
        return {
          collection: collectionMessage(out.row, deps.appUrl),
          shareAccessLevelDefaulted: out.shareAccessLevelDefaulted,
          url: shareUrl(deps.appUrl, out.row) ?? undefined,
        };
      },
      async unpublishCollection(req, ctx) {
        return { collection: collectionMessage(await unpublishCollection(deps, requireCaller(ctx), Number(req.collectionId), level(req.shareAccessLevel)), deps.appUrl) };
      },
      async getCollectionUploadUrl(req, ctx: HandlerContext) {
        const caller = requireCaller(ctx);
        await ownedCollection(deps.db, Number(req.collectionId), caller);
        const out = await coverUploadUrl(deps, caller, Number(req.collectionId), req.contentType, req.contentLength, req.filename);
        return { targets: uploadTargetsMessage(out.targets), nextStep: out.nextStep };
      },
      async inviteCollaborator(req, ctx) {
        const out = await inviteCollaborator(deps, requireCaller(ctx), Number(req.collectionId), req.username, {
          can_upload: req.canUpload, can_edit: req.canEdit, can_delete: req.canDelete,
        });
        return { invite: { invite: inviteMessage(out.row), username: out.username } };
      },
      async acceptInvite(req, ctx) {
        const out = await respondToInvite(deps, requireCaller(ctx), Number(req.collectionId), req.inviterUserId, "accepted");
        return { invite: { invite: inviteMessage(out.row), username: out.username, collectionName: out.collectionName } };
      },
      async declineInvite(req, ctx) {
        const out = await respondToInvite(deps, requireCaller(ctx), Number(req.collectionId), req.inviterUserId, "declined");
        return { invite: { invite: inviteMessage(out.row), username: out.username, collectionName: out.collectionName } };
      },
      async listSentInvites(_req, ctx) {
        const sent = await listSentInvites(deps, requireCaller(ctx));
        return { invites: sent.map(sentInviteMessage) };
      },
      async listReceivedInvites(_req, ctx) {
        const received = await listReceivedInvites(deps, requireCaller(ctx));
        return { invites: received.map(receivedInviteMessage) };
      },
      async listCollaborators(req, ctx) {
        const list = await listCollaborators(deps, requireCaller(ctx), Number(req.collectionId));
        return { collaborators: list.map((c) => collaboratorMessage(c.row, c.username)) };
      },
      async revokeCollaborator(req, ctx) {
        const out = await revokeCollaborator(deps, requireCaller(ctx), Number(req.collectionId), req.userId);
        return { removed: true, previousStatus: out.previousStatus, collectionId: BigInt(out.collectionId), userId: out.userId };
      },
      async updateCollaboratorPermissions(req, ctx) {
        const row = await updateCollaboratorPermissions(deps, requireCaller(ctx), Number(req.collectionId), req.userId, {
          can_upload: req.canUpload, can_edit: req.canEdit, can_delete: req.canDelete,
        });
        const permissions = { canUpload: row.can_upload, canEdit: row.can_edit, canDelete: row.can_delete };
        return {
          collaborator: { collectionId: BigInt(row.collection_id), userId: row.user_id, status: row.status, ...permissions },
          permissions,
        };
      },
      async checkAccess(req) {
        return checkAccess(deps, req.userId, Number(req.collectionId), req.action);
      },
      async coverStoreKeys(req) {
        return coverStoreKeys(deps, req.storeKeys);
      },
    });
}
