/**
 * MediaService's internal RPCs, used by the collections service: sub-collection link rows,
 * media counts, cascading deletes and export.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import type { MediaService } from "@cms/contracts/media/v1/media_pb";
import { EVENTS, type ServiceContext } from "@cms/platform";
import type { MediaRow } from "../domain/media-json.js";
import { mediaMessage } from "./encode.js";
import { insertLinkRow, lockCollection, nextPosition, renumber, storeKeysOf } from "../store/media-store.js";

type Internal = Pick<ServiceImpl<typeof MediaService>,
  "insertCollectionLink" | "moveCollectionLink" | "countCollectionMedia" | "applyCollectionLifecycle" | "exportCollectionMedia">;

/** The media-side mode of each collection lifecycle action. */
const MODE_OF: Record<string, "soft" | "restore" | "hard"> = { soft_deleted: "soft", restored: "restore", purged: "hard" };

export function internalHandlers(ctx: ServiceContext): Internal {
  const { db, bus } = ctx;
  return {
    async insertCollectionLink(req) {
      const link = await db.transaction(async (trx) => {
        const l = await insertLinkRow(trx, {
          parentId: Number(req.parentCollectionId), childId: Number(req.childCollectionId), ownerUserId: req.ownerUserId,
          position: req.position, description: req.description,
        });
        await bus.enqueue(trx, EVENTS.collectionUpdated, { collection_id: Number(req.parentCollectionId), kind: "media_added" });
        return l;
      });
      bus.flush();
      return { linkMediaId: BigInt(link.id), position: link.position };
    },

    async moveCollectionLink(req) {
      const out = await db.transaction(async (trx) => {
        const childId = Number(req.childCollectionId);
        const old = await trx("media").where({ linked_collection_id: childId }).select("id", "collection_id");
        const parents = [...new Set(old.map((r) => Number(r.collection_id)))];
        for (const p of parents.sort((a, b) => a - b)) await lockCollection(trx, p);
        if (old.length) await trx("media").whereIn("id", old.map((r) => r.id)).delete();
        for (const p of parents) {
          await renumber(trx, p);
          await bus.enqueue(trx, EVENTS.collectionUpdated, { collection_id: p, kind: "media_removed" });
        }
        let linkId: number | undefined;
        if (req.newParentCollectionId !== undefined) {
          const parentId = Number(req.newParentCollectionId);
          const l = await insertLinkRow(trx, { parentId, childId, ownerUserId: req.ownerUserId });
          linkId = l.id;
          await bus.enqueue(trx, EVENTS.collectionUpdated, { collection_id: parentId, kind: "media_added" });
        }
        return { removed: old.map((r) => Number(r.id)), linkId };
      });
      bus.flush();
      return { removedLinkMediaIds: out.removed.map(BigInt), linkMediaId: out.linkId === undefined ? undefined : BigInt(out.linkId) };
    },

    async countCollectionMedia(req) {
      const ids = req.collectionIds.map(Number);
      if (!ids.length) return { counts: [] };
      const rows = await db("media").whereIn("collection_id", ids).where({ is_deleted: false })
        .groupBy("collection_id").select("collection_id").count<{ collection_id: number; count: number }[]>("* as count");
      const byId = new Map(rows.map((r) => [Number(r.collection_id), Number(r.count)]));
      return { counts: ids.map((id) => ({ collectionId: BigInt(id), count: byId.get(id) ?? 0 })) };
    },

    // A stand-in until the media service follows collection.lifecycle itself (with its version
    // check): the former DeleteCollectionMedia work, each action mapped to its mode.
    async applyCollectionLifecycle(req) {
      const ids = req.collectionIds.map(Number);
      const mode = MODE_OF[req.action];
      const affected = await db.transaction(async (trx) => {
        switch (mode) {
          case "soft": {
            const hidden = { is_deleted: true, deleted_at: trx.fn.now(), deleted_with_collection: true, updated_at: trx.fn.now() };
            const own = await trx("media").whereIn("collection_id", ids).where({ is_deleted: false }).update(hidden);
            // The link rows that show these collections inside other collections go with them.
            const links: Array<{ collection_id: number }> = await trx("media").whereIn("linked_collection_id", ids).whereNotIn("collection_id", ids)
              .where({ is_deleted: false }).update(hidden).returning(["collection_id"]);
            const parents = [...new Set(links.map((l) => Number(l.collection_id)))].sort((a, b) => a - b);
            for (const p of parents) {
              await lockCollection(trx, p);
              await renumber(trx, p);
              await bus.enqueue(trx, EVENTS.collectionUpdated, { collection_id: p, kind: "media_removed" });
            }
            return own + links.length;
          }
          case "restore": {
            const own = await trx("media").whereIn("collection_id", ids).where({ is_deleted: true, deleted_with_collection: true })
              .update({ is_deleted: false, deleted_at: null, deleted_with_collection: false, updated_at: trx.fn.now() });
            // Link rows come back at the end of their parents.
            const links: Array<{ id: number; collection_id: number }> = await trx("media").whereIn("linked_collection_id", ids).whereNotIn("collection_id", ids)
              .where({ is_deleted: true, deleted_with_collection: true }).select("id", "collection_id").orderBy("collection_id");
            for (const l of links) {
              const parent = Number(l.collection_id);
              await lockCollection(trx, parent);
              const position = await nextPosition(trx, parent);
              await trx("media").where({ id: l.id }).update({ is_deleted: false, deleted_at: null, deleted_with_collection: false, position, updated_at: trx.fn.now() });
              await bus.enqueue(trx, EVENTS.collectionUpdated, { collection_id: parent, kind: "media_added" });
            }
            return own + links.length;
          }
          default: {
            // Link rows elsewhere that point at these collections go too.
            const rows: MediaRow[] = await trx("media").where((q) => q.whereIn("collection_id", ids).orWhereIn("linked_collection_id", ids)).select("*");
            if (!rows.length) return 0;
            await trx("media").whereIn("id", rows.map((r) => r.id)).delete();
            const touched = new Set(rows.filter((r) => !ids.includes(Number(r.collection_id))).map((r) => Number(r.collection_id)));
            for (const c of touched) {
              await renumber(trx, c);
              await bus.enqueue(trx, EVENTS.collectionUpdated, { collection_id: c, kind: "media_removed" });
            }
            const keys = storeKeysOf(rows);
            // The stored objects are removed only after the rows are gone (this commit).
            if (keys.length) await bus.enqueue(trx, EVENTS.objectsOrphaned, { store_keys: keys });
            return rows.length;
          }
        }
      });
      bus.flush();
      return { affected: Number(affected) };
    },

    async exportCollectionMedia(req) {
      const q = db("media").where({ collection_id: Number(req.collectionId), is_deleted: false }).orderBy([{ column: "position" }, { column: "id" }]);
      if (!req.includeArchived) q.where({ is_archived: false });
      const rows: MediaRow[] = await q.select("*");
      return { media: rows.map(mediaMessage) };
    },
  };
}
