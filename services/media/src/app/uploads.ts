/**
 * Single-call uploads and upload URLs: media.upload (base64, at most 100KB), media.get_upload_url
 * (PUT targets for a media file or a thumbnail; with a name, the one-call flow creates the row at
 * mint time), and the finalization of those one-call rows once their bytes land: reported by the
 * gateway's PUT handler (ObjectUploaded), found on read (downloads), or by the periodic
 * upload_finalize job (the presigned S3 PUT never passes through the gateway). A one-call row
 * whose bytes never came is removed once its grant is well past expiry.
 */
import type { Knex } from "knex";
import { AppError, freshStoreKey, isRasterImage, isStoreKey, type Caller } from "@cms/platform";
import { mintUploadTargets, type UploadTargets } from "@cms/platform/upload-urls";
import type { MediaRow } from "../domain/media-json.js";
import { checkName, normalizeTags, viewerOfMime } from "../domain/rules.js";
import { SINGLE_UPLOAD_MAX_BYTES, decodeVerified, mimeOfFilename } from "../domain/transfer-rules.js";
import { lockCollection, renumber } from "../store/media-store.js";
import { insertRow } from "./catalogue.js";
import { authorize, emitUpdated, type Deps } from "./deps.js";
import { ingestSource, sniffBytes } from "./ingest.js";
import {
  callerOfUser, createItemFromStored, hashObject, itemName, removeObjects, withTrx,
} from "./stored-files.js";

/** How long past its grant's expiry a one-call row waits for its bytes before it is removed. */
export const ABANDON_GRACE_MS = 10 * 60_000;

export interface UploadInput {
  collectionId: number; name?: string; filename?: string; contentBase64: string; contentLength: number; sha256?: string;
  description?: string; tags: string[];
}

/** media.upload: verify, store durably, then create the row exactly as media.create would. */
export async function uploadMedia(deps: Deps, caller: Caller, input: UploadInput): Promise<MediaRow> {
  checkName(input.name);
  const tags = normalizeTags(input.tags);
  const access = await authorize(deps, caller, input.collectionId, "upload");
  const bytes = decodeVerified({
    base64: input.contentBase64, contentLength: input.contentLength, sha256: input.sha256, maxBytes: SINGLE_UPLOAD_MAX_BYTES,
    tooLarge: `media.upload takes at most ${SINGLE_UPLOAD_MAX_BYTES} decoded bytes; use media.get_upload_url or the chunked upload (media.upload_begin) for larger files.`,
  });
  const mime = await sniffBytes(bytes.subarray(0, 4100), mimeOfFilename(input.filename));
  const key = freshStoreKey(caller.userId, input.collectionId, input.filename, "upload");
  // The row comes only after the object is durably stored (the store fsyncs, then renames).
  const stored = await deps.ctx.store.put(key, bytes, { contentType: mime, contentLength: bytes.length });
  try {
    const row = await createItemFromStored(deps, caller, access.ownerUserId, input.collectionId, key, {
      name: itemName(input.name, input.filename), description: input.description ?? null, tags, sha256: stored.sha256,
    });
    return row;
  } catch (err) {
    await removeObjects(deps, [key]);
    throw err;
  }
}

export interface UploadUrlInput {
  collectionId: number; filename?: string; contentType?: string; purpose: "media" | "thumbnail"; name?: string;
  description?: string; tags: string[]; contentLength?: number;
}

/**
 * What media.get_upload_url minted: the PUT targets, the flow of purpose=media (classic, or
 * one_call with the row made now) and the next step.
 */
export interface MintedUpload { targets: UploadTargets; purpose: "media" | "thumbnail"; flow?: "classic" | "one_call"; row?: MediaRow; nextStep: string }

