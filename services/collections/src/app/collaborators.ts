/** Collaborators and invites: invite, accept, decline, list, revoke, update permissions. */
import { AppError, type Caller } from "@cms/platform";
import {
  acceptsInvites, capError, inviteCapBreach, invitePermissions, mergePermissions, normalizeUsername, samePermissions,
  type PermissionPatch, type Permissions,
} from "../domain/invites.js";
import type { CollectionRow } from "../domain/collection-json.js";
import { emitUpdated, findCollection, ownedCollection, type Db, type Deps } from "./deps.js";

export type Status = "pending" | "accepted" | "declined";

/** A row of collaborators: an invite, or (accepted) a collaborator. */
export interface CollaboratorRow extends Permissions {
  collection_id: number;
  user_id: string;
  inviter_user_id: string;
  status: Status;
  created_at: Date;
  responded_at: Date | null;
}

const COLUMNS = ["collection_id", "user_id", "inviter_user_id", "status", "can_upload", "can_edit", "can_delete", "created_at", "responded_at"];
const DAY_MS = 24 * 3_600_000;
const KIND = "collaborators_changed";

/** user id to username, in one auth call; unknown ids are left out. */
async function usernamesOf(deps: Deps, userIds: string[]): Promise<Map<string, string>> {
  const ids = [...new Set(userIds)];
  if (!ids.length) return new Map();
  const res = await deps.auth.getUsers({ userIds: ids });
  return new Map(res.users.map((u) => [u.userId, u.username]));
}

function locked(db: Db, collectionId: number, userId: string) {
  return db("collaborators").where({ collection_id: collectionId, user_id: userId }).forUpdate().first(COLUMNS) as Promise<CollaboratorRow | undefined>;
}

// ---- invite ----------------------------------------------------------------------------------

/** The invite (new, or a pending one with updated flags) and the invited user's username. */
export async function inviteCollaborator(deps: Deps, caller: Caller, collectionId: number, username: string, flags: PermissionPatch): Promise<{ row: CollaboratorRow; username: string }> {
  const check = (row: CollectionRow) => {
    if (!acceptsInvites(row.share_access_level)) {
      throw new AppError("invalid_request", `Collection ${collectionId} has share_access_level ${row.share_access_level}; invites need restricted or private.`, { field: "collection_id" });
    }
  };
  check(await ownedCollection(deps.db, collectionId, caller));
  const name = normalizeUsername(username);
  if (!name) throw new AppError("invalid_request", "username must not be empty.", { field: "username" });
  if (name === caller.username.toLowerCase()) throw new AppError("invalid_request", "You cannot invite yourself to your own collection.", { field: "username" });
  const found = (await deps.auth.getUsers({ usernames: [name] })).users.find((u) => u.username === name);
  if (!found) throw new AppError("not_found", `No user named "${name}".`);
  if (found.userId === caller.userId) throw new AppError("invalid_request", "You cannot invite yourself to your own collection.", { field: "username" });
  const perms = invitePermissions(flags);

  const row = await deps.db.transaction(async (trx) => {
    const col = await ownedCollection(trx, collectionId, caller, { forUpdate: true });
    check(col);
    // One inviter's invites are counted one at a time, across all their collections.
    await trx.raw("SELECT pg_advisory_xact_lock(hashtext(?))", [`cms-invite:${caller.userId}`]);
    const cur = await locked(trx, collectionId, found.userId);
    if (cur?.status === "accepted") {
      // The contract's error table has no conflict code: an invite to an existing collaborator is
      // a request that cannot be carried out as sent.
      throw new AppError("invalid_request", `${name} is already a collaborator on collection ${collectionId}; use collaborators.update_permissions to change the flags.`, { field: "username" });
    }
    if (cur?.status === "pending") {
      // Re-inviting a pending invitee only updates the flags: no new invite is sent or counted.
      if (samePermissions(cur, perms)) return cur;
      const [next] = await trx("collaborators").where({ collection_id: collectionId, user_id: found.userId })
        .update({ ...perms, inviter_user_id: caller.userId }).returning(COLUMNS) as CollaboratorRow[];
      await emitUpdated(deps, trx, col, KIND);
      return next!;
    }
    const now = new Date();
    const since = new Date(now.getTime() - DAY_MS);
    await trx("collaborator_invite_log").where({ inviter_user_id: caller.userId }).where("created_at", "<=", since).delete();
    const sent = await trx("collaborator_invite_log").where({ inviter_user_id: caller.userId }).where("created_at", ">", since).pluck("created_at") as Date[];
    const [{ n }] = await trx("collaborators").where({ collection_id: collectionId, status: "pending" }).count<{ n: number }[]>("* as n");
    const breach = inviteCapBreach({ now, sentAt: sent.map((d) => new Date(d)), pendingOnCollection: Number(n) });
    if (breach) throw capError(breach);
    const values = { inviter_user_id: caller.userId, status: "pending", ...perms, created_at: now, responded_at: null };
    const [next] = await trx("collaborators").insert({ collection_id: collectionId, user_id: found.userId, ...values })
      .onConflict(["collection_id", "user_id"]).merge(values).returning(COLUMNS) as CollaboratorRow[];
    await trx("collaborator_invite_log").insert({ inviter_user_id: caller.userId, collection_id: collectionId, user_id: found.userId, created_at: now });
    await emitUpdated(deps, trx, col, KIND);
    return next!;
  });
  deps.ctx.bus.flush();
  return { row, username: found.username };
}

// ---- accept / decline ------------------------------------------------------------------------

