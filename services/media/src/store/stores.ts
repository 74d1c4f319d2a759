/** The media service's stores, as a unit of work hands them out (or as they run on the pool). */
import { uploadKeysIn, type Queryable, type UploadKeys } from "@cms/platform";
import { createMediaStore, type MediaStore } from "./media-store.js";
import { createTransferStore, type TransferStore } from "./transfer-store.js";

/** Every store of the media schema, bound to one query runner. */
export interface MediaStores {
  media: MediaStore;
  transfers: TransferStore;
  /** Keys of classic and thumbnail upload URLs, no row waiting for them. */
  uploadKeys: UploadKeys;
}

/** The stores over one query runner: the pool (reads) or a unit of work's transaction. */
export function createMediaStores(q: Queryable): MediaStores {
  return { media: createMediaStore(q), transfers: createTransferStore(q), uploadKeys: uploadKeysIn(q, "upload_keys") };
}
