/**
 * The MCP endpoint as an OAuth protected resource: its identifier ({MCP_URL}/mcp), its protected
 * resource metadata (RFC 9728: which authorization server issues its tokens, which scopes exist),
 * and the WWW-Authenticate challenge of a 401 that points a client at that metadata. Which token
 * audiences it accepts is admission's rule (http/admission.ts, this resource as the route's).
 */
import type { OpRegistry } from "../app/registry.js";
import { OP_PATH } from "../http/op-endpoint.js";

/** The MCP endpoint's path on the gateway. */
export const MCP_PATH = "/mcp";
/** RFC 9728's well-known path; the resource's own path follows it (…/oauth-protected-resource/mcp). */
export const RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource";

/** The resource identifier of the MCP endpoint (what an audience-bound token names). */
export function resourceOf(mcpUrl: string): string {
  return `${mcpUrl}${MCP_PATH}`;
}

/** Where the MCP endpoint's protected resource metadata is (RFC 9728 §3.1). */
export function resourceMetadataUrlOf(mcpUrl: string): string {
  return `${mcpUrl}${RESOURCE_METADATA_PATH}${MCP_PATH}`;
}

/** Every scope an operation of the registry names (required or conditional), sorted. */
export function scopesOf(registry: OpRegistry): string[] {
  return [...new Set(registry.all().flatMap((op) => [...op.scopes, ...op.conditionalScopes]))].sort();
}

/** The RFC 9728 document of the MCP endpoint. */
export function protectedResourceMetadata(origins: { baseUrl: string; mcpUrl: string }, scopes: string[]): Record<string, unknown> {
  return {
    resource: resourceOf(origins.mcpUrl),
    authorization_servers: [origins.baseUrl],
    scopes_supported: scopes,
    bearer_methods_supported: ["header"],
    resource_name: "Collections & Media MCP server",
    resource_documentation: `${origins.baseUrl}${OP_PATH}`,
  };
}

/**
 * The challenge of a 401 from the MCP endpoint (RFC 6750 §3, RFC 9728 §5.1): where the metadata
 * is, and `invalid_token` when a token was sent but refused (none when it was missing).
 */
export function wwwAuthenticate(metadataUrl: string, tokenSent: boolean): string {
  return `Bearer resource_metadata="${metadataUrl}"${tokenSent ? ', error="invalid_token"' : ""}`;
}
