/**
 * The MCP SDK's runtime parts, loaded by the first MCP request rather than when the gateway's
 * code is imported. With zod and its JSON Schema converter the SDK is ~170 modules, 160 ms of
 * CPU to load in node (twice that under tsx, in every test process), and every process of the
 * system imports the gateway's code, while only a gateway answering /mcp uses it: the services'
 * processes of a split deployment never load it, and the first MCP request of a gateway waits
 * for the load once.
 */
let loading: Promise<McpSdk> | undefined;

async function load() {
  const [server, http, types, ajv] = await Promise.all([
    import("@modelcontextprotocol/sdk/server/index.js"),
    import("@modelcontextprotocol/sdk/server/streamableHttp.js"),
    import("@modelcontextprotocol/sdk/types.js"),
    import("@modelcontextprotocol/sdk/validation/ajv"),
  ]);
  return {
    Server: server.Server,
    StreamableHTTPServerTransport: http.StreamableHTTPServerTransport,
    AjvJsonSchemaValidator: ajv.AjvJsonSchemaValidator,
    isInitializeRequest: types.isInitializeRequest,
    CallToolRequestSchema: types.CallToolRequestSchema,
    ListToolsRequestSchema: types.ListToolsRequestSchema,
    McpError: types.McpError,
    RpcErrorCode: types.ErrorCode,
  };
}

export type McpSdk = Awaited<ReturnType<typeof load>>;

/** The SDK, loaded once per process; a failed load is tried again by the next request. */
export function loadMcpSdk(): Promise<McpSdk> {
  loading ??= load().catch((err: unknown) => { loading = undefined; throw err; });
  return loading;
}
