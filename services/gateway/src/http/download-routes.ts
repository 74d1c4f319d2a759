/**
 * Byte routes that read the object store: media.download_url links
 * (/storage/v1/download/<grant>[/<name>], the grant is the credential) and describe's proxy URLs
 * (/storage/v1/media/<id>/<main|thumbnail|background>, through the admission chain: apikey,
 * bearer token with media:read, rate limit). Both stream through the object streamer.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { createContextValues } from "@connectrpc/connect";
import type { StoredObject } from "@cms/contracts/common/v1/common_pb";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { AppError, actAsKey, fromConnectError, verifyGrant, type Caller, type Clients, type DownloadGrant, type Logger } from "@cms/platform";

export { DOWNLOAD_PREFIX } from "@cms/platform";
import type { Admit } from "./admission.js";
import { sendError } from "./answers.js";
import { objectRefOf, type ObjectStreamer } from "./object-stream.js";

/** Where media.describe's proxy URLs point. */
export const MEDIA_PROXY_PREFIX = "/storage/v1/media/";

/** GET/HEAD /storage/v1/download/<grant>[/<name>]: a media.download_url link, no header needed. */
export function createDownloadLinkHandler(deps: { grantSecret: string; streamObject: ObjectStreamer; log: Logger }) {
  return async function handleDownloadLink(req: IncomingMessage, res: ServerResponse, rest: string): Promise<void> {
    try {
      if (req.method !== "GET" && req.method !== "HEAD") throw new AppError("invalid_request", "Download links take GET or HEAD.");
      const token = decodeURIComponent(rest.split("/")[0] ?? "");
      const grant = verifyGrant<DownloadGrant>(deps.grantSecret, token, "download");
      await deps.streamObject(req, res, { store_key: grant.key, content_type: grant.content_type, filename: grant.filename }, { disposition: "attachment" });
    } catch (err) {
      sendError(res, err, deps.log);
    }
  };
}

/** What the media proxy needs: the admission chain, the media service and the streamer. */
export interface MediaProxyDeps {
  admit: Admit;
  clients: Clients;
  streamObject: ObjectStreamer;
  log: Logger;
}

/** GET/HEAD /storage/v1/media/<id>/<part>: describe's proxy URLs (apikey + bearer, media:read). */
export function createMediaProxyHandler(deps: MediaProxyDeps) {
  return async function handleMediaProxy(req: IncomingMessage, res: ServerResponse, rest: string): Promise<void> {
    try {
      if (req.method !== "GET" && req.method !== "HEAD") throw new AppError("invalid_request", "Media proxy URLs take GET or HEAD.");
      const { caller } = await deps.admit(req, res, { authorize: mayReadMedia });
      const m = /^(\d+)\/(main|thumbnail|background)$/.exec(rest);
      if (!m) throw new AppError("not_found", `No media proxy route ${MEDIA_PROXY_PREFIX}${rest}; use ${MEDIA_PROXY_PREFIX}<media_id>/<main|thumbnail|background>.`);
      let object: StoredObject | undefined;
      try {
        ({ object } = await deps.clients.get(MediaService).resolveMediaObject(
          { mediaId: BigInt(m[1]!), part: m[2]! },
          // mayReadMedia admitted a user, never an anonymous call.
          { contextValues: createContextValues().set(actAsKey, caller!) },
        ));
      } catch (err) {
        throw fromConnectError(err);
      }
      if (!object) throw new AppError("not_found", "The stored file is missing.");
      await deps.streamObject(req, res, objectRefOf(object), { disposition: "inline" });
    } catch (err) {
      sendError(res, err, deps.log);
    }
  };
}

/** The proxy's rule: a user's token with media:read (no anonymous reads; links serve those). */
export function mayReadMedia(caller: Caller | undefined): void {
  if (!caller) throw new AppError("unauthorized", "Missing access token: send \"Authorization: Bearer <access token>\" (or use media.download_url for a link that needs none).");
  if (!caller.scopes.includes("media:read")) throw new AppError("insufficient_scope", "The token lacks the scope media:read required to read media files.", { need: "media:read" });
}
