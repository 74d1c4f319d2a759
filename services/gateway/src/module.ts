/**
 * The gateway: HTTP surfaces in front of the services. It owns the `gateway` schema (shared
 * rate-limit windows and idempotency records) and holds no other state. This file is wiring:
 * `http/` holds the routes, `app/` the op registry, meta operations, access and dispatch, `mcp/`
 * the hosted MCP server (tools from the registry, its endpoint and resource metadata),
 * `domain/` the pure rules (JSON Schema, rendering, ranges), `store/` the records and migrations.
 */
import { EVENTS, type GatewayModule, type ServiceContext } from "@cms/platform";
import { createApiKeyChecker, createTokenResolver } from "./app/access.js";
import { createDispatch } from "./app/dispatch.js";
import { createMeta } from "./app/meta.js";
import { PUBLIC_SERVICES } from "./app/public-services.js";
import { buildRegistry } from "./app/registry.js";
import { createOperationRunner } from "./app/run-operation.js";
import { createAdmission } from "./http/admission.js";
import { PLAYER_ASSETS } from "./domain/player-page.js";
import { createPlayerPages } from "./app/player-pages.js";
import { assetsVersion, createAssetHandler } from "./http/assets.js";
import { createPlayerPageHandler, isPagePath } from "./http/player-page.js";
import { DOWNLOAD_PREFIX, MEDIA_PROXY_PREFIX, createDownloadLinkHandler, createMediaProxyHandler } from "./http/download-routes.js";
import { DROP_PREFIX, createDropHandler } from "./http/drop-page.js";
import { createObjectStreamer } from "./http/object-stream.js";
import { OP_PATH, createOpEndpoint } from "./http/op-endpoint.js";
import { close, createGatewayServer, listen } from "./http/server.js";
import { createUploadHandler } from "./http/upload-routes.js";
import { embeddedApiKey } from "./store/embedded-api-key.js";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { ACCOUNT_ASSETS } from "./domain/account-pages.js";
import { createAccountRoutes } from "./http/account-routes.js";
import { authorizationFlowOf, createAuthorizePage } from "./http/authorize-page.js";
import { createOAuthEndpoints } from "./http/oauth-endpoints.js";
import { createViewerOf } from "./http/web-session.js";
import { createPlayerChannel } from "./app/player-channel.js";
import { PLAYER_EVENTS_PATH, createPlayerEventsHandler } from "./http/player-events.js";
import { createIdempotencyStore } from "./store/idempotency-store.js";
import { createMemoryMcpSessions, createPgMcpSessions } from "./store/mcp-session-store.js";
import { closingSessionsOnRevoke } from "./mcp/revocation.js";
import { createMcpRoutes } from "./mcp/routes.js";
import { gatewayMigrations } from "./store/migrations.js";
import { createMemoryRateLimiter, createPgRateLimiter } from "./store/rate-limit-store.js";

export { PUBLIC_SERVICES };

/** The gateway's entry in the module table. */
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
    const admit = createAdmission({ apiKeys: createApiKeyChecker(clients, staticKeys), tokens, rateLimiter, resource: () => `${config.baseUrl}${OP_PATH}` });
    const streamObject = createObjectStreamer(ctx.store, log, config.clientIdleMs);
    const dispatch = createDispatch({ clients, meta: createMeta(registry, config) });
    const mcpSessions = config.target === "all" ? createMemoryMcpSessions(config.mcpSessions) : createPgMcpSessions(db, config.mcpSessions);
    const runOperation = closingSessionsOnRevoke(createOperationRunner({ dispatch, idempotency, log }), mcpSessions);
    const social = () => clients.get(SocialService);
    const assetVersion = assetsVersion(PLAYER_ASSETS);
    const playerChannel = createPlayerChannel({ bus: ctx.bus, social, log });
    const accountAssets = assetsVersion(ACCOUNT_ASSETS);
    const auth = () => clients.get(AuthService);
    const account = createAccountRoutes({
      auth, tokens, secret: config.grantSecret!, appUrl: () => config.appUrl, assetVersion: accountAssets, log, bodyIdleMs: config.clientIdleMs,
      authorize: (req, res) => authorizePage(req, res),
      flowOf: (returnTo) => authorizationFlowOf(auth, returnTo),
    });
    const authorizePage = createAuthorizePage({ auth, tokens, account, secret: config.grantSecret!, issuer: () => config.baseUrl, assetVersion: accountAssets });
    const oauthEndpoints = createOAuthEndpoints({ auth, rateLimiter, baseUrl: () => config.baseUrl, appUrl: () => config.appUrl, log, bodyIdleMs: config.clientIdleMs });
    const viewerOf = createViewerOf(tokens, () => config.appUrl);
    await playerChannel.start();

    // Ready from the moment it listens until stop() begins.
    let stopping = false;
    const server = createGatewayServer({
      log,
      ready: () => !stopping,
      handleOp: createOpEndpoint({
        log,
        registry,
        admit,
        run: runOperation,
        bodyBounds: { maxBytes: config.maxBodyBytes, idleMs: config.clientIdleMs },
        streamObject,
      }),
      handleAsset: createAssetHandler(),
      handleUpload: createUploadHandler({ store: ctx.store, grantSecret: config.grantSecret!, log, clients, bodyIdleMs: config.clientIdleMs }),
      byteRoutes: [
        [DOWNLOAD_PREFIX, createDownloadLinkHandler({ grantSecret: config.grantSecret!, streamObject, log }), "download link failed"],
        [MEDIA_PROXY_PREFIX, createMediaProxyHandler({ admit, clients, streamObject, log }), "media proxy failed"],
        [DROP_PREFIX, createDropHandler({ store: ctx.store, grantSecret: config.grantSecret!, clients, log, bodyIdleMs: config.clientIdleMs }), "drop link failed"],
      ],
      pages: [
        [PLAYER_EVENTS_PATH, createPlayerEventsHandler({ viewerOf, channel: playerChannel, social, log })],
        ...account.pages,
        ...oauthEndpoints.pages,
        ...createMcpRoutes({ registry, admit, sessions: mcpSessions, run: runOperation, store: ctx.store, config, log }),
      ],
      sharePage: {
        matches: isPagePath,
        handle: createPlayerPageHandler({
          pages: createPlayerPages({ clients, grantSecret: config.grantSecret!, baseUrl: () => config.baseUrl, assetVersion, eventsPath: PLAYER_EVENTS_PATH }),
          baseUrl: () => config.baseUrl,
          assetVersion,
          viewerOf: async (req) => (await viewerOf(req))?.userId,
        }),
      },
    });

    return {
      banner,
      listen: () => listen(server, config.port, config.host),
      async stop() {
        stopping = true;
        // Open player streams never end by themselves: closing them lets the drain finish.
        await playerChannel.stop();
        rateLimiter.stop();
        idempotency.stop();
        mcpSessions.stop();
        // Requests in flight finish within the shutdown bound, less time for the rest of the stop.
        await close(server, config.shutdownTimeoutMs - 5000);
      },
    };
  },
};
