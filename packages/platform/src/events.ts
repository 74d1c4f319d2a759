/** Names of the events on the bus (payloads in proto/events/v1/events.proto). */
export const EVENTS = {
  /** Any change to a collection or its media; consumed by the webhooks service. */
  collectionUpdated: "collection.updated",
  /** A token stopped being valid (broadcast; gateways drop it from their caches). */
  tokenRevoked: "auth.token.revoked",
  /** Stored objects whose rows are gone; the media service removes them from the store. */
  objectsOrphaned: "media.objects.orphaned",
} as const;
