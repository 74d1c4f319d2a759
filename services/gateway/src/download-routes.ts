/**
 * Bytes out of the object store, streamed (never buffered) with Content-Type, Content-Length,
 * ETag, Range (206/416) and If-None-Match (304): one streamer used by media.download at the JSON
 * endpoint (streams_object operations), by media.download_url links
 * (/storage/v1/download/<grant>[/<name>], the grant is the credential) and by describe's proxy
 * URLs (/storage/v1/media/<id>/<main|thumbnail|background>, apikey and bearer token needed).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { pipeline } from "node:stream/promises";
import { createContextValues } from "@connectrpc/connect";
import type { StoredObject } from "@cms/contracts/common/v1/common_pb";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import {
  AppError, actAsKey, fromConnectError, verifyGrant, type Clients, type Grant, type Logger, type ObjectStore,
} from "@cms/platform";
import { bearerOf, type ApiKeyChecker, type TokenResolver } from "./access.js";
import type { RateLimiter } from "./rate-limit.js";
import { errorOutcome, sendJson } from "./op-endpoint.js";
import { contentDisposition, etagMatches, ifRangeHolds, parseRange } from "./http-range.js";

export const DOWNLOAD_PREFIX = "/storage/v1/download/";
export const MEDIA_PROXY_PREFIX = "/storage/v1/media/";

/** The object an operation or a link names (the `object` of a streams_object result). */
export interface ObjectRef { store_key: string; content_type?: string | null; filename?: string; sha256?: string | null }

/** The ObjectRef of a common.v1.StoredObject that a service answered with. */
export function objectRefOf(o: StoredObject): ObjectRef {
  return { store_key: o.storeKey, content_type: o.contentType ?? null, filename: o.filename, sha256: o.sha256 ?? null };
}

export interface StreamOptions { disposition: "inline" | "attachment"; headers?: Record<string, string> }

export type ObjectStreamer = (req: IncomingMessage, res: ServerResponse, ref: ObjectRef, opts: StreamOptions) => Promise<void>;