/** media.get_upload_url: PUT targets for one new store key; with purpose=media and a name, the row too. */
export async function getUploadUrl(deps: Deps, caller: Caller, input: UploadUrlInput): Promise<MintedUpload> {
  checkName(input.name);
  const tags = normalizeTags(input.tags);
  if (input.purpose === "thumbnail") {
    for (const [field, given] of [["name", input.name !== undefined], ["description", input.description !== undefined], ["tags", input.tags.length > 0]] as const) {
      if (given) throw new AppError("invalid_request", `${field} belongs to purpose=media; a thumbnail upload only mints the PUT target.`, { field });
    }
    await authorize(deps, caller, input.collectionId, "edit");
    const type = (input.contentType ?? mimeOfFilename(input.filename))?.toLowerCase();
    if (!type) throw new AppError("invalid_request", "content_type is required for a thumbnail upload (or a filename with an image extension).", { field: "content_type" });
    if (!isRasterImage(type)) throw new AppError("invalid_request", "A thumbnail must be a raster image (image/jpeg, image/png, image/webp, image/gif, image/avif).", { field: "content_type" });
    const key = freshStoreKey(caller.userId, input.collectionId, input.filename, `thumbnail.${type.split("/")[1]}`);
    const targets = await mintUploadTargets(deps.ctx, { storeKey: key, contentType: type, contentLength: input.contentLength, userId: caller.userId });
    return {
      targets, purpose: "thumbnail",
      nextStep: "PUT the bytes (no Authorization header), set thumbnail_url on the media row to store_key with media.update, then call media.thumbnail_finalize.",
    };
  }
  if (input.name === undefined) {
    // The classic flow makes no row: media.create makes the item later, with its own fields, so these would be lost.
    for (const [field, given] of [["description", input.description !== undefined], ["tags", input.tags.length > 0]] as const) {
      if (given) throw new AppError("invalid_request", `${field} is not kept by the classic flow (purpose=media without name): give name for the one-call flow, which creates the item now, or pass ${field} to media.create.`, { field });
    }
  }
  const access = await authorize(deps, caller, input.collectionId, "upload");
  const type = (input.contentType ?? mimeOfFilename(input.filename) ?? "application/octet-stream").toLowerCase();
  const key = freshStoreKey(caller.userId, input.collectionId, input.filename, "upload");
  const expiresAt = Date.now() + deps.ctx.config.uploadGrantTtlMs;
  if (input.name === undefined) {
    const targets = await mintUploadTargets(deps.ctx, { storeKey: key, contentType: type, contentLength: input.contentLength, userId: caller.userId });
    return {
      targets, purpose: "media", flow: "classic",
      nextStep: "PUT the bytes (no Authorization header), then call media.create with source_url set to store_key.",
    };
  }
  // One-call flow: the row exists from now on; its size, type, sha256 and thumbnails follow the bytes.
  const row = await deps.db.transaction(async (trx) => {
    const r = await insertRow(withTrx(deps, trx), input.collectionId, access.ownerUserId, caller.userId, {
      name: input.name, description: input.description ?? null, tags, main_url: key, viewer: viewerOfMime(type), mime_type: type,
      size_bytes: null, sha256: null,
    });
    await trx("pending_uploads").insert({
      media_id: r.id, store_key: key, user_id: caller.userId, collection_id: input.collectionId, owner_user_id: access.ownerUserId,
      content_type: type, expires_at: new Date(expiresAt),
    });
    return r;
  });
  deps.ctx.bus.flush();
  const targets = await mintUploadTargets(deps.ctx, { storeKey: key, contentType: type, contentLength: input.contentLength, userId: caller.userId, mediaId: Number(row.id) });
  return {
    targets, purpose: "media", flow: "one_call", row,
    nextStep: "PUT the bytes (no Authorization header). The media item already exists: do not call media.create. Its size, type and thumbnails are filled in once the bytes land; an item whose bytes never arrive is removed after the upload URL expires.",
  };
}

type PendingRow = { media_id: number; store_key: string; user_id: string; collection_id: number; owner_user_id: string; content_type: string; expires_at: Date };

export type FinalizeOutcome = "finalized" | "not_uploaded" | "not_pending" | "busy";

/**
 * Fills in a one-call row once its object exists: MIME type sniffed, viewer, size, sha256
 * (the gateway's when it streamed the bytes, else hashed here) and thumbnails, as media.create.
 */
export async function finalizePending(deps: Deps, mediaId: number, opts: { sha256?: string; skipLocked?: boolean } = {}): Promise<FinalizeOutcome> {
  const made: string[] = [];
  try {
    const outcome = await deps.db.transaction(async (trx): Promise<FinalizeOutcome> => {
      const q = trx("pending_uploads").where({ media_id: mediaId }).forUpdate();
      if (opts.skipLocked) q.skipLocked();
      const p: PendingRow | undefined = await q.first();
      if (!p) {
        if (!opts.skipLocked) return "not_pending";
        return (await trx("pending_uploads").where({ media_id: mediaId }).first()) ? "busy" : "not_pending";
      }
      const info = await deps.ctx.store.head(p.store_key);
      if (!info) return "not_uploaded";
      const row: MediaRow = await trx("media").where({ id: mediaId }).first();
      const ingested = await ingestSource(withTrx(deps, trx), callerOfUser(p.user_id), p.owner_user_id, Number(p.collection_id), p.store_key, undefined, !row.thumbnail_url);
      made.push(...[ingested.thumbnail_url, ingested.background_image_url].filter((k): k is string => Boolean(k)));
      const sha256 = opts.sha256 ?? (await hashObject(deps, p.store_key))?.sha256 ?? null;
      await trx("media").where({ id: mediaId }).update({
        viewer: ingested.viewer, mime_type: ingested.mime_type, size_bytes: ingested.size_bytes, sha256,
        ...(ingested.thumbnail_url ? { thumbnail_url: ingested.thumbnail_url, background_image_url: ingested.background_image_url ?? null } : {}),
        updated_at: new Date(),
      });
      await trx("pending_uploads").where({ media_id: mediaId }).delete();
      await emitUpdated(deps, trx, Number(p.collection_id), "media_updated");
      return "finalized";
    });
    deps.ctx.bus.flush();
    return outcome;
  } catch (err) {
    await removeObjects(deps, made);
    throw err;
  }
}

