/** The social schema behind a small interface: aliases, follows and profiles. */
import type { Knex } from "knex";

export interface AliasRow {
  id: string;
  user_id: string;
  handle: string;
  created_at: Date;
}

export interface FollowRow {
  follower_user_id: string;
  alias_id: string;
  owner_user_id: string;
  is_primary: boolean;
  created_at: Date;
}

export interface ProfileRow {
  user_id: string;
  display_name: string | null;
  bio: string | null;
  available_tags: string[];
  default_alias_id: string | null;
  updated_at: Date;
}

export interface ProfilePatch {
  display_name?: string | null;
  bio?: string | null;
  available_tags?: string[];
  default_alias_id?: string | null;
}

export interface BookmarkRow {
  id: string;
  user_id: string;
  title: string;
  collection_ids: string;
  source: string;
  created_at: Date;
}

export interface VocabularyRow {
  slug: string;
  label: string;
  category: string;
  sort_order: number;
}

export interface BugReportRow {
  id: string;
  reporter_user_id: string;
  category: string;
  related_op: string;
  title: string;
  expected: string | null;
  actual: string | null;
  error_code: string | null;
  severity: string | null;
  repro: unknown;
  notes: string | null;
  status: string;
  duplicate_of: string | null;
  report_count: number;
  created_at: Date;
  last_reported_at: Date;
}

export interface UiStateRow {
  user_id: string;
  collection_id: number | null;
  media_id: number | null;
  view_mode: string | null;
  source: string | null;
  browse_results: number[];
  browse_title: string | null;
  browse_source: string | null;
  version: number;
  updated_at: Date;
}

export type UiStatePatch = Partial<Omit<UiStateRow, "user_id" | "version" | "updated_at">>;

export type NewBugReport = Omit<BugReportRow, "id" | "status" | "duplicate_of" | "report_count" | "created_at" | "last_reported_at" | "repro">
  & { repro: string | null; duplicate_key: string };

export interface SocialStore {
  aliasesOf(userId: string): Promise<AliasRow[]>;
  aliasById(id: string): Promise<AliasRow | undefined>;
  aliasesByIds(ids: string[]): Promise<AliasRow[]>;
  aliasByHandle(handle: string): Promise<AliasRow | undefined>;
  /**
   * Inserts an alias while holding a per-user lock, after `check(current)` accepted the number
   * of aliases the user holds, so that concurrent creates cannot pass the plan cap together.
   * A handle already in use surfaces as PostgreSQL's unique violation.
   */
  insertAlias(userId: string, handle: string, check: (current: number) => void): Promise<AliasRow>;

  /** Adds a follow unless it exists; returns the stored row either way. */
  follow(f: Omit<FollowRow, "created_at">): Promise<FollowRow>;
  unfollow(followerUserId: string, aliasId: string): Promise<boolean>;
  followOf(followerUserId: string, aliasId: string): Promise<FollowRow | undefined>;
  /** The user's follows, newest first. */
  followingPage(followerUserId: string, limit: number, offset: number): Promise<{ rows: FollowRow[]; total: number }>;
  allFollowing(followerUserId: string): Promise<FollowRow[]>;
  /** Follows of any of the user's handles (primary username and aliases). */
  followersCount(ownerUserId: string): Promise<number>;
  followingCount(followerUserId: string): Promise<number>;

  profile(userId: string): Promise<ProfileRow | undefined>;
  updateProfile(userId: string, patch: ProfilePatch): Promise<ProfileRow>;

  insertBookmark(b: Omit<BookmarkRow, "id" | "created_at">): Promise<BookmarkRow>;
  /** Deletes the user's bookmark; false when the user has none with that id. */
  deleteBookmark(userId: string, id: string): Promise<boolean>;
  /** The user's bookmarks, newest first. */
  bookmarksPage(userId: string, limit: number, offset: number): Promise<{ rows: BookmarkRow[]; total: number }>;

