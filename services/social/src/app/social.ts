/**
 * The social service's use cases over its store and the user directory: each one applies the
 * domain rules and returns plain views that the RPC handlers put on the wire.
 */
import { AppError, isUniqueViolation, isUuid } from "@cms/platform";
import {
  assertBelowAliasCap, assertNotOwnHandle, assertNotReserved, followingPage, handleTaken, validateHandle,
  type PageRequest,
} from "../domain/aliases.js";
import { normaliseProfileTags, normaliseProfileText, parseDefaultAliasId } from "../domain/profile.js";
import type { AliasRow, FollowRow, ProfilePatch, SocialStore } from "../store/social-store.js";
import type { UserDirectory } from "../store/user-directory.js";

/** An alias as aliases.create returns it. */
export interface AliasView { id: string; handle: string; created_at: Date; is_primary: false }

/** One of a user's handles, as aliases.list and profile.get list them (primary first). */
export interface HandleView { id: string; handle: string; is_primary: boolean; is_default: boolean; created_at?: Date }

/** A followed handle, as aliases.follow and aliases.following.list return it. */
export interface FollowedView { id: string; handle: string | null; owner_user_id: string; is_primary: boolean; followed_at: Date }

export interface ProfileView {
  user_id: string;
  username: string;
  display_name: string | null;
  bio: string | null;
  available_tags: string[];
  aliases: HandleView[];
  default_alias_id: string | null;
  followers_count: number;
  following_count: number;
}

export interface ProfileUpdate {
  display_name?: string;
  bio?: string;
  /** JSON value as given: an array of tags. */
  available_tags?: unknown;
  /** JSON value as given: a uuid or null. */
  default_alias_id?: unknown;
}

export type PublishMode = "alias" | "default" | "username";

/** A handle somebody can follow: an alias, or a primary username (id = the user's id). */
interface Target { aliasId: string; ownerUserId: string; isPrimary: boolean; handle: string }

function aliasView(a: AliasRow): AliasView {
  return { id: a.id, handle: a.handle, created_at: a.created_at, is_primary: false };
}

