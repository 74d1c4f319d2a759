/**
 * The social service's views as the typed messages of the contract (social.v1 resources). The
 * shapes differ on purpose and the encoders keep them: an Alias always has created_at, a Handle
 * has created_at only for aliases (the primary username has no such key), a FollowedAlias has a
 * handle that is null when the followed alias or user no longer exists.
 */
import { fromJson, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { timestampOf } from "@cms/platform";
import type { PaginationSchema } from "@cms/contracts/common/v1/common_pb";
import type {
  AliasSchema, BookmarkSchema, BugReportSchema, FollowedAliasSchema, HandleSchema, ProfileSchema, TagVocabularyEntrySchema, UiStateSchema,
} from "@cms/contracts/social/v1/resources_pb";
import type { BookmarkRow, BugReportRow, UiStateRow, VocabularyRow } from "../store/social-store.js";
import type { Page } from "../domain/aliases.js";
import type { AliasView, FollowedView, HandleView, ProfileView } from "../app/social.js";

const opt = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

export function aliasMessage(a: AliasView): MessageInitShape<typeof AliasSchema> {
  return { id: a.id, handle: a.handle, createdAt: timestampFromDate(a.created_at), isPrimary: a.is_primary };
}

export function handleMessage(h: HandleView): MessageInitShape<typeof HandleSchema> {
  return {
    id: h.id,
    handle: h.handle,
    isPrimary: h.is_primary,
    isDefault: h.is_default,
    createdAt: h.created_at ? timestampFromDate(h.created_at) : undefined,
  };
}

export function followedAliasMessage(f: FollowedView): MessageInitShape<typeof FollowedAliasSchema> {
  return {
    id: f.id,
    handle: opt(f.handle),
    ownerUserId: f.owner_user_id,
    isPrimary: f.is_primary,
    followedAt: timestampFromDate(f.followed_at),
  };
}

export function profileMessage(p: ProfileView): MessageInitShape<typeof ProfileSchema> {
  return {
    userId: p.user_id,
    username: p.username,
    displayName: opt(p.display_name),
    bio: opt(p.bio),
    availableTags: p.available_tags,
    aliases: p.aliases.map(handleMessage),
    defaultAliasId: opt(p.default_alias_id),
    followersCount: BigInt(p.followers_count),
    followingCount: BigInt(p.following_count),
  };
}

/** aliases.following.list pages only when the request named limit or offset. */
export function followingPagination(page: Page, total: number): MessageInitShape<typeof PaginationSchema> | undefined {
  return page.explicit ? { limit: page.limit, offset: page.offset, total: BigInt(total) } : undefined;
}

export function bookmarkMessage(b: BookmarkRow): MessageInitShape<typeof BookmarkSchema> {
  return { id: b.id, title: b.title, collectionIds: b.collection_ids, source: b.source, createdAt: timestampOf(b.created_at) };
}

export function vocabularyMessage(v: VocabularyRow): MessageInitShape<typeof TagVocabularyEntrySchema> {
  return { slug: v.slug, label: v.label, category: v.category, sortOrder: v.sort_order };
}

export function bugReportMessage(r: BugReportRow): MessageInitShape<typeof BugReportSchema> {
  return {
    reportId: r.id, category: r.category, relatedOp: r.related_op, title: r.title, expected: opt(r.expected), actual: opt(r.actual),
    errorCode: opt(r.error_code), severity: opt(r.severity), repro: r.repro === null || r.repro === undefined ? undefined : fromJson(ValueSchema, r.repro as JsonValue),
    notes: opt(r.notes), status: r.status, duplicateOf: opt(r.duplicate_of), reportCount: r.report_count, reporterUserId: r.reporter_user_id,
    createdAt: timestampOf(r.created_at), lastReportedAt: timestampOf(r.last_reported_at),
  };
}

export function uiStateMessage(s: UiStateRow): MessageInitShape<typeof UiStateSchema> {
  return {
    collectionId: s.collection_id === null ? undefined : BigInt(s.collection_id), mediaId: s.media_id === null ? undefined : BigInt(s.media_id),
    viewMode: opt(s.view_mode), source: opt(s.source), browseResults: s.browse_results.map((id) => BigInt(id)), browseTitle: opt(s.browse_title),
    browseSource: opt(s.browse_source), version: BigInt(s.version), updatedAt: s.updated_at ? timestampOf(s.updated_at) : undefined,
  };
}
