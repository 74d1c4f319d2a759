/**
 * Thin Connect handlers of CollectionsService: decode the request once (defaults are already
 * applied; read with defaulted()), call one use case, encode its result (./encode.ts).
 */
import type { ConnectRouter } from "@connectrpc/connect";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { callerOf, defaulted, jsonOf, requireCaller } from "@cms/platform";
import type { AccessLevel, AliasChoice } from "../domain/rules.js";
import { shareUrl } from "../domain/collection-json.js";
import type { CollectionsApp } from "../app/collections-app.js";
import type { AccessAction } from "../app/internal.js";
import type { Scope, SortBy } from "../app/ports.js";
import {
  collaboratorMessage, collectionMessage, deleteResponse, hitMessage, inviteMessage, listResponse, paginationMessage, restoreResponse,
  receivedInviteMessage, searchResponse, sentInviteMessage, uploadTargetsMessage,
} from "./encode.js";
import { idOf, optionalIdOf, optionalWireId, wireId } from "./ids.js";

const level = (v: string | undefined) => v as AccessLevel | undefined;

function aliasChoice(v: unknown): AliasChoice {
  if (v === undefined) return { kind: "omitted" };
  if (v === null) return { kind: "username" };
  return { kind: "alias", aliasId: String(v) };
}

