/**
 * The events services publish through their outboxes (payloads in proto/events/v1/events.proto),
 * and the one way each is written, so that every producer sends the same payload.
 */
import type { EventWriter } from "./unit-of-work.js";
import { isStoreKey } from "./object-store.js";

/** Names of the events on the bus. */
export const EVENTS = {
  /** Any change to a collection or its media; consumed by the webhooks service. */
  collectionUpdated: "collection.updated",
  /**
   * Collections deleted, restored or purged; the media service follows with their media (the
   * collections service commits first and never calls it inside its transaction).
   */
  collectionLifecycle: "collection.lifecycle",
  /** A token stopped being valid (broadcast; gateways drop it from their caches). */
  tokenRevoked: "auth.token.revoked",
  /** Stored objects whose rows are gone; the media service removes them from the store. */
  objectsOrphaned: "media.objects.orphaned",
  /** A user's player UI state changed (ui.state.set); gateways pass it to open player sessions. */
  uiStateChanged: "ui.state.changed",
  /** A command for a user's open player sessions (player.command; broadcast, not stored). */
  playerCommand: "player.command",
} as const;

/** What changed in a collection (events.v1.CollectionUpdated). */
export interface CollectionChange {
  collectionId: number;
  /** e.g. "media_added", "renamed", "published", "unpublished". */
  kind: string;
  /** Known to the collections service; the media service leaves them out. */
  ownerUserId?: string;
  published?: boolean;
}

export function emitCollectionUpdated(events: EventWriter, change: CollectionChange): Promise<void> {
  return events.emit(EVENTS.collectionUpdated, {
    collection_id: change.collectionId,
    kind: change.kind,
    ...(change.ownerUserId !== undefined ? { owner_user_id: change.ownerUserId } : {}),
    ...(change.published !== undefined ? { published: change.published } : {}),
    occurred_at: new Date().toISOString(),
  });
}

/**
 * Stored objects the unit of work stopped using: removed after the commit, by the media
 * service, and only those nothing references any more then (copies share objects).
 */
export async function emitObjectsOrphaned(events: EventWriter, keys: ReadonlyArray<string | null | undefined>): Promise<void> {
  const storeKeys = [...new Set(keys.filter((k): k is string => typeof k === "string" && isStoreKey(k)))];
  if (storeKeys.length) await events.emit(EVENTS.objectsOrphaned, { store_keys: storeKeys });
}

/** What happened to collections and so to their media (events.v1.CollectionLifecycle). */
export interface CollectionLifecycle {
  collectionIds: number[];
  action: "soft_deleted" | "restored" | "purged";
  /** Orders changes of the same collections: a consumer ignores one older than what it applied. */
  version: number;
}

export function emitCollectionLifecycle(events: EventWriter, change: CollectionLifecycle): Promise<void> {
  return events.emit(EVENTS.collectionLifecycle, { collection_ids: change.collectionIds, action: change.action, version: change.version });
}
