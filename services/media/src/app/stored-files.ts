/**
 * Pieces shared by every route that brings bytes in (media.upload, the chunked upload, the
 * one-call upload URL, drop links): fresh store keys, turning a stored object into a media item
 * exactly as media.create does with an object-store key, hashing stored objects, and removing
 * what a failed attempt stored.
 */
import { createHash } from "node:crypto";
import type { Knex } from "knex";
import type { Caller } from "@cms/platform";
import type { MediaRow } from "../domain/media-json.js";
import { isReservedName } from "../domain/rules.js";
import { insertRow } from "./catalogue.js";
import { ingestSource } from "./ingest.js";
import type { Deps } from "./deps.js";

/** A caller standing for a user named by a signed grant or a stored session (no token). */
export function callerOfUser(userId: string): Caller {
  return { userId, username: "", plan: "free", isAdmin: false, scopes: [], tokenId: "" };
}

/** Deps whose queries (insertRow's included) run inside trx. */
export function withTrx(deps: Deps, trx: Knex.Transaction): Deps {
  return { ...deps, db: trx as unknown as Knex };
}

export interface ItemFields { name?: string | null; description?: string | null; tags: string[]; sha256: string | null }

/**
 * Creates the media item of an object already stored under key: sniffing, viewer and
 * thumbnails come from ingestSource (as media.create with source_url=<store_key>), the row from
 * insertRow. Thumbnails made for a row that then fails to insert are removed again.
 */
export async function createItemFromStored(deps: Deps, caller: Caller, ownerUserId: string, collectionId: number, key: string, fields: ItemFields): Promise<MediaRow> {
  const ingested = await ingestSource(deps, caller, ownerUserId, collectionId, key, undefined, true);
  try {
    return await insertRow(deps, collectionId, ownerUserId, caller.userId, {
      name: fields.name ?? null,
      description: fields.description ?? null,
      tags: fields.tags,
      main_url: ingested.main_url,
      viewer: ingested.viewer,
      mime_type: ingested.mime_type,
      size_bytes: ingested.size_bytes,
      sha256: fields.sha256 ?? ingested.sha256,
      thumbnail_url: ingested.thumbnail_url ?? null,
      background_image_url: ingested.background_image_url ?? null,
    });
  } catch (err) {
    await removeObjects(deps, [ingested.thumbnail_url, ingested.background_image_url]);
    throw err;
  }
}

/** Best-effort removal of objects a failed attempt stored. */
export async function removeObjects(deps: Deps, keys: Array<string | null | undefined>): Promise<void> {
  const list = keys.filter((k): k is string => Boolean(k));
  if (!list.length) return;
  await deps.ctx.store.delete(list).catch((err) => deps.ctx.log.warn({ err, keys: list }, "could not remove objects of a failed upload"));
}

/** Hex SHA-256 of a stored object, streamed. */
export async function hashObject(deps: Deps, key: string): Promise<{ sha256: string; size: number } | undefined> {
  const obj = await deps.ctx.store.get(key);
  if (!obj) return undefined;
  const hash = createHash("sha256");
  let size = 0;
  for await (const c of obj.body) { hash.update(c as Buffer); size += (c as Buffer).length; }
  return { sha256: hash.digest("hex"), size };
}

/** A name for an item made from a file: the given name, else the file's own name. */
export function itemName(name: string | undefined, filename: string | undefined): string | null {
  if (name !== undefined) return name;
  const base = filename?.split(/[\\/]/).pop()?.trim();
  if (!base || isReservedName(base)) return null;
  return base.slice(0, 500);
}
