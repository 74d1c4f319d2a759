/**
 * One-call upload rows (media.get_upload_url with a name) waiting for their bytes, and their
 * finalization once the bytes land: reported by the gateway's PUT handler (ObjectUploaded),
 * found on read (get, describe, downloads), or by the periodic upload_finalize job (a presigned
 * S3 PUT never passes through the gateway). A one-call row whose bytes never came is removed
 * once its grant is well past expiry.
 *
 * Finalizing reads the object store, makes thumbnails and asks the collections service whether
 * the key is a cover: all of that runs first, outside any transaction; a short unit of work then
 * claims the pending row and completes the media row. When the row was finalized, replaced or
 * removed meanwhile, the claim finds nothing and what the attempt made is removed again.
 */
import { emitCollectionUpdated, emitObjectsOrphaned, isStoreKey } from "@cms/platform";
import type { MediaRow } from "../domain/media-row.js";
import { callerOfUser } from "./access.js";
import type { Ingest } from "./ingest.js";
import type { MediaDeps } from "./ports.js";
import { removeRows } from "./stored-files.js";

/** How long past its grant's expiry a one-call row waits for its bytes before it is removed. */
export const ABANDON_GRACE_MS = 10 * 60_000;

/** What one finalization attempt found: done, no bytes yet, nothing pending, or another attempt at work. */
export type FinalizeOutcome = "finalized" | "not_uploaded" | "not_pending" | "busy";

/** What ObjectUploaded did: the row it finalized, or the bytes it removed (their row is gone). */
export interface UploadReport { finalized: boolean; row?: MediaRow; removed?: boolean }

/** Finalization of one-call rows over the stores, the object store and ingesting. */
export function createPendingUploads({ stores, unitOfWork, objects, log }: Pick<MediaDeps, "stores" | "unitOfWork" | "objects" | "log">, ingest: Ingest) {
  /**
   * Fills in a one-call row once its object exists: MIME type sniffed, viewer, size, sha256
   * (the gateway's when it streamed the bytes, else hashed here) and thumbnails, as media.create.
   * With skipLocked (the job), a row another finalizer is completing right now is "busy".
   */
  async function finalizePending(mediaId: number, opts: { sha256?: string; skipLocked?: boolean } = {}): Promise<FinalizeOutcome> {
    const p = await stores.media.pending(mediaId);
    if (!p) return "not_pending";
    if (!(await objects.head(p.store_key))) return "not_uploaded";
    const before = await stores.media.byId(mediaId);
    if (!before) return "not_pending";
    const made: string[] = [];
    try {
      const ingested = await ingest.ingestSource(callerOfUser(p.user_id), p.owner_user_id, Number(p.collection_id), p.store_key, undefined, !before.thumbnail_url);
      made.push(...[ingested.thumbnail_url, ingested.background_image_url].filter((k): k is string => Boolean(k)));
      const sha256 = opts.sha256 ?? (await ingest.hashObject(p.store_key))?.sha256 ?? null;
      return await unitOfWork(async ({ media }, events): Promise<FinalizeOutcome> => {
        const claimed = await media.pending(mediaId, { lock: opts.skipLocked ? "skip" : "wait" });
        if (!claimed) {
          // Finalized, replaced or removed meanwhile (or being finalized by another right now).
          await emitObjectsOrphaned(events, made);
          if (!opts.skipLocked) return "not_pending";
          return (await media.pending(mediaId)) ? "busy" : "not_pending";
        }
        const row = (await media.byId(mediaId, { forUpdate: true }))!;
        // A thumbnail set meanwhile (media.update) stays; the ones made here then go.
        const useThumbnails = Boolean(ingested.thumbnail_url) && !row.thumbnail_url;
        await media.update(mediaId, {
          viewer: ingested.viewer, mime_type: ingested.mime_type, size_bytes: ingested.size_bytes, sha256,
          ...(useThumbnails ? { thumbnail_url: ingested.thumbnail_url, background_image_url: ingested.background_image_url ?? null } : {}),
        });
        await media.removePending(mediaId);
        if (!useThumbnails) await emitObjectsOrphaned(events, made);
        await emitCollectionUpdated(events, { collectionId: Number(claimed.collection_id), kind: "media_updated" });
        return "finalized";
      });
    } catch (err) {
      await ingest.removeObjects(made);
      throw err;
    }
  }

  /** Finalizes the row on read when it is a one-call row still waiting; the row as it now is. */
  async function finalizedRow(row: MediaRow): Promise<{ row: MediaRow; pending: boolean }> {
    if (!isStoreKey(row.main_url) || row.size_bytes !== null) return { row, pending: false };
    const outcome = await finalizePending(Number(row.id));
    if (outcome === "not_uploaded") return { row, pending: true };
    const now = await stores.media.byId(Number(row.id));
    return { row: now ?? row, pending: false };
  }

  /** Removes a one-call row whose bytes never arrived (the grant expired long ago). */
  async function removeAbandoned(mediaId: number): Promise<boolean> {
    const p = await stores.media.pending(mediaId);
    if (!p || (await objects.head(p.store_key))) return false;
    return unitOfWork(async (unit, events) => {
      const { media } = unit;
      const claimed = await media.pending(mediaId, { lock: "skip" });
      if (!claimed) return false;
      const collectionId = Number(claimed.collection_id);
      await media.lockCollections([collectionId]);
      // A thumbnail set meanwhile (media.update) goes with the row.
      await removeRows(unit, events, [mediaId]);
      await media.renumber(collectionId);
      await emitCollectionUpdated(events, { collectionId, kind: "media_removed" });
      return true;
    });
  }

  /** The upload_finalize job: one-call rows whose bytes landed without the gateway seeing them. */
  async function finalizeJob(now = new Date()) {
    const pending = await stores.media.pendingBatch(500);
    let finalized = 0;
    let abandoned = 0;
    let waiting = 0;
    for (const p of pending) {
      try {
        const outcome = await finalizePending(Number(p.media_id), { skipLocked: true });
        if (outcome === "finalized") finalized++;
        else if (outcome === "not_uploaded" && new Date(p.expires_at).getTime() + ABANDON_GRACE_MS < now.getTime()) {
          if (await removeAbandoned(Number(p.media_id))) abandoned++;
        } else if (outcome !== "not_pending") waiting++;
      } catch (err) {
        log.warn({ err, media_id: p.media_id }, "finalizing a one-call upload failed; retried on the next run");
        waiting++;
      }
    }
    return { finalized, abandoned, waiting };
  }

  /**
   * ObjectUploaded (from the gateway's PUT handler): finalize the one-call row of this key now.
   * Bytes of a one-call row deleted meanwhile are removed (no row will ever reference them).
   */
  async function objectUploaded(input: { storeKey: string; mediaId?: number; sha256?: string }): Promise<UploadReport> {
    const p = await stores.media.pendingByKey(input.storeKey);
    if (p) {
      await finalizePending(Number(p.media_id), { sha256: input.sha256 });
      return { finalized: true, row: await stores.media.byId(Number(p.media_id)) };
    }
    if (input.mediaId !== undefined) {
      const row = await stores.media.byId(input.mediaId);
      if (row?.main_url === input.storeKey) return { finalized: false, row };
      if (!(await stores.media.isReferenced(input.storeKey))) {
        await ingest.removeObjects([input.storeKey]);
        return { finalized: false, removed: true };
      }
    }
    return { finalized: false };
  }

  return { finalizePending, finalizedRow, finalizeJob, objectUploaded };
}

/** Finalization of one-call upload rows. */
export type PendingUploads = ReturnType<typeof createPendingUploads>;
