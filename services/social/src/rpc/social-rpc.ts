/**
 * Thin Connect handlers of SocialService: decode, call the use case, encode its views into the
 * typed response messages (./encode.ts).
 * Operations without a handler here (bookmarks, tag vocabulary, UI state, player, bugs) answer
 * Connect "unimplemented", which the gateway reports as 501 not_implemented.
 */
import type { ConnectRouter } from "@connectrpc/connect";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import { jsonOf, requireCaller } from "@cms/platform";
import type { PublishMode, Social } from "../social.js";
import { aliasMessage, followedAliasMessage, followingPagination, handleMessage, profileMessage } from "./encode.js";

export function socialRoutes(social: Social) {
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

      // Internal RPCs (no public op).
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
