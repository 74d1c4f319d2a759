/**
 * The encoders of the social responses, rendered by the gateway's renderer: the JSON keys each
 * shape has (an alias always has created_at, the primary username never; a followed handle that
 * no longer exists is null) and the following.list pagination block only when paging was asked.
 */
import test from "ava";
import { create } from "@bufbuild/protobuf";
import {
  CreateAliasResponseSchema, FollowAliasResponseSchema, GetProfileResponseSchema, ListAliasesResponseSchema, ListFollowingResponseSchema,
} from "@cms/contracts/social/v1/social_pb";
import { renderObject } from "@cms/gateway/render";
import { aliasMessage, followedAliasMessage, followingPagination, handleMessage, profileMessage } from "../src/rpc/encode.js";
import { followingPage } from "../src/domain/aliases.js";

const at = new Date("2026-01-02T03:04:05.678Z");
const USER = "11111111-1111-4111-8111-111111111111";
const ALIAS = "22222222-2222-4222-8222-222222222222";

test("aliases.create: id, handle, created_at, is_primary in that order", (t) => {
  const res = create(CreateAliasResponseSchema, { alias: aliasMessage({ id: ALIAS, handle: "photo", created_at: at, is_primary: false }) });
  const json = renderObject(CreateAliasResponseSchema, res);
  t.deepEqual(json, { alias: { id: ALIAS, handle: "photo", created_at: "2026-01-02T03:04:05.678Z", is_primary: false } });
  t.deepEqual(Object.keys(json.alias as object), ["id", "handle", "created_at", "is_primary"]);
});

test("aliases.list: the primary username has no created_at key, aliases have one", (t) => {
  const res = create(ListAliasesResponseSchema, {
    aliases: [
      { id: USER, handle: "alice", is_primary: true, is_default: true },
      { id: ALIAS, handle: "photo", is_primary: false, is_default: false, created_at: at },
    ].map(handleMessage),
  });
  const json = renderObject(ListAliasesResponseSchema, res);
  t.deepEqual(JSON.parse(JSON.stringify(json)), {
    aliases: [
      { id: USER, handle: "alice", is_primary: true, is_default: true },
      { id: ALIAS, handle: "photo", is_primary: false, is_default: false, created_at: "2026-01-02T03:04:05.678Z" },
    ],
  });
  t.false("created_at" in (json.aliases as object[])[0]!);
});

test("a followed handle that no longer exists is null, not absent", (t) => {
  const gone = followedAliasMessage({ id: ALIAS, handle: null, owner_user_id: USER, is_primary: false, followed_at: at });
  const json = renderObject(FollowAliasResponseSchema, create(FollowAliasResponseSchema, { followed: true, alias: gone }));
  t.deepEqual(json, {
    followed: true,
    alias: { id: ALIAS, handle: null, owner_user_id: USER, is_primary: false, followed_at: "2026-01-02T03:04:05.678Z" },
  });
});

test("aliases.following.list: pagination only when the request named limit or offset", (t) => {
  const render = (req: { limit?: number; offset?: number }, total: number) =>
    renderObject(ListFollowingResponseSchema, create(ListFollowingResponseSchema, { aliases: [], pagination: followingPagination(followingPage(req), total) }));
  t.deepEqual(render({}, 3), { aliases: [] });
  t.deepEqual(render({ limit: 1 }, 3), { aliases: [], pagination: { limit: 1, offset: 0, total: 3 } });
  t.deepEqual(render({ offset: 0 }, 3), { aliases: [], pagination: { limit: 100, offset: 0, total: 3 } });
});

test("profile: empty text fields and no default alias are null; counts are numbers", (t) => {
  const profile = profileMessage({
    user_id: USER, username: "alice", display_name: null, bio: null, available_tags: [],
    aliases: [{ id: USER, handle: "alice", is_primary: true, is_default: true }],
    default_alias_id: null, followers_count: 0, following_count: 2,
  });
  const json = renderObject(GetProfileResponseSchema, create(GetProfileResponseSchema, { profile }));
  t.deepEqual(json, {
    profile: {
      user_id: USER, username: "alice", display_name: null, bio: null, available_tags: [],
      aliases: [{ id: USER, handle: "alice", is_primary: true, is_default: true }],
      default_alias_id: null, followers_count: 0, following_count: 2,
    },
  });
  t.deepEqual(Object.keys(json.profile as object), [
    "user_id", "username", "display_name", "bio", "available_tags", "aliases", "default_alias_id", "followers_count", "following_count",
  ]);
});