export function createObjectStreamer(store: ObjectStore, log: Logger): ObjectStreamer {
  return async function streamObject(req, res, ref, opts) {
    const info = await store.head(ref.store_key);
    if (!info) throw new AppError("not_found", "The stored file is missing.");
    const etag = `"${info.etag || info.size.toString(16)}"`;
    const filename = ref.filename ?? ref.store_key.split("/").pop() ?? "file";
    const common: Record<string, string> = {
      etag,
      "accept-ranges": "bytes",
      "cache-control": "private, max-age=0, must-revalidate",
      "x-content-type-options": "nosniff",
      // Stored files are user content: never run as a page on the API origin.
      "content-security-policy": "sandbox; default-src 'none'",
      "content-disposition": contentDisposition(opts.disposition, filename),
      ...opts.headers,
    };
    if (etagMatches(header(req, "if-none-match"), etag)) {
      res.writeHead(304, common);
      res.end();
      return;
    }
    let range = parseRange(header(req, "range"), info.size);
    if (range.kind !== "full" && !ifRangeHolds(header(req, "if-range"), etag)) range = { kind: "full" };
    if (range.kind === "unsatisfiable") {
      const body = JSON.stringify({ error: "invalid_request", detail: `The requested range is outside the ${info.size}-byte file.`, size_bytes: info.size });
      res.writeHead(416, { ...common, "content-range": `bytes */${info.size}`, "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    const partial = range.kind === "partial" ? range : undefined;
    const obj = info.size === 0 && !partial ? undefined : await store.get(ref.store_key, partial ? { start: partial.start, end: partial.end } : undefined);
    if (!obj && info.size !== 0) throw new AppError("not_found", "The stored file is missing.");
    const headers: Record<string, string> = {
      ...common,
      "content-type": ref.content_type || info.contentType || "application/octet-stream",
      "content-length": String(partial ? partial.end - partial.start + 1 : info.size),
    };
    if (partial) headers["content-range"] = `bytes ${partial.start}-${partial.end}/${info.size}`;
    res.writeHead(partial ? 206 : 200, headers);
    if (!obj || req.method === "HEAD") {
      obj?.body.destroy();
      res.end();
      return;
    }
    try {
      await pipeline(obj.body, res);
    } catch (err) {
      // The client went away, or the store failed mid-stream: the response cannot be repaired.
      log.debug({ err, key: ref.store_key }, "object stream ended early");
      obj.body.destroy();
      res.destroy();
    }
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}

function fail(res: ServerResponse, err: unknown, log: Logger): void {
  const out = errorOutcome(err, log);
  if (!res.headersSent) sendJson(res, out.status, out.body);
  else res.destroy();
}

interface DownloadGrant extends Grant { key: string; content_type: string | null; filename: string }

/** GET/HEAD /storage/v1/download/<grant>[/<name>]: a media.download_url link, no header needed. */
export function createDownloadLinkHandler(deps: { grantSecret: string; streamObject: ObjectStreamer; log: Logger }) {
  return async function handleDownloadLink(req: IncomingMessage, res: ServerResponse, rest: string): Promise<void> {
    try {
      if (req.method !== "GET" && req.method !== "HEAD") throw new AppError("invalid_request", "Download links take GET or HEAD.");
      const token = decodeURIComponent(rest.split("/")[0] ?? "");
      const grant = verifyGrant<DownloadGrant>(deps.grantSecret, token, "download");
      await deps.streamObject(req, res, { store_key: grant.key, content_type: grant.content_type, filename: grant.filename }, { disposition: "attachment" });
    } catch (err) {
      fail(res, err, deps.log);
    }
  };
}

export interface MediaProxyDeps {
  apiKeys: ApiKeyChecker;
  tokens: TokenResolver;
  rateLimiter: RateLimiter;
  clients: Clients;
  streamObject: ObjectStreamer;
  log: Logger;
}

/** GET/HEAD /storage/v1/media/<id>/<part>: describe's proxy URLs (apikey + bearer, media:read). */
export function createMediaProxyHandler(deps: MediaProxyDeps) {
  return async function handleMediaProxy(req: IncomingMessage, res: ServerResponse, rest: string): Promise<void> {
    try {
      if (req.method !== "GET" && req.method !== "HEAD") throw new AppError("invalid_request", "Media proxy URLs take GET or HEAD.");
      const apikey = req.headers.apikey;
      if (!(await deps.apiKeys.check(Array.isArray(apikey) ? apikey[0] : apikey))) {
        throw new AppError("unauthorized", apikey ? "The apikey header is not a valid gateway API key." : "Missing gateway API key: send it in the \"apikey\" header.");
      }
      const token = bearerOf(req.headers.authorization);
      if (!token) throw new AppError("unauthorized", "Missing access token: send \"Authorization: Bearer <access token>\" (or use media.download_url for a link that needs none).");
      const caller = await deps.tokens.resolve(token);
      if (!caller) throw new AppError("unauthorized", "The access token is invalid, expired or revoked.");
      if (!caller.scopes.includes("media:read")) throw new AppError("insufficient_scope", "The token lacks the scope media:read required to read media files.", { need: "media:read" });
      const rate = await deps.rateLimiter.hit(`u:${caller.userId}`);
      if (!rate.allowed) {
        const retry = String(Math.max(1, Math.ceil(rate.resetMs / 1000)));
        res.setHeader("retry-after", retry);
        throw new AppError("rate_limited", `Rate limit of ${rate.limit} requests per minute exceeded; retry in ${retry} s.`, { retry_after_seconds: Number(retry) });
      }
      const m = /^(\d+)\/(main|thumbnail|background)$/.exec(rest);
      if (!m) throw new AppError("not_found", `No media proxy route ${MEDIA_PROXY_PREFIX}${rest}; use ${MEDIA_PROXY_PREFIX}<media_id>/<main|thumbnail|background>.`);
      let object: StoredObject | undefined;
      try {
        ({ object } = await deps.clients.get(MediaService).resolveMediaObject(
          { mediaId: BigInt(m[1]!), part: m[2]! },
          { contextValues: createContextValues().set(actAsKey, caller) },
        ));
      } catch (err) {
        throw fromConnectError(err);
      }
      if (!object) throw new AppError("not_found", "The stored file is missing.");
      await deps.streamObject(req, res, objectRefOf(object), { disposition: "inline" });
    } catch (err) {
      fail(res, err, deps.log);
    }
  };
}
