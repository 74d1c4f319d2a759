/**
 * The PUT targets of the get_upload_url operations (covers and media), minted one way: a signed
 * "upload" grant bound to one store key, content type and (when known) length, served on the
 * API origin as byte_upload_url, plus a presigned S3 PUT as upload_url (or, on the filesystem
 * store, the equivalent signed URL on the API origin). The gateway's PUT handler
 * (services/gateway/src/http/upload-routes.ts) verifies the same grant.
 */
import type { Config } from "./config.js";
import type { ObjectStore } from "./object-store.js";
import { signGrant, type Grant } from "./grants.js";

/** Largest body a PUT target accepts (enforced while streaming). */
export const MAX_PUT_BYTES = 100 * 1024 * 1024;

export const BYTE_UPLOAD_PREFIX = "/storage/v1/upload/";
export const OBJECT_UPLOAD_PREFIX = "/storage/v1/object/";

export interface UploadGrant extends Grant {
  purpose: "upload";
  key: string;
  content_type: string;
  /** Exact length of the body; absent, any Content-Length up to MAX_PUT_BYTES. */
  content_length?: number;
  user_id: string;
  /** The media row created at mint time (one-call flow): the gateway reports the landed bytes. */
  media_id?: number;
}

export interface UploadTargets {
  upload_url: string;
  byte_upload_url: string;
  store_key: string;
  method: "PUT";
  headers: Record<string, string>;
  expires_at: Date;
  max_bytes: number;
}

export async function mintUploadTargets(
  ctx: { config: Config; store: ObjectStore },
  input: { storeKey: string; contentType: string; contentLength?: number; userId: string; mediaId?: number },
): Promise<UploadTargets> {
  const { config, store } = ctx;
  const ttlMs = config.uploadGrantTtlMs;
  const expiresAt = new Date(Date.now() + ttlMs);
  const grant: UploadGrant = { purpose: "upload", exp: expiresAt.getTime(), key: input.storeKey, content_type: input.contentType, user_id: input.userId };
  if (input.contentLength !== undefined) grant.content_length = input.contentLength;
  if (input.mediaId !== undefined) grant.media_id = input.mediaId;
  const token = signGrant(config.grantSecret!, grant);
  // Without a length the presigned PUT signs no Content-Length (S3 then takes any length).
  const presigned = await store.presignPut(input.storeKey, {
    contentType: input.contentType, contentLength: input.contentLength, expiresInSeconds: Math.ceil(ttlMs / 1000),
  });
  const headers: Record<string, string> = { "Content-Type": input.contentType };
  if (input.contentLength !== undefined) headers["Content-Length"] = String(input.contentLength);
  return {
    upload_url: presigned ?? `${config.baseUrl}${OBJECT_UPLOAD_PREFIX}${token}`,
    byte_upload_url: `${config.baseUrl}${BYTE_UPLOAD_PREFIX}${token}`,
    store_key: input.storeKey,
    method: "PUT",
    headers,
    expires_at: expiresAt,
    max_bytes: MAX_PUT_BYTES,
  };
}
