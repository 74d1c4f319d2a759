/** Collaborators and invites: invite, accept, decline, list, revoke, update permissions. */
import { AppError, emitCollectionUpdated, type Caller } from "@cms/platform";
import {
  acceptsInvites, capError, inviteCapBreach, invitePermissions, mergePermissions, normalizeUsername, samePermissions,
  type CollaboratorRow, type InviteStatus, type PermissionPatch,
} from "../domain/invites.js";
import type { CollectionRow } from "../domain/collection-json.js";
import { changeOf, ownedCollection, type AppContext } from "./context.js";

const DAY_MS = 24 * 3_600_000;
const KIND = "collaborators_changed";

function noCollaborator(collectionId: number, userId: string): AppError {
  return new AppError("not_found", `User ${userId} is neither a collaborator on nor invited to collection ${collectionId}.`);
}

/** The collaborators.* use cases. */
export function collaboratorUseCases(app: AppContext) {
  const { stores } = app;

  /** user id to username, in one auth call; unknown ids are left out. */
  async function usernamesOf(userIds: string[]): Promise<Map<string, string>> {
    const ids = [...new Set(userIds)];
    if (!ids.length) return new Map();
    const res = await app.auth.getUsers({ userIds: ids });
    return new Map(res.users.map((u) => [u.userId, u.username]));
  }

  return {
    /** The invite (new, or a pending one with updated flags) and the invited user's username. */
    async inviteCollaborator(caller: Caller, collectionId: number, username: string, flags: PermissionPatch): Promise<{ row: CollaboratorRow; username: string }> {
      const check = (row: CollectionRow) => {
        if (!acceptsInvites(row.share_access_level)) {
          throw new AppError("invalid_request", `Collection ${collectionId} has share_access_level ${row.share_access_level}; invites need restricted or private.`, { field: "collection_id" });
        }
      };
      check(await ownedCollection(stores, collectionId, caller));
      const name = normalizeUsername(username);
      if (!name) throw new AppError("invalid_request", "username must not be empty.", { field: "username" });
      if (name === caller.username.toLowerCase()) throw new AppError("invalid_request", "You cannot invite yourself to your own collection.", { field: "username" });
      const found = (await app.auth.getUsers({ usernames: [name] })).users.find((u) => u.username === name);
      if (!found) throw new AppError("not_found", `No user named "${name}".`);
      if (found.userId === caller.userId) throw new AppError("invalid_request", "You cannot invite yourself to your own collection.", { field: "username" });
      const perms = invitePermissions(flags);

      const row = await app.unitOfWork(async (s, events) => {
        const col = await ownedCollection(s, collectionId, caller, { lock: true });
        check(col);
        // One inviter's invites are counted one at a time, across all their collections.
        await s.collaborators.lockInviter(caller.userId);
        const cur = await s.collaborators.locked(collectionId, found.userId);
        if (cur?.status === "accepted") {
          // The contract's error table has no conflict code: an invite to an existing collaborator is
          // a request that cannot be carried out as sent.
          throw new AppError("invalid_request", `${name} is already a collaborator on collection ${collectionId}; use collaborators.update_permissions to change the flags.`, { field: "username" });
        }
        if (cur?.status === "pending") {
          // Re-inviting a pending invitee only updates the flags: no new invite is sent or counted.
          if (samePermissions(cur, perms)) return cur;
          const next = await s.collaborators.update(collectionId, found.userId, { ...perms, inviter_user_id: caller.userId });
          await emitCollectionUpdated(events, changeOf(col, KIND));
          return next;
        }
        const now = app.now();
        const sent = await s.collaborators.invitesSentSince(caller.userId, new Date(now.getTime() - DAY_MS));
        const breach = inviteCapBreach({ now, sentAt: sent, pendingOnCollection: await s.collaborators.pendingCount(collectionId) });
        if (breach) throw capError(breach);
        const next = await s.collaborators.upsertInvite({
          collection_id: collectionId, user_id: found.userId, inviter_user_id: caller.userId, status: "pending", ...perms, created_at: now, responded_at: null,
        });
        await s.collaborators.logInvite({ inviter_user_id: caller.userId, collection_id: collectionId, user_id: found.userId, created_at: now });
        await emitCollectionUpdated(events, changeOf(col, KIND));
        return next;
      });
      return { row, username: found.username };
    },

    /** The answered invite, the caller's username and the collection's name. */
    async respondToInvite(caller: Caller, collectionId: number, inviterUserId: string, answer: "accepted" | "declined"): Promise<{ row: CollaboratorRow; username: string; collectionName: string }> {
      const missing = () => new AppError("not_found", `No pending invite to collection ${collectionId} from ${inviterUserId} for the caller.`);
      const { row, col } = await app.unitOfWork(async (s, events) => {
        const col = await s.collections.byId(collectionId, { lock: true });
        if (!col || col.is_deleted) throw missing();
        const cur = await s.collaborators.locked(collectionId, caller.userId);
        if (!cur || cur.status !== "pending" || cur.inviter_user_id !== inviterUserId) throw missing();
        const next = await s.collaborators.update(collectionId, caller.userId, { status: answer, responded_at: app.now() });
        await emitCollectionUpdated(events, changeOf(col, KIND));
        return { row: next, col };
      });
      return { row, username: caller.username, collectionName: col.name };
    },

    /** Pending invites the caller sent; username null when auth does not know the user. */
    async listSentInvites(caller: Caller): Promise<Array<{ row: CollaboratorRow; username: string | null; collectionName: string }>> {
      const rows = await stores.collaborators.pendingInvites({ inviterUserId: caller.userId });
      const names = await usernamesOf(rows.map((r) => r.user_id));
      return rows.map((r) => ({ row: r, username: names.get(r.user_id) ?? null, collectionName: r.collection_name }));
    },

    /** Pending invites the caller received; inviterUsername null when auth does not know the user. */
    async listReceivedInvites(caller: Caller): Promise<Array<{ row: CollaboratorRow; collectionName: string; inviterUsername: string | null }>> {
      const rows = await stores.collaborators.pendingInvites({ userId: caller.userId });
      const names = await usernamesOf(rows.map((r) => r.inviter_user_id));
      return rows.map((r) => ({ row: r, collectionName: r.collection_name, inviterUsername: names.get(r.inviter_user_id) ?? null }));
    },

    /** Accepted collaborators with their usernames (null when auth does not know the user). */
    async listCollaborators(caller: Caller, collectionId: number): Promise<Array<{ row: CollaboratorRow; username: string | null }>> {
      await ownedCollection(stores, collectionId, caller);
      const rows = await stores.collaborators.accepted(collectionId);
      const names = await usernamesOf(rows.map((r) => r.user_id));
      return rows.map((r) => ({ row: r, username: names.get(r.user_id) ?? null }));
    },

    /** Removes a collaborator or cancels a pending invite; the status it had. */
    async revokeCollaborator(caller: Caller, collectionId: number, userId: string): Promise<{ previousStatus: InviteStatus; collectionId: number; userId: string }> {
      const previous = await app.unitOfWork(async (s, events) => {
        const col = await ownedCollection(s, collectionId, caller, { lock: true });
        const cur = await s.collaborators.locked(collectionId, userId);
        if (!cur || cur.status === "declined") throw noCollaborator(collectionId, userId);
        await s.collaborators.remove(collectionId, userId);
        await emitCollectionUpdated(events, changeOf(col, KIND));
        return cur.status;
      });
      return { previousStatus: previous, collectionId, userId };
    },

    /** The collaborator's (or invited user's) row with the resulting flags. */
    async updateCollaboratorPermissions(caller: Caller, collectionId: number, userId: string, patch: PermissionPatch): Promise<CollaboratorRow> {
      // Validate the body before anything else: no flag sent is a malformed request.
      mergePermissions({ can_upload: false, can_edit: false, can_delete: false }, patch);
      return app.unitOfWork(async (s, events) => {
        const col = await ownedCollection(s, collectionId, caller, { lock: true });
        const cur = await s.collaborators.locked(collectionId, userId);
        if (!cur || cur.status === "declined") throw noCollaborator(collectionId, userId);
        const next = mergePermissions(cur, patch);
        if (samePermissions(cur, next)) return cur;
        const updated = await s.collaborators.update(collectionId, userId, next);
        await emitCollectionUpdated(events, changeOf(col, KIND));
        return updated;
      });
    },
  };
}