export function createSocial(store: SocialStore, users: UserDirectory) {
  async function target(id: string): Promise<Target | undefined> {
    if (!isUuid(id)) return undefined;
    const key = id.toLowerCase();
    const alias = await store.aliasById(key);
    if (alias) return { aliasId: alias.id, ownerUserId: alias.user_id, isPrimary: false, handle: alias.handle };
    const user = await users.byId(key);
    if (user) return { aliasId: user.userId, ownerUserId: user.userId, isPrimary: true, handle: user.username };
    return undefined;
  }

  function unknownHandle(id: string): AppError {
    return new AppError("not_found", `No alias or user with id ${id} exists.`, { field: "alias_id" });
  }

  /** Follow rows with their current handles (a primary username comes from auth). */
  async function hydrate(rows: FollowRow[]): Promise<FollowedView[]> {
    const aliases = new Map((await store.aliasesByIds(rows.filter((r) => !r.is_primary).map((r) => r.alias_id))).map((a) => [a.id, a]));
    const owners = await users.byIds(rows.filter((r) => r.is_primary).map((r) => r.owner_user_id));
    return rows.map((r) => ({
      id: r.alias_id,
      handle: (r.is_primary ? owners.get(r.owner_user_id)?.username : aliases.get(r.alias_id)?.handle) ?? null,
      owner_user_id: r.owner_user_id,
      is_primary: r.is_primary,
      followed_at: r.created_at,
    }));
  }

  async function handlesOf(userId: string, username: string, defaultAliasId: string | null): Promise<HandleView[]> {
    const aliases = await store.aliasesOf(userId);
    const known = defaultAliasId && aliases.some((a) => a.id === defaultAliasId) ? defaultAliasId : null;
    return [
      { id: userId, handle: username, is_primary: true, is_default: known === null },
      ...aliases.map((a) => ({ id: a.id, handle: a.handle, is_primary: false, is_default: a.id === known, created_at: a.created_at })),
    ];
  }

  async function profileView(userId: string, username: string): Promise<ProfileView> {
    const [row, followers, following] = await Promise.all([
      store.profile(userId), store.followersCount(userId), store.followingCount(userId),
    ]);
    const defaultAliasId = row?.default_alias_id ?? null;
    return {
      user_id: userId,
      username,
      display_name: row?.display_name ?? null,
      bio: row?.bio ?? null,
      available_tags: row?.available_tags ?? [],
      aliases: await handlesOf(userId, username, defaultAliasId),
      default_alias_id: defaultAliasId,
      followers_count: followers,
      following_count: following,
    };
  }

  return {
    /** aliases.create: reserved names, the plan cap, then uniqueness against aliases and usernames. */
    async createAlias(caller: { userId: string; plan: string }, rawHandle: string): Promise<AliasView> {
      const handle = validateHandle(rawHandle);
      assertNotReserved(handle);
      if (await store.aliasByHandle(handle)) throw handleTaken(handle);
      if (await users.byUsername(handle)) throw handleTaken(handle);
      try {
        return aliasView(await store.insertAlias(caller.userId, handle, (current) => assertBelowAliasCap(caller.plan, current)));
      } catch (err) {
        if (isUniqueViolation(err)) throw handleTaken(handle);
        throw err;
      }
    },

    /** aliases.list: the primary username first, then the aliases by creation time. */
    async listHandles(userId: string, username: string): Promise<HandleView[]> {
      const profile = await store.profile(userId);
      return handlesOf(userId, username, profile?.default_alias_id ?? null);
    },

    /** aliases.follow: idempotent; the stored follow time is kept on a repeat. */
    async follow(callerId: string, aliasId: string): Promise<FollowedView> {
      const t = await target(aliasId);
      if (!t) throw unknownHandle(aliasId);
      assertNotOwnHandle(callerId, t.ownerUserId);
      const row = await store.follow({ follower_user_id: callerId, alias_id: t.aliasId, owner_user_id: t.ownerUserId, is_primary: t.isPrimary });
      return { id: t.aliasId, handle: t.handle, owner_user_id: t.ownerUserId, is_primary: t.isPrimary, followed_at: row.created_at };
    },

    /** aliases.unfollow: true when a follow was removed, false when there was none. */
    async unfollow(callerId: string, aliasId: string): Promise<boolean> {
      const key = isUuid(aliasId) ? aliasId.toLowerCase() : undefined;
      if (key && await store.unfollow(callerId, key)) return true;
      if (!(await target(aliasId))) throw unknownHandle(aliasId);
      return false;
    },

    /** aliases.following.list: newest follows first; `paged` tells whether the request named limit or offset. */
    async following(callerId: string, req: PageRequest) {
      const page = followingPage(req);
      const { rows, total } = await store.followingPage(callerId, page.limit, page.offset);
      return { aliases: await hydrate(rows), page, total };
    },

    async getProfile(userId: string, username: string): Promise<ProfileView> {
      return profileView(userId, username);
    },

    /** profile.update: only the fields given change; default_alias_id must be one of the caller's aliases. */
    async updateProfile(userId: string, username: string, input: ProfileUpdate): Promise<ProfileView> {
      const patch: ProfilePatch = {};
      if (input.display_name !== undefined) patch.display_name = normaliseProfileText(input.display_name);
      if (input.bio !== undefined) patch.bio = normaliseProfileText(input.bio);
      if (input.available_tags !== undefined) patch.available_tags = normaliseProfileTags(input.available_tags);
      if (input.default_alias_id !== undefined) {
        const id = parseDefaultAliasId(input.default_alias_id);
        if (id !== null) {
          const alias = await store.aliasById(id);
          if (!alias || alias.user_id !== userId) {
            throw new AppError("not_found", `You have no alias with id ${id}.`, { field: "default_alias_id" });
          }
        }
        patch.default_alias_id = id;
      }
      if (Object.keys(patch).length) await store.updateProfile(userId, patch);
      return profileView(userId, username);
    },

    /** ResolvePublishHandle: the handle a collection gets when published. */
    async resolvePublishHandle(userId: string, mode: PublishMode, aliasId: string): Promise<{ handle: string; aliasId: string }> {
      const primary = async () => {
        const user = await users.byId(userId);
        if (!user) throw new AppError("not_found", `No user with id ${userId} exists.`, { field: "user_id" });
        return { handle: user.username, aliasId: "" };
      };
      if (mode === "username") return primary();
      if (mode === "default") {
        const id = (await store.profile(userId))?.default_alias_id;
        const alias = id ? await store.aliasById(id) : undefined;
        if (alias && alias.user_id === userId) return { handle: alias.handle, aliasId: alias.id };
        return primary();
      }
      if (!aliasId) throw new AppError("invalid_request", "alias_id is required when mode is \"alias\".", { field: "alias_id" });
      if (aliasId.toLowerCase() === userId.toLowerCase()) return primary();
      const t = await target(aliasId);
      if (!t) throw new AppError("not_found", `No alias with id ${aliasId} exists.`, { field: "alias_id" });
      if (t.ownerUserId !== userId) throw new AppError("forbidden", `The alias ${aliasId} belongs to another user.`, { field: "alias_id" });
      return { handle: t.handle, aliasId: t.isPrimary ? "" : t.aliasId };
    },

    /** ResolveHandle: aliases first, then primary usernames. */
    async resolveHandle(rawHandle: string): Promise<{ found: boolean; userId: string; aliasId: string }> {
      const handle = rawHandle.toLowerCase();
      const alias = await store.aliasByHandle(handle);
      if (alias) return { found: true, userId: alias.user_id, aliasId: alias.id };
      const user = await users.byUsername(handle);
      if (user) return { found: true, userId: user.userId, aliasId: "" };
      return { found: false, userId: "", aliasId: "" };
    },

    /** ListFollowedHandles: every handle the user follows (for the "following" search scope). */
    async followedHandles(userId: string): Promise<FollowedView[]> {
      return hydrate(await store.allFollowing(userId));
    },
  };
}

export type Social = ReturnType<typeof createSocial>;
