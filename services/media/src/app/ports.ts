/**
 * What the media use cases are built from: the stores (on the pool for reads, in a unit of work
 * for writes), the collections service's client, the object store and the configuration.
 */
import type { Client } from "@connectrpc/connect";
import type { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import type { Config, Logger, ObjectStore, OneStatementUnit, UnitOfWork } from "@cms/platform";
import type { MediaStores } from "../store/stores.js";

/** The ports every media use case is built from (createMediaApp takes them once). */
export interface MediaDeps {
  /** The stores on the pool: reads, and nothing that must commit with something else. */
  stores: MediaStores;
  /** Writes: one transaction, the stores bound to it, events to the outbox, relay woken after commit. */
  unitOfWork: UnitOfWork<MediaStores>;
  /** A write of one statement (a store's) with its events, sent as one: a row's update. */
  oneStatementUnit: OneStatementUnit;
  /** Asked, never inside a unit of work, who may do what with a collection and which keys are covers. */
  collections: Client<typeof CollectionsService>;
  objects: ObjectStore;
  config: Config;
  log: Logger;
}
