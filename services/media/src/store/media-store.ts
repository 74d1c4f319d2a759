/** Knex repository of media rows. */
import type { Knex } from "knex";
import { isStoreKey } from "@cms/platform";
import { LINK_VIEWER, linkUrl, type MediaRow } from "../domain/media-json.js";

/** Serialises position assignment within one collection (dense positions under concurrency). */
export async function lockCollection(trx: Knex.Transaction, collectionId: number): Promise<void> {
  await trx.raw("SELECT pg_advisory_xact_lock(?, ?)", [0x6d656469, collectionId % 2147483647]);
}

export async function nextPosition(trx: Knex.Transaction, collectionId: number): Promise<number> {
  const row = await trx("media").where({ collection_id: collectionId, is_deleted: false }).max<{ max: number | null }>("position as max").first();
  return row?.max === null || row?.max === undefined ? 0 : Number(row.max) + 1;
}

/** Rewrites positions 0..n-1 in the current order (after removals or an insert in the middle). */
export async function renumber(trx: Knex.Transaction, collectionId: number): Promise<void> {
  await trx.raw(
    `UPDATE media m SET position = r.pos FROM (
       SELECT id, row_number() OVER (ORDER BY position, id) - 1 AS pos FROM media WHERE collection_id = ? AND NOT is_deleted
     ) r WHERE m.id = r.id AND m.position <> r.pos`,
    [collectionId],
  );
}

/** Store keys referenced by rows (main file, thumbnails), for removal from the object store. */
export function storeKeysOf(rows: Array<Pick<MediaRow, "main_url" | "thumbnail_url" | "background_image_url">>): string[] {
  const keys = new Set<string>();
  for (const r of rows) for (const u of [r.main_url, r.thumbnail_url, r.background_image_url]) if (u && isStoreKey(u)) keys.add(u);
  return [...keys];
}

export async function insertLinkRow(trx: Knex.Transaction, input: { parentId: number; childId: number; ownerUserId: string; position?: number; description?: string }): Promise<{ id: number; position: number }> {
  await lockCollection(trx, input.parentId);
  const end = await nextPosition(trx, input.parentId);
  const position = input.position === undefined ? end : Math.min(input.position, end);
  if (position < end) {
    await trx("media").where({ collection_id: input.parentId, is_deleted: false }).where("position", ">=", position).increment("position", 1);
  }
  const [row] = await trx("media").insert({
    collection_id: input.parentId,
    owner_user_id: input.ownerUserId,
    created_by: input.ownerUserId,
    name: null,
    description: input.description ?? null,
    main_url: linkUrl(input.childId),
    viewer: LINK_VIEWER,
    linked_collection_id: input.childId,
    position,
  }).returning(["id", "position"]);
  return { id: Number(row.id), position: row.position };
}
