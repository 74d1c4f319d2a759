/**
 * The MCP tools: one per operation of the registry (the same registry the JSON endpoint serves,
 * so there is no second list), named after the operation with dots as underscores. A tool's
 * input schema is the operation's request schema (what operation.describe publishes, without
 * `op`), its output schema the operation's response schema, its description the operation's
 * summary, and its annotations follow from the operation's options (toolAnnotations).
 */
import type { Tool, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import { McpDownloadSchema } from "@cms/contracts/gateway/v1/mcp_pb";
import type { OpEntry, OpRegistry } from "../app/registry.js";
import { responseSchema, type JsonSchema } from "../domain/json-schema.js";

/** The tool name of an operation: `ui.state.set` is `ui_state_set`. */
export function toolName(operation: string): string {
  return operation.replaceAll(".", "_");
}

/** What the annotations are derived from: the operation's (common.v1.op) options. */
export type AnnotatedOp = Pick<OpEntry, "mutating" | "scopes" | "destructive" | "openWorld">;

/**
 * The MCP annotations of an operation, derived from its options in this one place:
 * - readOnlyHint: it changes nothing (not mutating) and needs no write or delete scope
 *   (collections.webhook_test is not mutating, yet it sends a delivery: not read-only);
 * - destructiveHint: declared `destructive` (deletes, revokes, replaced files and secrets);
 *   other writes only add or change what the caller can change back;
 * - idempotentHint: every mutating operation accepts idempotency_key, and a repeat with the same
 *   key and arguments replays the first answer without running again; a non-mutating write
 *   (collections.webhook_test) acts anew on every call;
 * - openWorldHint: declared `open_world` (it fetches a URL the caller gives, or delivers to one);
 *   every other tool works only on this service's own data.
 */
export function toolAnnotations(op: AnnotatedOp): ToolAnnotations {
  const readOnly = !op.mutating && op.scopes.every((s) => s.endsWith(":read"));
  return {
    readOnlyHint: readOnly,
    destructiveHint: !readOnly && op.destructive,
    idempotentHint: readOnly || op.mutating,
    openWorldHint: op.openWorld,
  };
}

/**
 * The contract's error body, as a failed tool call's structuredContent carries it. Kept short
 * (no enum of the codes, which schema.get lists): every tool's output schema repeats it.
 */
export const ERROR_BODY_SCHEMA: JsonSchema = {
  type: "object",
  properties: { error: { type: "string" }, detail: { type: "string" } },
  required: ["error", "detail"],
  description: "isError: the error body {error: code, detail, ...extra fields}",
};

/** The JSON Schema of what an operation's tool answers on success. */
export function successSchema(op: OpEntry): JsonSchema {
  // media.download answers raw bytes at the JSON endpoint; over MCP it answers McpDownload.
  return op.streamsObject ? responseSchema(McpDownloadSchema) : op.responseSchema;
}

/**
 * A tool's output schema: the operation's answer, or the contract's error body. A failed call's
 * result carries that body as structuredContent too, and clients validate it against this schema.
 */
export function outputSchema(op: OpEntry): Tool["outputSchema"] {
  return { type: "object", anyOf: [successSchema(op), ERROR_BODY_SCHEMA] };
}

function describe(op: OpEntry): string {
  const parts = [op.summary];
  if (op.deprecatedAliasOf) parts.push(`Deprecated: use ${toolName(op.deprecatedAliasOf)}.`);
  if (op.adminOnly) parts.push("Administrators only.");
  if (op.scopes.length) parts.push(`Scope${op.scopes.length > 1 ? "s" : ""}: ${op.scopes.join(", ")}${op.conditionalScopes.length ? ` (in some cases also ${op.conditionalScopes.join(", ")})` : ""}.`);
  else if (op.conditionalScopes.length) parts.push(`Scopes: ${op.conditionalScopes.join(", ")} in some cases.`);
  if (op.mutating) parts.push("Pass idempotency_key so that a retry cannot run it twice.");
  if (op.streamsObject) parts.push("Over MCP: a text file inline, a binary file of 16 KB or less as base64, a larger one as a download URL.");
  return parts.join(" ");
}

/** The tool list and the operation behind each tool name. */
export interface ToolSet {
  list: Tool[];
  opOf(name: string): OpEntry | undefined;
}

/** The tools of every operation of the registry. */
export function buildTools(registry: OpRegistry): ToolSet {
  const byName = new Map<string, OpEntry>();
  const list: Tool[] = [];
  for (const op of registry.all()) {
    const name = toolName(op.name);
    if (byName.has(name)) throw new Error(`operations ${byName.get(name)!.name} and ${op.name} have the same tool name ${name}`);
    byName.set(name, op);
    list.push({
      name,
      description: describe(op),
      inputSchema: op.requestSchema as Tool["inputSchema"],
      outputSchema: outputSchema(op),
      annotations: toolAnnotations(op),
    });
  }
  return { list, opOf: (name) => byName.get(name) };
}
