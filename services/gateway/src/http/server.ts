/**
 * The gateway's HTTP server: CORS on every answer, then one route table (the op endpoint,
 * health checks, static assets, upload PUTs, the byte routes that read the object store, and a
 * 404 in the contract's shape for anything else). A route that throws past its own error
 * handling is logged and answered 500.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace } from "@opentelemetry/api";
import { recordTransfer, tracer, type Logger } from "@cms/platform";
import { ASSETS_PREFIX } from "./assets.js";
import { answerClientError } from "./client-errors.js";
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
  /** Whether /readyz answers 200: false while starting and once shutting down. */
  ready?: () => boolean;
}

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "POST, GET, PUT, DELETE, OPTIONS",
  "access-control-allow-headers": "authorization, apikey, content-type, idempotency-key, range, if-none-match, if-range, mcp-session-id, mcp-protocol-version, last-event-id",
  "access-control-expose-headers": "content-length, content-range, content-disposition, etag, accept-ranges, retry-after, x-ratelimit-limit, x-ratelimit-remaining, mcp-session-id, www-authenticate",
  "access-control-max-age": "86400",
};

/** The gateway's server (not yet listening). */
export function createGatewayServer({ log, handleOp, handleAsset, handleUpload, byteRoutes, pages = [], sharePage, ready = () => true }: GatewayRoutes): http.Server {
  // requestTimeout bounds a whole request: an hour lets a 100 MiB PUT through a slow link.
  const server = http.createServer({ keepAliveTimeout: 65_000, requestTimeout: 3_600_000 }, (req, res) => {
    const path = req.url?.split("?")[0] ?? "/";
    // Probes are neither traced nor counted: they would drown the requests. Liveness is the
    // process answering; readiness also turns false once shutdown began, so that the endpoints
    // drop this pod before its listener closes.
    if (path === "/healthz") { sendJson(res, 200, '{"ok":true}'); return; }
    if (path === "/readyz") {
      if (ready()) sendJson(res, 200, '{"ok":true}');
      else sendJson(res, 503, JSON.stringify({ error: "unavailable", detail: "This gateway is starting or shutting down." }));
      return;
    }
    traced(req, res, path, routeOf(path, byteRoutes, pages, sharePage), () => route(req, res, path));
  });
  server.on("clientError", answerClientError);
  return server;

  /** Runs a handler, answering 500 (or dropping a started answer) when it throws past its own error handling. */
  function guarded(req: http.IncomingMessage, res: http.ServerResponse, what: string, run: () => Promise<void>): void {
    run().catch((err) => {
      log.error({ err }, what);
      if (res.headersSent) res.destroy();
      else sendInternalError(res, err);
    });
  }

  function route(req: http.IncomingMessage, res: http.ServerResponse, path: string): void {
    for (const [k, v] of Object.entries(CORS)) res.setHeader(k, v);
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
    const page = pages.find(([p]) => p === path);
    if (page) {
      guarded(req, res, `${path} failed`, () => page[1](req, res));
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
      guarded(req, res, route[2], () => route[1](req, res, path!.slice(route[0].length)));
      return;
    }
    if (sharePage && (req.method === "GET" || req.method === "HEAD") && sharePage.matches(path)) {
      guarded(req, res, "player page failed", () => sharePage.handle(req, res));
      return;
    }
    sendJson(res, 404, JSON.stringify({ error: "not_found", detail: `No route for ${req.method} ${path}.` }));
  }
}

/** The route a path belongs to, as spans and metrics name it (a bounded set of values). */
export function routeOf(path: string, byteRoutes: ByteRoute[], pages: Array<[string, RouteHandler]> = [], sharePage?: GatewayRoutes["sharePage"]): string {
  if (path === OP_PATH) return "op";
  if (pages.some(([p]) => p === path)) return path.split("/").filter(Boolean).join("/") || "home";
  if (path.startsWith(ASSETS_PREFIX)) return "assets";
  if (UPLOAD_PREFIXES.some((p) => path.startsWith(p))) return "upload";
  const byte = byteRoutes.find(([prefix]) => path.startsWith(prefix));
  if (byte) return byte[0].split("/").filter(Boolean).join("/");
  return sharePage?.matches(path) ? "share_page" : "other";
}

/**
 * One SERVER span per request (continuing a trace the client began with a traceparent header),
 * active while the request is handled so that every log line carries its ids; the op endpoint
 * renames it `op <name>`. The bytes the request brought in and its answer took out are counted by
 * route (answers from the socket's counter: one request at a time per keep-alive connection).
 */
function traced(req: http.IncomingMessage, res: http.ServerResponse, path: string, route: string, handle: () => void): void {
  const socket = req.socket;
  const readAtStart = socket.bytesRead;
  const writtenAtStart = socket.bytesWritten;
  const parent = propagation.extract(ROOT_CONTEXT, req.headers);
  const span = tracer().startSpan(`${req.method} ${route}`, {
    kind: SpanKind.SERVER,
    attributes: { "http.request.method": req.method ?? "", "http.route": route, "url.path": path },
  }, parent);
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    // A small body arrives with the headers, before this handler runs: the declared length of a
    // body read whole is exact; the socket's count covers the rest (chunked, cut short).
    const declared = Number(req.headers["content-length"]);
    recordTransfer("in", route, req.complete && Number.isSafeInteger(declared) ? declared : socket.bytesRead - readAtStart);
    recordTransfer("out", route, socket.bytesWritten - writtenAtStart);
    span.setAttribute("http.response.status_code", res.statusCode);
    if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    if (!res.writableFinished) span.setAttribute("cms.aborted", true);
    span.end();
  };
  res.once("finish", end);
  res.once("close", end);
  context.with(trace.setSpan(parent, span), handle);
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

/** Stops taking requests, lets idle connections go at once and busy ones finish within drainMs. */
export async function close(server: http.Server, drainMs = 5000): Promise<void> {
  await new Promise<void>((resolve) => {
    // Keep-alive connections that finish their request become idle: hang them up as they do.
    const idle = setInterval(() => server.closeIdleConnections(), 50);
    const done = () => { clearInterval(idle); clearTimeout(deadline); resolve(); };
    const deadline = setTimeout(() => { server.closeAllConnections(); done(); }, drainMs);
    server.close(done);
    server.closeIdleConnections();
  });
}
