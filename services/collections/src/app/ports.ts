/**
 * What the collections use cases need from the outside, as interfaces: the stores of the
 * collections schema (a PostgreSQL adapter in ../store, in-memory fakes in the component tests), the
 * other services' clients, the object store and configuration. The same store interfaces work
 * on the pool (reads, single statements) and inside a unit of work (bound to its transaction).
 */
import type { Client } from "@connectrpc/connect";
import type { Config, Logger, ObjectStore, UnitOfWork, UploadKeys } from "@cms/platform";
import type { MediaService } from "@cms/contracts/media/v1/media_pb";
import type { SocialService } from "@cms/contracts/social/v1/social_pb";
import type { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import type { CollectionRow, Membership } from "../domain/collection-json.js";
import type { CollaboratorRow, InviteStatus, Permissions } from "../domain/invites.js";
import type { PendingStep, StepWork } from "../domain/pending-steps.js";

/** The columns a new collection is written with (the rest take their defaults). */
export interface NewCollection {
  /** Reserved beforehand with reserveId() when the cover keys need it. */
  id?: number;
  user_id: string;
  name: string;
  description: string | null;
  tags: string[];
  is_nsfw: boolean;
  share_access_level: CollectionRow["share_access_level"];
  share_access_configured: boolean;
  publish_alias_id: string | null;
  publish_handle: string | null;
  playback_prefs: Record<string, unknown> | null;
  parent_id: number | null;
  position: number;
  thumbnail_url: string | null;
  cover_thumbnail_url: string | null;
  /** The object-store key the cover was made from, when it was (not read into a CollectionRow). */
  cover_source?: string | null;
}

/** Columns a use case changes on an existing collection (cover_source: see NewCollection). */
export type CollectionPatch = Partial<Omit<CollectionRow, "id" | "user_id" | "share_id" | "views" | "likes" | "created_at">> & { cover_source?: string | null };

/** collections.list's filter: under a parent, or the owner's (top-level unless includeSubcollections). */
export interface ListFilter {
  userId: string;
  parentId?: number;
  includeSubcollections: boolean;
  includeArchived: boolean;
  nameContains?: string;
  tag?: string;
  isNsfw?: boolean;
  limit: number;
  offset: number;
}

/** A collection as CheckAccess sees it; membership is the user's accepted one, if any. */
export type AccessRow = Pick<CollectionRow, "user_id" | "is_archived" | "is_deleted" | "is_published" | "share_access_level"> & { membership?: Membership };

/** A part of the collections a search or browse looks in. */
export type Scope = "own" | "shared" | "public" | "following" | "liked";
/** The order of collections.browse. */
export type SortBy = "views" | "recent" | "likes";

/** Handles a caller follows: (owner, alias) pairs, alias "" for a primary username. */
export interface Follows { users: string[]; aliases: string[] }

/** Who searches or browses and what they follow. */
export interface Searcher { userId: string | null; follows: Follows }

/** A page of rows and the total they were cut from. */
export interface RowPage<T> { rows: T[]; total: number }

/** The cover keys of collections, and whether each was soft-deleted. */
export interface CoverRow { id: number; is_deleted: boolean; thumbnail_url: string | null; cover_thumbnail_url: string | null }

/** Collections, slugs, likes and purge tombstones. */
export interface CollectionsStore {
  /** A collection, deleted ones included; with lock, locked until the unit of work ends. */
  byId(id: number, opts?: { lock?: boolean }): Promise<CollectionRow | undefined>;
  /**
   * What CheckAccess reads of a collection, with the user's accepted membership (none for an
   * empty userId), in one statement: it runs before every media operation.
   */
  accessOf(id: number, userId: string): Promise<AccessRow | undefined>;
  /** Locks collections in id order (lifecycle changes of overlapping sets take turns). */
  lockAll(ids: number[]): Promise<void>;
  /** An id from the collections' sequence, for a row inserted later (cover keys carry it). */
  reserveId(): Promise<number>;
  /** A name taken among the live siblings surfaces as PostgreSQL's unique violation. */
  insert(values: NewCollection): Promise<CollectionRow>;
  update(id: number, patch: CollectionPatch): Promise<CollectionRow>;
  /** The object-store key the collection's cover was made from, if it was. */
  coverSource(id: number): Promise<string | null>;
  /** Removes collections (the rows, their likes and collaborators). */
  remove(ids: number[]): Promise<void>;
  /** Whether a live collection of the owner under `parentId` (null: top level) has this name. */
  nameTaken(userId: string, parentId: number | null, name: string): Promise<boolean>;
  /** The position after the last live collection of the owner under `parentId` (null: top level). */
  nextPosition(userId: string, parentId: number | null): Promise<number>;
  addView(id: number): Promise<void>;
  /** A live published collection of `userId` by its stored slug and (case-insensitive) handle. */
  publishedBySlug(userId: string, slug: string, handle: string): Promise<CollectionRow | undefined>;
  /** Published, live, unarchived sub-collections of a collection, in position order. */
  publishedChildren(parentId: number): Promise<CollectionRow[]>;
  /** The live collections of `userId` among `ids` (any order). */
  ownedAmong(userId: string, ids: number[], includeArchived: boolean): Promise<CollectionRow[]>;
  list(filter: ListFilter): Promise<RowPage<CollectionRow>>;
  /** The owner's live collections by position, locked. */
  ownedForReorder(userId: string): Promise<CollectionRow[]>;
  setPosition(id: number, position: number): Promise<void>;
  /** Ids of the collection's subtree (itself first), any depth. */
  subtreeIds(id: number, opts?: { includeDeleted?: boolean }): Promise<number[]>;
  /** The collection's ancestors, nearest first. */
  ancestorIds(id: number): Promise<number[]>;
  /** One of `ids` that is soft-deleted, if any. */
  firstDeletedAmong(ids: number[]): Promise<number | undefined>;
  /** Those of `ids` that are not deleted. */
  liveAmong(ids: number[]): Promise<number[]>;
  /** Collections deleted along with `id`. */
  deletedWith(id: number): Promise<number[]>;
  /** Soft-deletes `id` and, as deleted with it, `others`. */
  markDeleted(id: number, others: number[], at: Date): Promise<void>;
  markRestored(ids: number[], at: Date): Promise<void>;
  coversOf(ids: number[]): Promise<CoverRow[]>;
  /** Soft-deleted root collections deleted before `before` (retention candidates). */
  deletedRootsBefore(before: Date): Promise<Array<{ id: number; user_id: string; deleted_at: Date }>>;
  /** Tombstones of purged collections, so that a late restore answers 410. */
  addTombstones(rows: Array<{ id: number; user_id: string }>): Promise<void>;
  tombstone(id: number): Promise<{ user_id: string } | undefined>;
  /** The next collection.lifecycle version (increases across replicas). */
  nextLifecycleVersion(): Promise<number>;
  /** The collection holding `slug` on the account, forever. */
  slugHolder(userId: string, slug: string): Promise<number | undefined>;
  reserveSlug(userId: string, slug: string, collectionId: number): Promise<void>;
  /** Whether a like was added (false: it existed). */
  addLike(userId: string, id: number): Promise<boolean>;
  /** Whether a like was removed (false: there was none). */
  removeLike(userId: string, id: number): Promise<boolean>;
  /** Adds `delta` to the like count; the new count. */
  adjustLikes(id: number, delta: number): Promise<number>;
  /** Liked collections still published and public, most recently liked first. */
  liked(userId: string, limit: number, offset: number): Promise<RowPage<CollectionRow>>;
  /**
   * Search hits of the scopes (own first, then by relevance): own and shared match generously,
   * the others strictly. The total stays true at any offset.
   */
  search(query: string, scopes: Scope[], who: Searcher, limit: number, offset: number): Promise<RowPage<CollectionRow>>;
  /** How many public collections match `query` strictly (the zero-result hint). */
  countPublicMatches(query: string, who: Searcher): Promise<number>;
  browse(scopes: Scope[], who: Searcher, tags: string[], sortBy: SortBy, limit: number, offset: number): Promise<RowPage<CollectionRow>>;
  /** The keys among `keys` that a collection (deleted ones included) holds as its cover. */
  coverKeysAmong(keys: string[]): Promise<string[]>;
}

/** A pending invite with the name of its collection. */
export type PendingInvite = CollaboratorRow & { collection_name: string };

/** Collaborators, invites and the invite log behind the caps. */
export interface CollaboratorsStore {
  /** The caller's flags as an accepted collaborator. */
  membership(collectionId: number, userId: string): Promise<Membership | undefined>;
  /** The invite or collaborator row, locked until the unit of work ends. */
  locked(collectionId: number, userId: string): Promise<CollaboratorRow | undefined>;
  /** Serializes the invites of one inviter (counted across all their collections). */
  lockInviter(inviterUserId: string): Promise<void>;
  update(collectionId: number, userId: string, patch: Partial<Permissions> & { inviter_user_id?: string; status?: InviteStatus; responded_at?: Date }): Promise<CollaboratorRow>;
  /** Writes a pending invite, over a declined one if there is one. */
  upsertInvite(row: CollaboratorRow): Promise<CollaboratorRow>;
  remove(collectionId: number, userId: string): Promise<void>;
  pendingCount(collectionId: number): Promise<number>;
  /** Forgets invites sent before `before` and lists when the later ones were sent. */
  invitesSentSince(inviterUserId: string, before: Date): Promise<Date[]>;
  logInvite(entry: { inviter_user_id: string; collection_id: number; user_id: string; created_at: Date }): Promise<void>;
  /** Pending invites on live collections, sent by or to one user, newest first. */
  pendingInvites(who: { inviterUserId: string } | { userId: string }): Promise<PendingInvite[]>;
  /** Accepted collaborators of a collection, in acceptance order. */
  accepted(collectionId: number): Promise<CollaboratorRow[]>;
}

/** The record of steps spanning services (../domain/pending-steps.ts). */
export interface PendingStepsStore {
  add(work: StepWork, nextAttemptAt: Date): Promise<number>;
  /** With lock: locked until the unit of work ends. */
  byId(id: number, opts?: { lock?: boolean }): Promise<PendingStep | undefined>;
  /** A step still open on the collection, if any. */
  openOn(collectionId: number): Promise<PendingStep | undefined>;
  /** Removes the step if it is still in `state`; false when it was taken over or is gone. */
  settle(id: number, state: PendingStep["state"]): Promise<boolean>;
  markCompensating(id: number): Promise<void>;
  retryLater(id: number, attempts: number, nextAttemptAt: Date, error: string): Promise<void>;
  /** Steps whose next attempt is due at `now`, oldest first. */
  due(now: Date, limit: number): Promise<PendingStep[]>;
}

/** The stores a unit of work hands out, bound to its transaction. */
export interface CollectionsStores {
  collections: CollectionsStore;
  collaborators: CollaboratorsStore;
  steps: PendingStepsStore;
  /** Keys of cover upload URLs (collections.get_upload_url). */
  uploadKeys: UploadKeys;
}

/** The media service as the use cases call it. */
export type MediaClient = Pick<Client<typeof MediaService>,
  "insertCollectionLink" | "moveCollectionLink" | "countCollectionMedia" | "applyCollectionLifecycle" | "exportCollectionMedia">;
/** The social service as the use cases call it (handles). */
export type SocialClient = Pick<Client<typeof SocialService>, "resolvePublishHandle" | "resolveHandle" | "listFollowedHandles">;
/** The auth service as the use cases call it (users and their plans). */
export type AuthClient = Pick<Client<typeof AuthService>, "getUsers">;

/** Everything createCollectionsApp wires together. */
export interface CollectionsAppDeps {
  /** The stores on the pool: reads and single statements outside a unit of work. */
  stores: CollectionsStores;
  unitOfWork: UnitOfWork<CollectionsStores>;
  media: MediaClient;
  social: SocialClient;
  auth: AuthClient;
  objects: ObjectStore;
  /** Read at each use: the origins are known only once the gateway listens. */
  config: Config;
  log: Logger;
  /** The clock (tests move it). */
  now?: () => Date;
}