/** Finalizes the row on read when it is a one-call row still waiting; the row as it now is. */
export async function finalizedRow(deps: Deps, row: MediaRow): Promise<{ row: MediaRow; pending: boolean }> {
  if (!isStoreKey(row.main_url) || row.size_bytes !== null) return { row, pending: false };
  const outcome = await finalizePending(deps, Number(row.id));
  if (outcome === "not_uploaded") return { row, pending: true };
  const now: MediaRow | undefined = await deps.db("media").where({ id: row.id }).first();
  return { row: now ?? row, pending: false };
}

/** Removes a one-call row whose bytes never arrived (the grant expired long ago). */
async function removeAbandoned(deps: Deps, mediaId: number): Promise<boolean> {
  const removed = await deps.db.transaction(async (trx: Knex.Transaction) => {
    const p: PendingRow | undefined = await trx("pending_uploads").where({ media_id: mediaId }).forUpdate().skipLocked().first();
    if (!p || (await deps.ctx.store.head(p.store_key))) return false;
    const collectionId = Number(p.collection_id);
    await lockCollection(trx, collectionId);
    await trx("media").where({ id: mediaId }).delete();
    await renumber(trx, collectionId);
    await emitUpdated(deps, trx, collectionId, "media_removed");
    return true;
  });
  deps.ctx.bus.flush();
  return removed;
}

/** The upload_finalize job: one-call rows whose bytes landed without the gateway seeing them. */
export async function finalizeJob(deps: Deps, now = new Date()) {
  const pending: Array<{ media_id: number; expires_at: Date }> = await deps.db("pending_uploads").orderBy("created_at").limit(500).select("media_id", "expires_at");
  let finalized = 0;
  let abandoned = 0;
  let waiting = 0;
  for (const p of pending) {
    try {
      const outcome = await finalizePending(deps, Number(p.media_id), { skipLocked: true });
      if (outcome === "finalized") finalized++;
      else if (outcome === "not_uploaded" && new Date(p.expires_at).getTime() + ABANDON_GRACE_MS < now.getTime()) {
        if (await removeAbandoned(deps, Number(p.media_id))) abandoned++;
      } else if (outcome !== "not_pending") waiting++;
    } catch (err) {
      deps.ctx.log.warn({ err, media_id: p.media_id }, "finalizing a one-call upload failed; retried on the next run");
      waiting++;
    }
  }
  return { finalized, abandoned, waiting };
}

/**
 * ObjectUploaded (from the gateway's PUT handler): finalize the one-call row of this key now.
 * Bytes of a one-call row deleted meanwhile are removed (no row will ever reference them).
 */
export interface UploadReport { finalized: boolean; row?: MediaRow; removed?: boolean }

export async function objectUploaded(deps: Deps, input: { storeKey: string; mediaId?: number; sha256?: string }): Promise<UploadReport> {
  const p: PendingRow | undefined = await deps.db("pending_uploads").where({ store_key: input.storeKey }).first();
  if (p) {
    await finalizePending(deps, Number(p.media_id), { sha256: input.sha256 });
    const row: MediaRow | undefined = await deps.db("media").where({ id: p.media_id }).first();
    return { finalized: true, row };
  }
  if (input.mediaId !== undefined) {
    const row: MediaRow | undefined = await deps.db("media").where({ id: input.mediaId }).first();
    if (row?.main_url === input.storeKey) return { finalized: false, row };
    const { rows } = await deps.db.raw(
      "SELECT 1 FROM media WHERE main_url = ? OR thumbnail_url = ? OR background_image_url = ? LIMIT 1", [input.storeKey, input.storeKey, input.storeKey],
    );
    if (!rows.length) {
      await removeObjects(deps, [input.storeKey]);
      return { finalized: false, removed: true };
    }
  }
  return { finalized: false };
}
