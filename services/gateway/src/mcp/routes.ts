/**
 * The hosted MCP server's routes, wired from the gateway's parts: /mcp, and the protected
 * resource metadata at both well-known paths (RFC 9728's path for /mcp, and the root one that
 * clients try next).
 */
import type { Config, Logger, ObjectStore } from "@cms/platform";
import type { OpRegistry } from "../app/registry.js";
import type { RunOperation } from "../app/run-operation.js";
import type { Admit } from "../http/admission.js";
import type { RouteHandler } from "../http/server.js";
import type { McpSessionStore } from "../store/mcp-session-store.js";
import { createDownloadRenderer } from "./download.js";
import { createMcpEndpoint, createResourceMetadataHandler } from "./endpoint.js";
import { MCP_PATH, RESOURCE_METADATA_PATH, protectedResourceMetadata, scopesOf } from "./resource.js";
import { createMcpServerFactory } from "./server.js";
import { buildTools } from "./tools.js";

/** What the MCP routes are made of. */
export interface McpRoutesDeps {
  registry: OpRegistry;
  admit: Admit;
  sessions: McpSessionStore;
  run: RunOperation;
  store: ObjectStore;
  config: Pick<Config, "baseUrl" | "mcpUrl" | "maxBodyBytes" | "clientIdleMs">;
  log: Logger;
}

/** The exact paths the MCP server answers, with their handlers (the gateway server's `pages`). */
export function createMcpRoutes(deps: McpRoutesDeps): Array<[string, RouteHandler]> {
  const { registry, config, log, run } = deps;
  const tools = buildTools(registry);
  const renderDownload = createDownloadRenderer({ store: deps.store, registry, run, baseUrl: () => config.baseUrl });
  const createServer = createMcpServerFactory({ tools, run, renderDownload, log });
  const scopes = scopesOf(registry);
  const metadata = createResourceMetadataHandler(() => protectedResourceMetadata(config, scopes));
  return [
    [MCP_PATH, createMcpEndpoint({ admit: deps.admit, sessions: deps.sessions, createServer, mcpUrl: () => config.mcpUrl, bodyBounds: { maxBytes: config.maxBodyBytes, idleMs: config.clientIdleMs }, log })],
    [`${RESOURCE_METADATA_PATH}${MCP_PATH}`, metadata],
    [RESOURCE_METADATA_PATH, metadata],
  ];
}
