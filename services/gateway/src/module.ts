/**
 * The gateway: HTTP surfaces in front of the services. It owns the `gateway` schema (shared
 * rate-limit windows and idempotency records) and holds no other state.
 */
import http from "node:http";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import type { DescService } from "@bufbuild/protobuf";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import { WebhooksService } from "@cms/contracts/webhooks/v1/webhooks_pb";
import { MetaService } from "@cms/contracts/gateway/v1/meta_pb";
import { EVENTS, fromConnectError, type GatewayModule, type ServiceContext } from "@cms/platform";
import { createApiKeyChecker, createTokenResolver } from "./access.js";
import { createMemoryRateLimiter, createPgRateLimiter } from "./rate-limit.js";
import { createIdempotencyStore } from "./idempotency.js";
import { buildRegistry } from "./registry.js";
import { createMeta } from "./meta.js";
import { createOpEndpoint, OP_PATH, sendJson } from "./op-endpoint.js";
import { gatewayMigrations } from "./migrations.js";
import { createUploadHandler, UPLOAD_PREFIXES } from "./storage-routes.js";
import { ASSETS_PREFIX, createAssetHandler } from "./assets.js";
import { DOWNLOAD_PREFIX, MEDIA_PROXY_PREFIX, createDownloadLinkHandler, createMediaProxyHandler, createObjectStreamer } from "./download-routes.js";
import { DROP_PREFIX, createDropHandler } from "./drop-page.js";

/** Every service whose annotated RPCs are public operations. */
export const PUBLIC_SERVICES: DescService[] = [MetaService, AuthService, CollectionsService, MediaService, SocialService, WebhooksService];

/** The API key of an embedded deployment with none configured: made once, kept under DATA_DIR. */
function embeddedApiKey(dataDir: string): string {
  const file = join(dataDir, "gateway-apikey");
  if (existsSync(file)) return readFileSync(file, "utf8").trim();
  mkdirSync(dataDir, { recursive: true });
  const key = `cms_key_${crypto.randomUUID().replaceAll("-", "")}`;
  writeFileSync(file, key + "\n", { mode: 0o600 });
  return key;
}

const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "POST, GET, PUT, OPTIONS",
  "access-control-allow-headers": "authorization, apikey, content-type, idempotency-key, range, if-none-match, if-range",
  "access-control-expose-headers": "content-length, content-range, content-disposition, etag, accept-ranges, retry-after, x-ratelimit-limit, x-ratelimit-remaining",
  "access-control-max-age": "86400",
};

export const gatewayModule: GatewayModule = {
  schema: "gateway",
  migrations: gatewayMigrations,
  async init(ctx: ServiceContext) {
    const { config, log, clients, db } = ctx;
    const registry = buildRegistry(PUBLIC_SERVICES);
    const banner: Record<string, unknown> = {};
    const staticKeys = [...config.gatewayApiKeys];
    if (!staticKeys.length) {
      const key = embeddedApiKey(config.dataDir);
      staticKeys.push(key);
      banner.apikey = key;
    }
    const tokens = createTokenResolver(clients, config.tokenCacheMs);
    await ctx.bus.onBroadcast(EVENTS.tokenRevoked, (p) => tokens.forget(String(p.token_hash)));
    const rateLimiter = config.target === "all" ? createMemoryRateLimiter(config.rateLimitPerMinute) : createPgRateLimiter(db, config.rateLimitPerMinute);
    const idempotency = createIdempotencyStore(db);
    const streamObject = createObjectStreamer(ctx.store, log);
    const apiKeys = createApiKeyChecker(clients, staticKeys);
    const handleOp = createOpEndpoint({
      log,
      registry,
      clients,
      tokens,
      apiKeys,
      rateLimiter,
      idempotency,
      meta: createMeta(registry, config),
      maxBodyBytes: config.maxBodyBytes,
      streamObject,
    });

    const handleUpload = createUploadHandler({ store: ctx.store, grantSecret: config.grantSecret!, log, clients });
    const handleDownloadLink = createDownloadLinkHandler({ grantSecret: config.grantSecret!, streamObject, log });
    const handleMediaProxy = createMediaProxyHandler({ apiKeys, tokens, rateLimiter, clients, streamObject, log });
    const handleDrop = createDropHandler({ store: ctx.store, grantSecret: config.grantSecret!, clients, log });
    // Routes whose bytes go to or come from the object store: prefix, handler, log message.
    const byteRoutes: Array<[string, (req: http.IncomingMessage, res: http.ServerResponse, rest: string) => Promise<void>, string]> = [
      [DOWNLOAD_PREFIX, handleDownloadLink, "download link failed"],
      [MEDIA_PROXY_PREFIX, handleMediaProxy, "media proxy failed"],
      [DROP_PREFIX, handleDrop, "drop link failed"],
    ];
    const handleAsset = createAssetHandler();
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
          if (!res.headersSent) sendJson(res, 500, JSON.stringify(fromConnectError(err).toBody()));
        });
        return;
      }
      if (path === "/healthz" || path === "/readyz") { sendJson(res, 200, '{"ok":true}'); return; }
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
          if (!res.headersSent) sendJson(res, 500, JSON.stringify(fromConnectError(err).toBody()));
          else res.destroy();
        });
        return;
      }
      sendJson(res, 404, JSON.stringify({ error: "not_found", detail: `No route for ${req.method} ${path}.` }));
    });

    return {
      banner,
      async listen() {
        await new Promise<void>((resolve, reject) => {
          server.once("error", reject);
          server.listen(config.port, config.host, () => resolve());
        });
        const addr = server.address() as AddressInfo;
        const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
        return `http://${host}:${addr.port}`;
      },
      async stop() {
        rateLimiter.stop();
        idempotency.stop();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
          setTimeout(() => { server.closeAllConnections(); resolve(); }, 5000).unref();
        });
      },
    };
  },
};
