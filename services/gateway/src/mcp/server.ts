/**
 * The MCP server of one request: tools/list answers the tools of the registry, tools/call runs
 * the tool's operation for the caller admitted on this very request (its token was checked just
 * now, so a revoked token ends access at once) through the same steps as the JSON endpoint:
 * the operation's access rules, the request checks and schema, idempotency and dispatch. A
 * refusal or failure of the operation is a tool result with isError and the contract's error
 * body (as text and as structuredContent), never a protocol error; only an unknown tool name is
 * one (JSON-RPC invalid params), as MCP prescribes.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { CallToolResult, ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import { authorizeOperation, recordOp, secondsSince, type Caller, type Logger } from "@cms/platform";
import type { OpEntry } from "../app/registry.js";
import { failureOutcome, outcomeCode, type Outcome, type RunOperation } from "../app/run-operation.js";
import { SCHEMA_VERSION } from "../app/registry.js";
import { checkRequestValues } from "../domain/request-body.js";
import type { RenderedDownload } from "./download.js";
import { loadMcpSdk } from "./sdk.js";
import type { ToolSet } from "./tools.js";

/** What the MCP server runs tools with. */
export interface McpServerDeps {
  tools: ToolSet;
  run: RunOperation;
  /** media.download's rendering over MCP (the object its run named). */
  renderDownload(mediaId: number, object: NonNullable<Outcome["object"]>, caller: Caller | undefined): Promise<RenderedDownload>;
  log: Logger;
  /** Interval of the progress notifications of a call that asked for them. */
  progressIntervalMs?: number;
}

const INSTRUCTIONS = "Every tool is one operation of the Collections & Media API (tool name = operation name with dots as underscores). "
  + "A failed call returns isError with the API's error body {error, detail, ...}: fix the arguments it names, and do not retry insufficient_scope, forbidden or insufficient_permission. "
  + "operations_list and operation_describe describe every operation; schema_get is the whole contract.";

/** A tool result of an operation's answer (or its error body). */
function resultOf(status: number, body: string, blocks: CallToolResult["content"] = []): CallToolResult {
  const structured = JSON.parse(body) as Record<string, unknown>;
  return status >= 400
    ? { content: [{ type: "text", text: body }], structuredContent: structured, isError: true }
    : { content: [{ type: "text", text: body }, ...blocks], structuredContent: structured };
}

/**
 * Runs `work` while telling the client it is alive: a progress notification when it starts, one
 * every interval while it runs (long tools: chunked transfers, URL ingestion, thumbnails), and a
 * last one with progress = total when it ends. A notification that cannot be sent (the client
 * went away) does not fail the call.
 */
export async function withProgress<T>(send: (progress: number, total: number | undefined, message: string) => Promise<void>, what: string, intervalMs: number, work: () => Promise<T>): Promise<T> {
  let step = 0;
  const notify = (total: number | undefined, message: string) => send(step++, total, message).catch(() => {});
  const started = Date.now();
  await notify(undefined, `${what} started`);
  const timer = setInterval(() => { void notify(undefined, `${what} running for ${Math.round((Date.now() - started) / 1000)} s`); }, intervalMs);
  try {
    return await work();
  } finally {
    clearInterval(timer);
    await notify(step, `${what} finished`);
  }
}

/** A factory of the per-request MCP server for an admitted caller. */
export function createMcpServerFactory(deps: McpServerDeps) {
  const { tools, run, log } = deps;
  const intervalMs = deps.progressIntervalMs ?? 1000;

  async function callOperation(op: OpEntry, args: Record<string, unknown>, caller: Caller): Promise<CallToolResult> {
    const started = performance.now();
    let result: CallToolResult;
    let code: string;
    try {
      authorizeOperation(op, caller);
      checkRequestValues(args);
      const outcome = await run(op, args, caller);
      if (outcome.object && outcome.status < 400) {
        const { body, blocks } = await deps.renderDownload(Number(args.media_id), outcome.object, caller);
        result = resultOf(200, body, blocks);
      } else {
        result = resultOf(outcome.status, outcome.body);
      }
      code = outcomeCode(outcome);
    } catch (err) {
      const failure = failureOutcome(err, log);
      result = resultOf(failure.status, failure.body);
      code = outcomeCode(failure);
    }
    recordOp(op.name, code, secondsSince(started));
    return result;
  }

  // The SDK builds an Ajv instance per server unless it is given one: one for all requests.
  let jsonSchemaValidator: AjvJsonSchemaValidator | undefined;

  return async function createServer(caller: Caller): Promise<Server> {
    const { Server, AjvJsonSchemaValidator, CallToolRequestSchema, ListToolsRequestSchema, McpError, RpcErrorCode } = await loadMcpSdk();
    jsonSchemaValidator ??= new AjvJsonSchemaValidator();
    const server = new Server(
      { name: "collections-media", title: "Collections & Media", version: SCHEMA_VERSION },
      { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS, jsonSchemaValidator },
    );
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools.list }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { name, arguments: args = {} } = request.params;
      const op = tools.opOf(name);
      if (!op) throw new McpError(RpcErrorCode.InvalidParams, `Unknown tool "${name}"; tools/list names every tool.`);
      const token = request.params._meta?.progressToken;
      if (token === undefined) return callOperation(op, args, caller);
      const send = (progress: number, total: number | undefined, message: string) => extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress, ...(total === undefined ? {} : { total }), message },
      } as ServerNotification);
      return withProgress(send, name, intervalMs, () => callOperation(op, args, caller));
    });
    return server;
  };
}
