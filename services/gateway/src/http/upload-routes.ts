/**
 * PUT targets on the API origin: byte_upload_url (/storage/v1/upload/<grant>) and, on the
 * embedded store, the presigned-equivalent upload_url (/storage/v1/object/<grant>). The grant in
 * the URL is the credential (no Authorization header): it names one store key, content type and
 * (when the minting call gave one) length, and expires. Content-Length is required. Bodies
 * stream to the object store under the 100 MiB cap; a short, long or oversized body leaves
 * nothing behind, a body that stops arriving is refused 408 (CLIENT_IDLE_MS), and a key
 * holds one upload only (a second PUT is refused). When the grant was
 * minted for a row created at mint time (media.get_upload_url's one-call flow), the media
 * service is told at once so that the row gets its size, type, sha256 and thumbnails.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { MediaSchema } from "@cms/contracts/media/v1/resources_pb";
import { AppError, ObjectLengthMismatchError, ObjectTooLargeError, verifyGrant, type Clients, type Logger, type ObjectStore } from "@cms/platform";
import { BYTE_UPLOAD_PREFIX, MAX_PUT_BYTES, OBJECT_UPLOAD_PREFIX, type UploadGrant } from "@cms/platform/upload-urls";
import { renderObject } from "../domain/render.js";
import { sendError, sendJson } from "./answers.js";
import { uploadBody } from "./read-body.js";

/** The paths of upload URLs: byte_upload_url and the embedded store's upload_url. */
export const UPLOAD_PREFIXES = [BYTE_UPLOAD_PREFIX, OBJECT_UPLOAD_PREFIX];

/** PUT <upload prefix><grant>: stores the body under the grant's key. */
export function createUploadHandler(deps: { store: ObjectStore; grantSecret: string; log: Logger; clients?: Clients; bodyIdleMs: number }) {
  return async function handleUpload(req: IncomingMessage, res: ServerResponse, token: string): Promise<void> {
    try {
      if (req.method !== "PUT") throw new AppError("invalid_request", "Upload URLs take PUT.");
      const grant = verifyGrant<UploadGrant>(deps.grantSecret, decodeURIComponent(token), "upload");
      const lengthHeader = req.headers["content-length"];
      if (lengthHeader === undefined) {
        res.setHeader("connection", "close");
        throw new AppError("invalid_request", "Content-Length is required on upload PUTs (chunked bodies are refused).", { field: "Content-Length" }, 411);
      }
      const length = Number(lengthHeader);
      if (length > MAX_PUT_BYTES) { res.setHeader("connection", "close"); throw new AppError("payload_too_large", `Uploads are limited to ${MAX_PUT_BYTES} bytes.`, { max_bytes: MAX_PUT_BYTES }); }
      if (grant.content_length !== undefined && length !== grant.content_length) {
        res.setHeader("connection", "close");
        throw new AppError("invalid_request", `Content-Length ${length} does not match the ${grant.content_length} bytes this upload URL was issued for.`, { field: "Content-Length" });
      }
      const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
      if (type !== grant.content_type) {
        res.setHeader("connection", "close");
        throw new AppError("invalid_request", `Content-Type "${type}" does not match the "${grant.content_type}" this upload URL was issued for.`, { field: "Content-Type" });
      }
      if (await deps.store.head(grant.key)) {
        res.setHeader("connection", "close");
        throw new AppError("conflict", "This upload URL was already used: its object is stored. Mint a new one for another upload.");
      }
      let info;
      try {
        info = await deps.store.put(grant.key, uploadBody(req, deps.bodyIdleMs), { contentType: grant.content_type, contentLength: length, maxBytes: MAX_PUT_BYTES });
      } catch (err) {
        // The store stopped reading before the body's end, and destroyed the body's stream:
        // nothing else reads this connection now. The answer closes it.
        if (!req.complete) res.setHeader("connection", "close");
        if (err instanceof ObjectLengthMismatchError) throw new AppError("invalid_request", `The body did not match Content-Length: ${err.message}.`, { field: "Content-Length" });
        if (err instanceof ObjectTooLargeError) throw new AppError("payload_too_large", err.message);
        // The client went away mid-body (its connection is gone): the store kept nothing, and
        // the answer reaches no one. A store failing on its own (a full disk, S3 resetting its
        // connection) is answered as what it is, a retryable unavailable (503), before the whole
        // body arrived too: the store destroys the body it was reading (which lets go of its
        // socket), not the connection the answer goes out on.
        if (!req.complete && (res.socket?.destroyed ?? true)) {
          throw new AppError("invalid_request", "The upload was interrupted before the whole body arrived; nothing was stored.", { field: "Content-Length" });
        }
        throw err;
      }
      const body: Record<string, unknown> = { ok: true, store_key: grant.key, size_bytes: info.size, sha256: info.sha256, content_type: info.contentType };
      if (grant.media_id !== undefined && deps.clients) {
        // The bytes are stored whatever happens next; a failed report is caught up by the
        // media service's upload_finalize job.
        try {
          const out = await deps.clients.get(MediaService).objectUploaded({ storeKey: grant.key, mediaId: BigInt(grant.media_id), sha256: info.sha256 });
          if (out.media) body.media = renderObject(MediaSchema, out.media);
        } catch (err) {
          deps.log.warn({ err, key: grant.key }, "reporting an upload to the media service failed");
        }
      }
      sendJson(res, 200, JSON.stringify(body));
    } catch (err) {
      sendError(res, err, deps.log);
      req.resume();
    }
  };
}
