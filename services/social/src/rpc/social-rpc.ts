/**
 * Thin Connect handlers of SocialService: decode once, call the use case, encode its result into
 * the typed response messages (./encode.ts).
 */
import type { ConnectRouter } from "@connectrpc/connect";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import { defaulted, jsonOf, requireCaller } from "@cms/platform";
import type { PublishMode, Social } from "../app/social.js";
import type { Bookmarks } from "../app/bookmarks.js";
import type { Player } from "../app/player.js";
import type { BugReports } from "../app/bug-reports.js";
import type { SocialStore } from "../store/social-store.js";
import {
  aliasMessage, uiStateMessage, bookmarkMessage, bugReportMessage, followedAliasMessage, followingPagination, handleMessage, profileMessage, vocabularyMessage,
} from "./encode.js";

/** An optional int64 request field as a number. */
const idOf = (v: bigint | undefined) => (v === undefined ? undefined : Number(v));

export interface SocialApp {
  social: Social;
  player: Player;
  bookmarks: Bookmarks;
  bugs: BugReports;
  vocabulary: Pick<SocialStore, "activeVocabulary">;
}

export function socialRoutes({ social, player, bookmarks, bugs, vocabulary }: SocialApp) {
  return (router: ConnectRouter) =>
    router.service(SocialService, {
      async createAlias(req, ctx) {
        const caller = requireCaller(ctx);
        return { alias: aliasMessage(await social.createAlias(caller, req.handle)) };
      },
      async listAliases(_req, ctx) {
        const caller = requireCaller(ctx);
        return { aliases: (await social.listHandles(caller.userId, caller.username)).map(handleMessage) };
      },
      async followAlias(req, ctx) {
        const caller = requireCaller(ctx);
        return { followed: true, alias: followedAliasMessage(await social.follow(caller.userId, req.aliasId)) };
      },
      async unfollowAlias(req, ctx) {
        const caller = requireCaller(ctx);
        return { unfollowed: await social.unfollow(caller.userId, req.aliasId) };
      },
      async listFollowing(req, ctx) {
        const caller = requireCaller(ctx);
        const { aliases, page, total } = await social.following(caller.userId, { limit: req.limit, offset: req.offset });
        return { aliases: aliases.map(followedAliasMessage), pagination: followingPagination(page, total) };
      },
      async getProfile(_req, ctx) {
        const caller = requireCaller(ctx);
        return { profile: profileMessage(await social.getProfile(caller.userId, caller.username)) };
      },
      async updateProfile(req, ctx) {
        const caller = requireCaller(ctx);
        const profile = await social.updateProfile(caller.userId, caller.username, {
          display_name: req.displayName,
          bio: req.bio,
          available_tags: jsonOf(req.availableTags),
          default_alias_id: jsonOf(req.defaultAliasId),
        });
        return { profile: profileMessage(profile) };
      },

      async createBookmark(req, ctx) {
        const caller = requireCaller(ctx);
        const { source } = defaulted(req, "source");
        return { bookmark: bookmarkMessage(await bookmarks.create(caller.userId, { title: req.title, collectionIds: req.collectionIds, source })) };
      },
      async deleteBookmark(req, ctx) {
        await bookmarks.delete(requireCaller(ctx).userId, req.bookmarkId);
        return { deleted: true, bookmarkId: req.bookmarkId };
      },
      async listBookmarks(req, ctx) {
        const { limit, offset } = defaulted(req, "limit", "offset");
        const { rows, total, page } = await bookmarks.list(requireCaller(ctx).userId, { limit, offset });
        return { bookmarks: rows.map(bookmarkMessage), pagination: { limit: page.limit, offset: page.offset, total: BigInt(total) } };
      },
      async getTagVocabulary() {
        return { tags: (await vocabulary.activeVocabulary()).map(vocabularyMessage) };
      },
      async reportBug(req, ctx) {
        const { row, duplicate } = await bugs.report(requireCaller(ctx), {
          category: req.category, relatedOp: req.relatedOp, title: req.title, expected: req.expected, actual: req.actual, errorCode: req.errorCode,
          severity: req.severity, repro: jsonOf(req.repro), notes: req.notes,
        });
        return { reportId: row.id, status: duplicate ? "duplicate" : "received", duplicateOf: duplicate ? row.id : undefined, reportCount: row.report_count };
      },
      async listBugs(req, ctx) {
        const { status, limit } = defaulted(req, "status", "limit");
        const rows = await bugs.list(requireCaller(ctx), status, limit);
        return { reports: rows.map(bugReportMessage), count: rows.length };
      },

      async getUiState(_req, ctx) {
        return { uiState: uiStateMessage(await player.getUiState(requireCaller(ctx))) };
      },
      async setUiState(req, ctx) {
        const browse = jsonOf(req.browseResults) as number[] | undefined;
        const { state, deliveredTo } = await player.setUiState(requireCaller(ctx), {
          collectionId: idOf(req.collectionId), mediaId: idOf(req.mediaId), viewMode: req.viewMode, source: req.source,
          browseResults: browse, browseTitle: req.browseTitle, browseSource: req.browseSource,
        });
        return { uiState: uiStateMessage(state), deliveredTo };
      },
      async playerCommand(req, ctx) {
        const { commandId, deliveredTo } = await player.command(requireCaller(ctx), {
          command: req.command, positionMs: idOf(req.positionMs), collectionId: idOf(req.collectionId), mediaId: idOf(req.mediaId), on: req.on,
        });
        return { command: req.command, commandId, deliveredTo };
      },

      // Internal RPCs (no public op).
      async syncPlayerSessions(req) {
        await player.syncSessions(req.gatewayId, req.sessions.map((s) => ({ session_id: s.sessionId, user_id: s.userId })), req.closed, req.replace);
        return {};
      },
      async resolvePublishHandle(req) {
        return social.resolvePublishHandle(req.userId, req.mode as PublishMode, req.aliasId);
      },
      async resolveHandle(req) {
        return social.resolveHandle(req.handle);
      },
      async listFollowedHandles(req) {
        const handles = await social.followedHandles(req.userId);
        return {
          handles: handles.map((h) => ({ aliasId: h.id, ownerUserId: h.owner_user_id, isPrimary: h.is_primary, handle: h.handle ?? "" })),
        };
      },
    });
}
