/**
 * {MCP_URL}/mcp: the hosted MCP server over Streamable HTTP, and its protected resource metadata.
 *
 * Every request goes through the gateway's admission chain with a bearer token alone (no API
 * key): the same token introspection, and the same per-user rate limit as the JSON endpoint, on
 * every request, not only at initialize, so that a revoked or expired token ends access at once.
 * A refused token answers 401 with `WWW-Authenticate: Bearer resource_metadata=...`, from which
 * an MCP client discovers the authorization server.
 *
 * Sessions: initialize opens one (the Mcp-Session-Id header of its answer) for the token's
 * user; later requests must name an open session of that same user (404 otherwise, after which a
 * client initializes again); DELETE closes it. The session store bounds them in number and idle
 * time and is shared by gateway replicas, and a session holds nothing else, so each request is
 * served by a fresh SDK server and transport (the SDK's stateless mode under our own sessions)
 * on whichever replica it reaches. Answers to requests are SSE streams, so that a long tool can
 * send progress notifications before its result; a GET (the stream of server-initiated
 * messages) is 405, as this server sends none.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { AppError, type Caller, type Logger } from "@cms/platform";
import { bodyText, findDuplicateKey } from "../domain/request-body.js";
import type { Admit } from "../http/admission.js";
import { sendError, sendJson } from "../http/answers.js";
import { readBody, type BodyBounds } from "../http/read-body.js";
import type { McpSessionStore } from "../store/mcp-session-store.js";
import { resourceMetadataUrlOf, resourceOf, wwwAuthenticate } from "./resource.js";
import { loadMcpSdk } from "./sdk.js";

/** What the MCP endpoint needs. */
export interface McpEndpointDeps {
  admit: Admit;
  sessions: McpSessionStore;
  /** The MCP server of one request, for its admitted caller. */
  createServer(caller: Caller): Promise<Server>;
  /** MCP_URL (read when used: with PORT=0 it is known once the gateway listens). */
  mcpUrl: () => string;
  bodyBounds: BodyBounds;
  log: Logger;
}

/** A JSON-RPC error answer outside any request (the transport's own shape). */
function sendRpcError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }), headers);
}

/** The messages of a POST body, or undefined after answering why it is not JSON-RPC input. */
function parseMessages(raw: Buffer, res: ServerResponse): unknown | undefined {
  let text: string;
  try { text = bodyText(raw); } catch { sendRpcError(res, 400, -32700, "Parse error: the body is not valid UTF-8."); return undefined; }
  let parsed: unknown;
  try { parsed = JSON.parse(text); } catch { sendRpcError(res, 400, -32700, "Parse error: the body is not valid JSON."); return undefined; }
  const duplicate = findDuplicateKey(text);
  if (duplicate) { sendRpcError(res, 400, -32700, `Parse error: "${duplicate}" appears more than once in its object.`); return undefined; }
  return parsed;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The request handler of /mcp. */
export function createMcpEndpoint(deps: McpEndpointDeps) {
  const { admit, sessions, log } = deps;

  /**
   * The MCP endpoint needs a token; admission has refused one bound (RFC 8707) to a resource
   * other than {MCP_URL}/mcp (`resource` below), and takes those bound to none (CLI tokens).
   */
  function authorize(caller: Caller | undefined): void {
    if (!caller) throw new AppError("unauthorized", "Missing access token: send \"Authorization: Bearer <access token>\" (no API key is needed here).");
  }

  /** The open session the request names for this user, or undefined after answering why not. */
  async function sessionOf(req: IncomingMessage, res: ServerResponse, caller: Caller): Promise<string | undefined> {
    const id = header(req, "mcp-session-id");
    if (!id) { sendRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required (initialize first)."); return undefined; }
    const owner = await sessions.use(id);
    if (owner !== caller.userId) { sendRpcError(res, 404, -32001, "Session not found: initialize a new session."); return undefined; }
    return id;
  }

  async function serve(req: IncomingMessage, res: ServerResponse, caller: Caller, body: unknown): Promise<void> {
    const server = await deps.createServer(caller);
    const { StreamableHTTPServerTransport } = await loadMcpSdk();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    transport.onerror = (err) => log.debug({ err }, "mcp transport");
    res.once("close", () => { void transport.close(); void server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { caller } = await admit(req, res, { bearerOnly: true, resource: () => resourceOf(deps.mcpUrl()), authorize });
    // authorize refused a request without a caller.
    const user = caller!;
    switch (req.method) {
      case "POST": {
        const body = parseMessages(await readBody(req, deps.bodyBounds), res);
        if (body === undefined) return;
        const messages = Array.isArray(body) ? body : [body];
        const { isInitializeRequest } = await loadMcpSdk();
        if (messages.some(isInitializeRequest)) {
          res.setHeader("mcp-session-id", await sessions.open(user.userId));
        } else {
          const id = await sessionOf(req, res, user);
          if (!id) return;
          res.setHeader("mcp-session-id", id);
        }
        await serve(req, res, user, body);
        return;
      }
      case "DELETE": {
        const id = await sessionOf(req, res, user);
        if (!id) return;
        await sessions.close(id, user.userId);
        sendJson(res, 200, "{}");
        return;
      }
      case "GET": {
        if (!(await sessionOf(req, res, user))) return;
        sendRpcError(res, 405, -32000, "Method not allowed: this server sends no messages of its own, so it offers no GET stream.", { allow: "POST, DELETE" });
        return;
      }
      default:
        sendRpcError(res, 405, -32000, "Method not allowed.", { allow: "POST, GET, DELETE" });
    }
  }

  return async function handleMcp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      await handle(req, res);
    } catch (err) {
      if (err instanceof AppError && err.code === "unauthorized" && !res.headersSent) {
        res.setHeader("www-authenticate", wwwAuthenticate(resourceMetadataUrlOf(deps.mcpUrl()), Boolean(req.headers.authorization)));
      }
      sendError(res, err, log);
    }
  };
}

/** GET of the protected resource metadata (both well-known paths answer the same document). */
export function createResourceMetadataHandler(document: () => Record<string, unknown>) {
  return async function handleResourceMetadata(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendJson(res, 405, JSON.stringify({ error: "invalid_request", detail: "Use GET." }), { allow: "GET" });
      return;
    }
    sendJson(res, 200, JSON.stringify(document()), { "cache-control": "public, max-age=3600" });
  };
}