  /** Active entries by sort_order. */
  activeVocabulary(): Promise<VocabularyRow[]>;

  /**
   * Records a report, or counts it on the open report with the same duplicate key; tells which,
   * in one statement (two agents reporting the same bug at once make one report with count 2).
   */
  recordBugReport(r: NewBugReport): Promise<{ row: BugReportRow; duplicate: boolean }>;
  bugReports(statuses: string[], limit: number): Promise<BugReportRow[]>;

  uiState(userId: string): Promise<UiStateRow | undefined>;
  /** Applies the patch to the user's state (creating it), version + 1; the state after. */
  patchUiState(userId: string, patch: UiStatePatch): Promise<UiStateRow>;
  /** Records a gateway's open sessions: adds or refreshes `open`, removes `closed`, and with `replace` drops its others. */
  syncPlayerSessions(gatewayId: string, open: Array<{ session_id: string; user_id: string }>, closed: string[], replace: boolean): Promise<void>;
  /** Sessions of the user reported within `freshMs`. */
  openPlayerSessions(userId: string, freshMs: number): Promise<number>;
}

export function createSocialStore(db: Knex | Knex.Transaction): SocialStore {
  return {
    async aliasesOf(userId) {
      return db<AliasRow>("aliases").where({ user_id: userId }).orderBy([{ column: "created_at" }, { column: "id" }]);
    },
    async aliasById(id) {
      return db<AliasRow>("aliases").where({ id }).first();
    },
    async aliasesByIds(ids) {
      return ids.length ? db<AliasRow>("aliases").whereIn("id", ids) : [];
    },
    async aliasByHandle(handle) {
      return db<AliasRow>("aliases").where({ handle }).first();
    },
    async insertAlias(userId, handle, check) {
      return db.transaction(async (trx) => {
        await trx.raw("SELECT pg_advisory_xact_lock(hashtext(?))", [`social.aliases:${userId}`]);
        const [{ n }] = await trx("aliases").where({ user_id: userId }).count<{ n: number }[]>({ n: "*" });
        check(Number(n));
        const [row] = await trx<AliasRow>("aliases").insert({ user_id: userId, handle }).returning("*");
        return row as AliasRow;
      });
    },

    async follow(f) {
      await db("follows").insert(f).onConflict(["follower_user_id", "alias_id"]).ignore();
      return (await db<FollowRow>("follows").where({ follower_user_id: f.follower_user_id, alias_id: f.alias_id }).first())!;
    },
    async unfollow(followerUserId, aliasId) {
      return (await db("follows").where({ follower_user_id: followerUserId, alias_id: aliasId }).delete()) > 0;
    },
    async followOf(followerUserId, aliasId) {
      return db<FollowRow>("follows").where({ follower_user_id: followerUserId, alias_id: aliasId }).first();
    },
    async followingPage(followerUserId, limit, offset) {
      const [rows, [{ n }]] = await Promise.all([
        db<FollowRow>("follows").where({ follower_user_id: followerUserId })
          .orderBy([{ column: "created_at", order: "desc" }, { column: "alias_id" }])
          .limit(limit).offset(offset),
        db("follows").where({ follower_user_id: followerUserId }).count<{ n: number }[]>({ n: "*" }),
      ]);
      return { rows, total: Number(n) };
    },
    async allFollowing(followerUserId) {
      return db<FollowRow>("follows").where({ follower_user_id: followerUserId })
        .orderBy([{ column: "created_at", order: "desc" }, { column: "alias_id" }]);
    },
    async followersCount(ownerUserId) {
      const [{ n }] = await db("follows").where({ owner_user_id: ownerUserId }).count<{ n: number }[]>({ n: "*" });
      return Number(n);
    },
    async followingCount(followerUserId) {
      const [{ n }] = await db("follows").where({ follower_user_id: followerUserId }).count<{ n: number }[]>({ n: "*" });
      return Number(n);
    },

    async profile(userId) {
      return db<ProfileRow>("profiles").where({ user_id: userId }).first();
    },
    async insertBookmark(b) {
      const [row] = await db<BookmarkRow>("bookmarks").insert(b).returning("*");
      return row as BookmarkRow;
    },
    async deleteBookmark(userId, id) {
      return (await db("bookmarks").where({ user_id: userId, id }).delete()) > 0;
    },
    async bookmarksPage(userId, limit, offset) {
      const [rows, [{ n }]] = await Promise.all([
        db<BookmarkRow>("bookmarks").where({ user_id: userId }).orderBy([{ column: "created_at", order: "desc" }, { column: "id" }]).limit(limit).offset(offset),
        db("bookmarks").where({ user_id: userId }).count<{ n: number }[]>({ n: "*" }),
      ]);
      return { rows, total: Number(n) };
    },

    async activeVocabulary() {
      return db("tag_vocabulary").where({ active: true }).orderBy([{ column: "sort_order" }, { column: "slug" }])
        .select("slug", "label", "category", "sort_order") as Promise<VocabularyRow[]>;
    },

    async recordBugReport(r) {
      const { rows } = await db.raw(
        `INSERT INTO bug_reports (reporter_user_id, category, related_op, title, expected, actual, error_code, severity, repro, notes, duplicate_key)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?)
         ON CONFLICT (duplicate_key) WHERE status IN ('new', 'triaged')
         DO UPDATE SET report_count = bug_reports.report_count + 1, last_reported_at = now()
         RETURNING *, (xmax <> 0) AS duplicate`,
        [r.reporter_user_id, r.category, r.related_op, r.title, r.expected, r.actual, r.error_code, r.severity, r.repro, r.notes, r.duplicate_key],
      );
      const { duplicate, duplicate_key: _k, ...row } = rows[0];
      return { row: row as BugReportRow, duplicate: Boolean(duplicate) };
    },
    async bugReports(statuses, limit) {
      return db<BugReportRow>("bug_reports").whereIn("status", statuses)
        .orderBy([{ column: "report_count", order: "desc" }, { column: "last_reported_at", order: "desc" }, { column: "id" }]).limit(limit);
    },

    async uiState(userId) {
      return db<UiStateRow>("ui_states").where({ user_id: userId }).first();
    },
    async patchUiState(userId, patch) {
      const [row] = await db("ui_states")
        .insert({ user_id: userId, ...patch, version: 1, updated_at: db.fn.now() })
        .onConflict("user_id")
        .merge({ ...patch, version: db.raw("ui_states.version + 1"), updated_at: db.fn.now() })
        .returning("*");
      return row as UiStateRow;
    },
    async syncPlayerSessions(gatewayId, open, closed, replace) {
      if (replace) {
        const keep = open.map((o) => o.session_id);
        const q = db("player_sessions").where({ gateway_id: gatewayId });
        await (keep.length ? q.whereNotIn("session_id", keep) : q).delete();
      }
      if (closed.length) await db("player_sessions").whereIn("session_id", closed).delete();
      if (open.length) {
        await db("player_sessions").insert(open.map((o) => ({ ...o, gateway_id: gatewayId, seen_at: db.fn.now() })))
          .onConflict("session_id").merge(["gateway_id", "seen_at"]);
      }
    },
    async openPlayerSessions(userId, freshMs) {
      const [{ n }] = await db("player_sessions").where({ user_id: userId })
        .where("seen_at", ">", db.raw("now() - (? || ' milliseconds')::interval", [String(freshMs)])).count<{ n: number }[]>({ n: "*" });
      return Number(n);
    },

    async updateProfile(userId, patch) {
      const set = { ...patch, updated_at: db.fn.now() };
      const [row] = await db("profiles")
        .insert({ user_id: userId, ...set })
        .onConflict("user_id")
        .merge(Object.keys(set))
        .returning("*");
      return row as ProfileRow;
    },
  };
}
