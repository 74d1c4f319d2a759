/** Who may do what with a collection's media: asked of the collections service, the one place that decides. */
import { AppError, mayBeCoverKey, type Caller } from "@cms/platform";
import type { MediaRow } from "../domain/media-row.js";
import type { MediaDeps } from "./ports.js";

/** read, upload (can_upload), edit (can_edit), delete (can_delete), owner (owner only). */
export type Action = "read" | "upload" | "edit" | "delete" | "owner";

/** The caller's standing on a collection that CheckAccess allowed. */
export interface Access { ownerUserId: string; isOwner: boolean; isArchived: boolean }

/** A caller standing for a user named by a signed grant or a stored session (no token). */
export function callerOfUser(userId: string): Caller {
  return { userId, username: "", plan: "free", isAdmin: false, scopes: [], tokenId: "" };
}

/** A media item that is gone, or that the caller may not see. */
export function mediaNotFound(id: number): AppError {
  return new AppError("not_found", `Media ${id} does not exist or is not accessible.`);
}

/** The permission checks, asked of the collections service (never inside a unit of work). */
export function createAccess({ stores, collections }: Pick<MediaDeps, "stores" | "collections">) {
  /**
   * Whether the caller may act on the collection. Nothing is cached: a revoked collaborator is
   * refused on the next call.
   */
  async function authorize(caller: Caller, collectionId: number, action: Action): Promise<Access> {
    const res = await collections.checkAccess({ userId: caller.userId, collectionId: BigInt(collectionId), action });
    if (!res.exists || res.isDeleted) throw new AppError("not_found", `Collection ${collectionId} does not exist or is not accessible.`);
    if (!res.allowed) {
      if (res.deniedPermission) {
        throw new AppError("insufficient_permission", `As a collaborator on collection ${collectionId} you lack ${res.deniedPermission}; ask the owner to grant it. Do not retry.`, { permission: res.deniedPermission });
      }
      throw new AppError("forbidden", `Collection ${collectionId} is not owned by or shared with the caller.`);
    }
    return { ownerUserId: res.ownerUserId, isOwner: res.isOwner, isArchived: res.isArchived };
  }

  /** A media row the caller may act on; deleted rows only with allowDeleted. */
  async function mediaFor(caller: Caller, id: number, action: Action, opts: { allowDeleted?: boolean } = {}): Promise<{ row: MediaRow; access: Access }> {
    const row = await stores.media.byId(id);
    if (!row || (row.is_deleted && !opts.allowDeleted)) throw mediaNotFound(id);
    const access = await authorize(caller, Number(row.collection_id), action);
    return { row, access };
  }

  /**
   * Which of the keys a collection uses as its cover, asked of the collections service for the
   * keys with a cover's name only (every cover key has one).
   */
  async function coverKeysAmong(keys: string[]): Promise<Set<string>> {
    const found = new Set<string>();
    const named = keys.filter(mayBeCoverKey);
    for (let i = 0; i < named.length; i += 1000) {
      const res = await collections.coverStoreKeys({ storeKeys: named.slice(i, i + 1000) });
      for (const k of res.storeKeys) found.add(k);
    }
    return found;
  }

  return { authorize, mediaFor, coverKeysAmong };
}

/** The permission checks and cover lookups of the collections service, as the use cases use them. */
export type MediaAccess = ReturnType<typeof createAccess>;