/** The answered invite, the caller's username and the collection's name. */
export async function respondToInvite(deps: Deps, caller: Caller, collectionId: number, inviterUserId: string, answer: "accepted" | "declined"): Promise<{ row: CollaboratorRow; username: string; collectionName: string }> {
  const missing = () => new AppError("not_found", `No pending invite to collection ${collectionId} from ${inviterUserId} for the caller.`);
  const { row, col } = await deps.db.transaction(async (trx) => {
    const col = await findCollection(trx, collectionId, { forUpdate: true });
    if (!col || col.is_deleted) throw missing();
    const cur = await locked(trx, collectionId, caller.userId);
    if (!cur || cur.status !== "pending" || cur.inviter_user_id !== inviterUserId) throw missing();
    const [next] = await trx("collaborators").where({ collection_id: collectionId, user_id: caller.userId })
      .update({ status: answer, responded_at: new Date() }).returning(COLUMNS) as CollaboratorRow[];
    await emitUpdated(deps, trx, col, KIND);
    return { row: next!, col };
  });
  deps.ctx.bus.flush();
  return { row, username: caller.username, collectionName: col.name };
}

// ---- lists -----------------------------------------------------------------------------------

type Joined = CollaboratorRow & { collection_name: string };

function pendingJoined(db: Db) {
  return db("collaborators as k").join("collections as c", "c.id", "k.collection_id")
    .where({ "k.status": "pending", "c.is_deleted": false })
    .select([...COLUMNS.map((c) => `k.${c}`), "c.name as collection_name"])
    .orderBy([{ column: "k.created_at", order: "desc" }, { column: "k.collection_id" }]);
}

/** Pending invites the caller sent; username null when auth does not know the user. */
export async function listSentInvites(deps: Deps, caller: Caller): Promise<Array<{ row: CollaboratorRow; username: string | null; collectionName: string }>> {
  const rows = (await pendingJoined(deps.db).where({ "k.inviter_user_id": caller.userId })) as Joined[];
  const names = await usernamesOf(deps, rows.map((r) => r.user_id));
  return rows.map((r) => ({ row: r, username: names.get(r.user_id) ?? null, collectionName: r.collection_name }));
}

/** Pending invites the caller received; inviterUsername null when auth does not know the user. */
export async function listReceivedInvites(deps: Deps, caller: Caller): Promise<Array<{ row: CollaboratorRow; collectionName: string; inviterUsername: string | null }>> {
  const rows = (await pendingJoined(deps.db).where({ "k.user_id": caller.userId })) as Joined[];
  const names = await usernamesOf(deps, rows.map((r) => r.inviter_user_id));
  return rows.map((r) => ({ row: r, collectionName: r.collection_name, inviterUsername: names.get(r.inviter_user_id) ?? null }));
}

/** Accepted collaborators with their usernames (null when auth does not know the user). */
export async function listCollaborators(deps: Deps, caller: Caller, collectionId: number): Promise<Array<{ row: CollaboratorRow; username: string | null }>> {
  await ownedCollection(deps.db, collectionId, caller);
  const rows = (await deps.db("collaborators").where({ collection_id: collectionId, status: "accepted" })
    .select(COLUMNS).orderBy([{ column: "responded_at" }, { column: "user_id" }])) as CollaboratorRow[];
  const names = await usernamesOf(deps, rows.map((r) => r.user_id));
  return rows.map((r) => ({ row: r, username: names.get(r.user_id) ?? null }));
}

// ---- revoke / update permissions -------------------------------------------------------------

function noCollaborator(collectionId: number, userId: string): AppError {
  return new AppError("not_found", `User ${userId} is neither a collaborator on nor invited to collection ${collectionId}.`);
}

/** Removes a collaborator or cancels a pending invite; the status it had. */
export async function revokeCollaborator(deps: Deps, caller: Caller, collectionId: number, userId: string): Promise<{ previousStatus: Status; collectionId: number; userId: string }> {
  const previous = await deps.db.transaction(async (trx) => {
    const col = await ownedCollection(trx, collectionId, caller, { forUpdate: true });
    const cur = await locked(trx, collectionId, userId);
    if (!cur || cur.status === "declined") throw noCollaborator(collectionId, userId);
    await trx("collaborators").where({ collection_id: collectionId, user_id: userId }).delete();
    await emitUpdated(deps, trx, col, KIND);
    return cur.status;
  });
  deps.ctx.bus.flush();
  return { previousStatus: previous, collectionId, userId };
}

/** The collaborator's (or invited user's) row with the resulting flags. */
export async function updateCollaboratorPermissions(deps: Deps, caller: Caller, collectionId: number, userId: string, patch: PermissionPatch): Promise<CollaboratorRow> {
  // Validate the body before anything else: no flag sent is a malformed request.
  mergePermissions({ can_upload: false, can_edit: false, can_delete: false }, patch);
  const row = await deps.db.transaction(async (trx) => {
    const col = await ownedCollection(trx, collectionId, caller, { forUpdate: true });
    const cur = await locked(trx, collectionId, userId);
    if (!cur || cur.status === "declined") throw noCollaborator(collectionId, userId);
    const next = mergePermissions(cur, patch);
    if (samePermissions(cur, next)) return cur;
    const [updated] = await trx("collaborators").where({ collection_id: collectionId, user_id: userId }).update(next).returning(COLUMNS) as CollaboratorRow[];
    await emitUpdated(deps, trx, col, KIND);
    return updated!;
  });
  deps.ctx.bus.flush();
  return row;
}
