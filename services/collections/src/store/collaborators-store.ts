/** The knex adapter of the collaborators store: invites, collaborators and the invite log. */
import type { Queryable } from "@cms/platform";
import type { Membership } from "../domain/collection-json.js";
import type { CollaboratorRow } from "../domain/invites.js";
import type { CollaboratorsStore, PendingInvite } from "../app/ports.js";

const COLUMNS = ["collection_id", "user_id", "inviter_user_id", "status", "can_upload", "can_edit", "can_delete", "created_at", "responded_at"];

/** The collaborators store on the pool or a unit's transaction. */
export function createCollaboratorsStore(q: Queryable): CollaboratorsStore {
  const row = (collectionId: number, userId: string) => q("collaborators").where({ collection_id: collectionId, user_id: userId });
  return {
    async membership(collectionId, userId) {
      return q("collaborators").where({ collection_id: collectionId, user_id: userId, status: "accepted" })
        .first("can_upload", "can_edit", "can_delete") as Promise<Membership | undefined>;
    },
    async locked(collectionId, userId) {
      return row(collectionId, userId).forUpdate().first(COLUMNS) as Promise<CollaboratorRow | undefined>;
    },
    async lockInviter(inviterUserId) {
      await q.raw("SELECT pg_advisory_xact_lock(hashtext(?))", [`cms-invite:${inviterUserId}`]);
    },
    async update(collectionId, userId, patch) {
      const [next] = await row(collectionId, userId).update(patch).returning(COLUMNS);
      return next as CollaboratorRow;
    },
    async upsertInvite(invite) {
      const { collection_id: _c, user_id: _u, ...values } = invite;
      const [next] = await q("collaborators").insert(invite).onConflict(["collection_id", "user_id"]).merge(values).returning(COLUMNS);
      return next as CollaboratorRow;
    },
    async remove(collectionId, userId) {
      await row(collectionId, userId).delete();
    },
    async pendingCount(collectionId) {
      const [{ n }] = await q("collaborators").where({ collection_id: collectionId, status: "pending" }).count<{ n: number }[]>("* as n");
      return Number(n);
    },
    async invitesSentSince(inviterUserId, before) {
      await q("collaborator_invite_log").where({ inviter_user_id: inviterUserId }).where("created_at", "<=", before).delete();
      const sent = await q("collaborator_invite_log").where({ inviter_user_id: inviterUserId }).where("created_at", ">", before).pluck("created_at");
      return sent.map((d: Date | string) => new Date(d));
    },
    async logInvite(entry) {
      await q("collaborator_invite_log").insert(entry);
    },
    async pendingInvites(who) {
      const b = q("collaborators as k").join("collections as c", "c.id", "k.collection_id")
        .where({ "k.status": "pending", "c.is_deleted": false })
        .select([...COLUMNS.map((c) => `k.${c}`), "c.name as collection_name"])
        .orderBy([{ column: "k.created_at", order: "desc" }, { column: "k.collection_id" }]);
      if ("inviterUserId" in who) b.where({ "k.inviter_user_id": who.inviterUserId });
      else b.where({ "k.user_id": who.userId });
      return b as Promise<PendingInvite[]>;
    },
    async accepted(collectionId) {
      return q("collaborators").where({ collection_id: collectionId, status: "accepted" })
        .select(COLUMNS).orderBy([{ column: "responded_at" }, { column: "user_id" }]) as Promise<CollaboratorRow[]>;
    },
  };
}
