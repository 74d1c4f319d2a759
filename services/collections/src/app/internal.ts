/** The internal questions other services ask: may a user act on a collection, which keys are covers. */
import type { Membership } from "../domain/collection-json.js";
import type { AppContext } from "./context.js";

/** CheckAccess's answer; deniedPermission names the flag a collaborator lacks. */
export interface AccessAnswer {
  exists: boolean;
  allowed: boolean;
  isOwner: boolean;
  ownerUserId: string;
  isArchived: boolean;
  isDeleted: boolean;
  deniedPermission: string;
}

/** What CheckAccess is asked about (owner: only the owner may). */
export type AccessAction = "read" | "upload" | "edit" | "delete" | "owner";

const FLAG_OF: Record<Exclude<AccessAction, "read" | "owner">, keyof Membership> = { upload: "can_upload", edit: "can_edit", delete: "can_delete" };

/** CheckAccess and CoverStoreKeys, asked by the media service. */
export function internalUseCases(app: AppContext) {
  const { stores } = app;
  return {
    /** May this user do this on this collection? Nothing is cached. */
    async checkAccess(userId: string, id: number, action: AccessAction): Promise<AccessAnswer> {
      const row = await stores.collections.accessOf(id, userId);
      if (!row) return { exists: false, allowed: false, isOwner: false, ownerUserId: "", isArchived: false, isDeleted: false, deniedPermission: "" };
      const base = { exists: true, ownerUserId: row.user_id, isArchived: row.is_archived, isDeleted: row.is_deleted, isPublished: row.is_published };
      if (row.is_deleted) return { ...base, allowed: false, isOwner: row.user_id === userId, deniedPermission: "" };
      if (userId && row.user_id === userId) return { ...base, allowed: true, isOwner: true, deniedPermission: "" };
      const m = userId ? row.membership : undefined;
      if (action === "read") {
        const publicRead = row.is_published && (row.share_access_level === "public" || (row.share_access_level === "registered" && Boolean(userId)));
        return { ...base, allowed: Boolean(m) || publicRead, isOwner: false, deniedPermission: "" };
      }
      if (!m || action === "owner") return { ...base, allowed: false, isOwner: false, deniedPermission: "" };
      const flag = FLAG_OF[action];
      const allowed = m[flag];
      return { ...base, allowed, isOwner: false, deniedPermission: allowed ? "" : flag };
    },

    /** The keys among `keys` that a collection (deleted ones included) holds as its cover. */
    async coverStoreKeys(keys: string[]): Promise<string[]> {
      return stores.collections.coverKeysAmong(keys);
    },
  };
}
