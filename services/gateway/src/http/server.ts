/**
 * The gateway's HTTP server: CORS on every answer, then one route table (the op endpoint,
 * health checks, static assets, upload PUTs, the byte routes that read the object store, and a
 * 404 in the contract's shape for anything else). A route that throws past its own error
 * handling is logged and answered 500.
 */
import http from "node:http";
import { answerClientError } from "./client-errors.js";
import type { AddressInfo } from "node:net";
import type { Logger } from "@cms/platform";
import { ASSETS_PREFIX } from "./assets.js";
import { sendInternalError, sendJson } from "./answers.js";
import { OP_PATH } from "./op-endpoint.js";
import { UPLOAD_PREFIXES } from "./upload-routes.js";

/** A handler of one request. */
export type RouteHandler = (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>;

/** A handler of the paths under a prefix, given the rest of the path. */
export type PrefixHandler = (req: http.IncomingMessage, res: http.ServerResponse, rest: string) => Promise<void>;

/** A route whose bytes go to or come from the object store: prefix, handler, log message. */
export type ByteRoute = [prefix: string, handler: PrefixHandler, failure: string];

/** The handlers the server routes to. */
export interface GatewayRoutes {
  log: Logger;
  handleOp: RouteHandler;
  /** Given the whole path (under /assets/). */
  handleAsset: PrefixHandler;
  /** Given the grant (the path after its upload prefix). */
  handleUpload: PrefixHandler;
  byteRoutes: ByteRoute[];
  /** Exact paths served by a handler of their own (the player channel, pages). */
  pages?: Array<[string, RouteHandler]>;
  /** GET/HEAD of a path no other route took that has a share URL's shape (/{handle}/{slug}): the player page. */
  sharePage?: { matches(path: string): boolean; handle: RouteHandler };
}

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "POST, GET, PUT, OPTIONS",
  "access-control-allow-headers": "authorization, apikey, content-type, idempotency-key, range, if-none-match, if-range",
  "access-control-expose-headers": "content-length, content-range, content-disposition, etag, accept-ranges, retry-after, x-ratelimit-limit, x-ratelimit-remaining",
  "access-control-max-age": "86400",
};

/** The gateway's server (not yet listening). */
export function createGatewayServer({ log, handleOp, handleAsset, handleUpload, byteRoutes, pages = [], sharePage }: GatewayRoutes): http.Server {
  // requestTimeout bounds a whole request: an hour lets a 100 MiB PUT through a slow link.
  const server = http.createServer({ keepAliveTimeout: 65_000, requestTimeout: 3_600_000 }, (req, res) => {
    for (const [k, v] of Object.entries(CORS)) res.setHeader(k, v);
    const path = req.url?.split("?")[0];
    if (req.method === "OPTIONS") { res.writeHead(204); res.end(); return; }
    if (path === OP_PATH) {
      if (req.method !== "POST") {
        sendJson(res, 405, JSON.stringify({ error: "invalid_request", detail: `Use POST ${OP_PATH}.` }), { allow: "POST" });
        return;
      }
      handleOp(req, res).catch((err) => {
        log.error({ err }, "op endpoint failed");
        sendInternalError(res, err);
      });
      return;
    }
    if (path === "/healthz" || path === "/readyz") { sendJson(res, 200, '{"ok":true}'); return; }
    const page = pages.find(([p]) => p === path);
    if (page) {
      page[1](req, res).catch((err) => {
        log.error({ err }, `${path} failed`);
        if (res.headersSent) res.destroy();
        else sendInternalError(res, err);
      });
      return;
    }
    if (path?.startsWith(ASSETS_PREFIX)) {
      handleAsset(req, res, path).catch((err) => log.error({ err }, "asset failed"));
      return;
    }
    const upload = path && UPLOAD_PREFIXES.find((p) => path.startsWith(p));
    if (upload) {
      handleUpload(req, res, path!.slice(upload.length)).catch((err) => log.error({ err }, "upload failed"));
      return;
    }
    const route = path && byteRoutes.find(([prefix]) => path.startsWith(prefix));
    if (route) {
      route[1](req, res, path!.slice(route[0].length)).catch((err) => {
        log.error({ err }, route[2]);
        if (res.headersSent) res.destroy();
        else sendInternalError(res, err);
      });
      return;
    }
    if (sharePage && path && (req.method === "GET" || req.method === "HEAD") && sharePage.matches(path)) {
      sharePage.handle(req, res).catch((err) => {
        log.error({ err }, "player page failed");
        if (res.headersSent) res.destroy();
        else sendInternalError(res, err);
      });
      return;
    }
    sendJson(res, 404, JSON.stringify({ error: "not_found", detail: `No route for ${req.method} ${path}.` }));
  });
  server.on("clientError", answerClientError);
  return server;
}

/** Starts listening; resolves to the base URL it listens on (PORT=0 picks a free port). */
export async function listen(server: http.Server, port: number, host: string): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const bound = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  return `http://${bound}:${addr.port}`;
}

/** Stops taking requests, lets idle connections go at once and busy ones within 5 s. */
export async function close(server: http.Server): Promise<void> {
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
    setTimeout(() => { server.closeAllConnections(); resolve(); }, 5000).unref();
  });
}