/** The routes of CollectionsService; `appUrl` is read per answer (known once the gateway listens). */
export function collectionsRoutes(app: CollectionsApp, appUrl: () => string) {
  return (router: ConnectRouter) =>
    router.service(CollectionsService, {
      async createCollection(req, ctx) {
        const r = defaulted(req, "isNsfw", "searchable");
        const out = await app.createCollection(requireCaller(ctx), {
          name: r.name,
          description: r.description,
          thumbnailUrl: r.thumbnailUrl,
          isNsfw: r.isNsfw,
          shareAccessLevel: level(r.shareAccessLevel),
          tags: r.tags,
          searchable: r.searchable,
          aliasId: r.aliasId,
          playbackPrefs: jsonOf(r.playbackPrefs),
          parentId: optionalIdOf(r.parentCollectionId),
          linkPosition: r.linkPosition,
          linkDescription: r.linkDescription,
        });
        return { collection: collectionMessage(out.row, appUrl()), linkMediaId: optionalWireId(out.linkMediaId) };
      },
      async updateCollection(req, ctx) {
        const row = await app.updateCollection(requireCaller(ctx), idOf(req.collectionId), {
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
        return { collection: collectionMessage(row, appUrl()) };
      },
      async getCollection(req, ctx) {
        const { row, perms } = await app.getCollection(requireCaller(ctx), idOf(req.collectionId));
        return { collection: collectionMessage(row, appUrl(), perms) };
      },
      async getCollectionBySlug(req, ctx) {
        return { collection: collectionMessage(await app.getBySlug(callerOf(ctx), req.handle, req.slug), appUrl()) };
      },
      async batchGetCollections(req, ctx) {
        const r = defaulted(req, "includeArchived");
        const { rows, missingIds } = await app.batchGet(requireCaller(ctx), r.ids.map(idOf), r.includeArchived);
        return { collections: rows.map((row) => collectionMessage(row, appUrl())), missingIds: missingIds.map(wireId) };
      },
      async listCollections(req, ctx) {
        const r = defaulted(req, "includeArchived", "includeSubcollections", "limit", "offset");
        const list = await app.listCollections(requireCaller(ctx), {
          nameContains: r.nameContains,
          fields: jsonOf(r.fields),
          tag: r.tag,
          isNsfw: r.isNsfw,
          includeArchived: r.includeArchived,
          parentId: optionalIdOf(r.parentCollectionId),
          includeSubcollections: r.includeSubcollections,
          limit: r.limit,
          offset: r.offset,
        });
        return listResponse(list, appUrl());
      },
      async searchCollections(req, ctx) {
        const r = defaulted(req, "limit", "offset");
        const res = await app.searchCollections(callerOf(ctx), { query: r.query, scope: r.scope as Scope[], limit: r.limit, offset: r.offset });
        return searchResponse(res, appUrl());
      },
      async browseCollections(req, ctx) {
        const r = defaulted(req, "sortBy", "limit", "offset");
        const res = await app.browseCollections(callerOf(ctx), { scope: r.scope as Scope[], tags: r.tags, sortBy: r.sortBy as SortBy, limit: r.limit, offset: r.offset });
        return { collections: res.hits.map((h) => hitMessage(h, appUrl())), scope: res.scope, sortBy: res.sortBy, pagination: paginationMessage(res.page) };
      },
      async listLikedCollections(req, ctx) {
        const r = defaulted(req, "limit", "offset");
        const res = await app.likedCollections(requireCaller(ctx), r.limit, r.offset);
        return { collections: res.hits.map((h) => hitMessage(h, appUrl())), pagination: paginationMessage(res.page) };
      },
      async likeCollection(req, ctx) {
        const out = await app.setLike(requireCaller(ctx), idOf(req.collectionId), true);
        return { collectionId: wireId(out.collectionId), liked: out.liked, changed: out.changed, stats: { likes: BigInt(out.likes) } };
      },
      async unlikeCollection(req, ctx) {
        const out = await app.setLike(requireCaller(ctx), idOf(req.collectionId), false);
        return { collectionId: wireId(out.collectionId), liked: out.liked, changed: out.changed, stats: { likes: BigInt(out.likes) } };
      },
      async getCollectionStats(req, ctx) {
        const s = await app.statsOf(requireCaller(ctx), idOf(req.collectionId));
        return { collectionId: wireId(s.collectionId), stats: { likes: BigInt(s.likes), views: BigInt(s.views) } };
      },
      async getShareUrl(req, ctx) {
        return app.shareUrlOf(requireCaller(ctx), idOf(req.collectionId));
      },
      async archiveCollection(req, ctx) {
        return { collection: collectionMessage(await app.setArchived(requireCaller(ctx), idOf(req.collectionId), true), appUrl()) };
      },
      async unarchiveCollection(req, ctx) {
        return { collection: collectionMessage(await app.setArchived(requireCaller(ctx), idOf(req.collectionId), false), appUrl()) };
      },
      async deleteCollection(req, ctx) {
        const r = defaulted(req, "mode", "cascadeMedia", "confirm", "dryRun");
        return deleteResponse(await app.deleteCollection(requireCaller(ctx), idOf(r.collectionId), {
          mode: r.mode as "soft" | "hard", cascadeMedia: r.cascadeMedia, confirm: r.confirm, dryRun: r.dryRun,
        }));
      },
      async restoreCollection(req, ctx) {
        const r = defaulted(req, "dryRun");
        return restoreResponse(await app.restoreCollection(requireCaller(ctx), idOf(r.collectionId), { dryRun: r.dryRun }), appUrl());
      },
      async exportCollection(req, ctx) {
        const r = defaulted(req, "format", "includeArchived");
        const out = await app.exportCollection(requireCaller(ctx), idOf(r.collectionId), r.format as "json" | "csv", r.includeArchived);
        return out.format === "csv"
          ? { format: out.format, body: { case: "csv", value: { content: out.content, columns: out.columns } } }
          : { format: out.format, body: { case: "json", value: { collection: collectionMessage(out.row, appUrl()), media: out.media } } };
      },
      async moveCollection(req, ctx) {
        const dest = jsonOf(req.parentCollectionId);
        const out = await app.moveCollection(requireCaller(ctx), idOf(req.collectionId), dest === undefined || dest === null ? null : Number(dest));
        return {
          collection: collectionMessage(out.row, appUrl()),
          noop: out.noop,
          removedLinkMediaIds: out.removedLinkMediaIds.map(wireId),
          linkMediaId: optionalWireId(out.linkMediaId),
        };
      },
      async reorderCollections(req, ctx) {
        const out = await app.reorderCollections(requireCaller(ctx), req.orderedIds.map(idOf));
        return { collections: out.positions.map((p) => ({ id: wireId(p.id), position: p.position })), reordered: out.reordered };
      },
      async publishCollection(req, ctx) {
        const r = defaulted(req, "searchable");
        const out = await app.publishCollection(requireCaller(ctx), idOf(r.collectionId), {
          slug: r.slug, shareAccessLevel: level(r.shareAccessLevel), searchable: r.searchable, openFullscreen: r.openFullscreen, alias: aliasChoice(jsonOf(r.aliasId)),
        });
        return {
          collection: collectionMessage(out.row, appUrl()),
          shareAccessLevelDefaulted: out.shareAccessLevelDefaulted,
          url: shareUrl(appUrl(), out.row) ?? undefined,
        };
      },
      async unpublishCollection(req, ctx) {
        return { collection: collectionMessage(await app.unpublishCollection(requireCaller(ctx), idOf(req.collectionId), level(req.shareAccessLevel)), appUrl()) };
      },
      async getCollectionUploadUrl(req, ctx) {
        const out = await app.coverUploadUrl(requireCaller(ctx), idOf(req.collectionId), req.contentType, req.contentLength, req.filename);
        return { targets: uploadTargetsMessage(out.targets), nextStep: out.nextStep };
      },
      async inviteCollaborator(req, ctx) {
        const r = defaulted(req, "canUpload", "canEdit", "canDelete");
        const out = await app.inviteCollaborator(requireCaller(ctx), idOf(r.collectionId), r.username, {
          can_upload: r.canUpload, can_edit: r.canEdit, can_delete: r.canDelete,
        });
        return { invite: { invite: inviteMessage(out.row), username: out.username } };
      },
      async acceptInvite(req, ctx) {
        const out = await app.respondToInvite(requireCaller(ctx), idOf(req.collectionId), req.inviterUserId, "accepted");
        return { invite: { invite: inviteMessage(out.row), username: out.username, collectionName: out.collectionName } };
      },
      async declineInvite(req, ctx) {
        const out = await app.respondToInvite(requireCaller(ctx), idOf(req.collectionId), req.inviterUserId, "declined");
        return { invite: { invite: inviteMessage(out.row), username: out.username, collectionName: out.collectionName } };
      },
      async listSentInvites(_req, ctx) {
        return { invites: (await app.listSentInvites(requireCaller(ctx))).map(sentInviteMessage) };
      },
      async listReceivedInvites(_req, ctx) {
        return { invites: (await app.listReceivedInvites(requireCaller(ctx))).map(receivedInviteMessage) };
      },
      async listCollaborators(req, ctx) {
        const list = await app.listCollaborators(requireCaller(ctx), idOf(req.collectionId));
        return { collaborators: list.map((c) => collaboratorMessage(c.row, c.username)) };
      },
      async revokeCollaborator(req, ctx) {
        const out = await app.revokeCollaborator(requireCaller(ctx), idOf(req.collectionId), req.userId);
        return { removed: true, previousStatus: out.previousStatus, collectionId: wireId(out.collectionId), userId: out.userId };
      },
      async updateCollaboratorPermissions(req, ctx) {
        const row = await app.updateCollaboratorPermissions(requireCaller(ctx), idOf(req.collectionId), req.userId, {
          can_upload: req.canUpload, can_edit: req.canEdit, can_delete: req.canDelete,
        });
        const permissions = { canUpload: row.can_upload, canEdit: row.can_edit, canDelete: row.can_delete };
        return {
          collaborator: { collectionId: wireId(row.collection_id), userId: row.user_id, status: row.status, ...permissions },
          permissions,
        };
      },
      async checkAccess(req) {
        return app.checkAccess(req.userId, idOf(req.collectionId), req.action as AccessAction);
      },
      async coverStoreKeys(req) {
        return { storeKeys: await app.coverStoreKeys(req.storeKeys) };
      },
      async getPlayerPage(req) {
        const page = await app.playerPage(req.viewerUserId || undefined, req.handle, req.slug);
        return {
          collection: collectionMessage(page.row, appUrl()),
          viewerIsOwner: page.viewerIsOwner,
          children: page.children.map(({ row, shareUrl }) => ({
            id: BigInt(row.id), name: row.name, shareUrl, coverThumbnailUrl: row.cover_thumbnail_url ?? row.thumbnail_url ?? undefined, isNsfw: row.is_nsfw,
          })),
        };
      },
    });
}
