/**
 * Thin Connect handlers of SocialService: decode, call the use case, shape the contract's body.
 * Operations without a handler here (bookmarks, tag vocabulary, UI state, player, bugs) answer
 * Connect "unimplemented", which the gateway reports as 501 not_implemented.
 */
import type { ConnectRouter } from "@connectrpc/connect";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import { requireCaller, result } from "@cms/platform";
import type { PublishMode, Social } from "../social.js";

/** A google.protobuf.Value field as plain JSON; undefined when the request omitted it. */
function jsonOf(v: Value | undefined): unknown {
  return v === undefined ? undefined : toJson(ValueSchema, v);
}

export function socialRoutes(social: Social) {
  return (router: ConnectRouter) =>
    router.service(SocialService, {
      async createAlias(req, ctx) {
        const caller = requireCaller(ctx);
        return result({ alias: await social.createAlias(caller, req.handle) });
      },
      async listAliases(_req, ctx) {
        const caller = requireCaller(ctx);
        return result({ aliases: await social.listHandles(caller.userId, caller.username) });
      },
      async followAlias(req, ctx) {
        const caller = requireCaller(ctx);
        return result({ followed: true, alias: await social.follow(caller.userId, req.aliasId) });
      },
      async unfollowAlias(req, ctx) {
        const caller = requireCaller(ctx);
        return result({ unfollowed: await social.unfollow(caller.userId, req.aliasId) });
      },
      async listFollowing(req, ctx) {
        const caller = requireCaller(ctx);
        const { aliases, page, total } = await social.following(caller.userId, { limit: req.limit, offset: req.offset });
        return result({ aliases, pagination: page.explicit ? { limit: page.limit, offset: page.offset, total } : undefined });
      },
      async getProfile(_req, ctx) {
        const caller = requireCaller(ctx);
        return result({ profile: await social.getProfile(caller.userId, caller.username) });
      },
      async updateProfile(req, ctx) {
        const caller = requireCaller(ctx);
        const profile = await social.updateProfile(caller.userId, caller.username, {
          display_name: req.displayName,
          bio: req.bio,
          available_tags: jsonOf(req.availableTags),
          default_alias_id: jsonOf(req.defaultAliasId),
        });
        return result({ profile });
      },

      // Internal RPCs (no public op): typed messages.
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
