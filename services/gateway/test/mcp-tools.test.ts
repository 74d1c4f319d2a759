/** The MCP tools from the registry: names, schemas, annotations, media.download's rendering rule, the resource's auth facts. */
import test from "ava";
import { Ajv } from "ajv";
import { PUBLIC_SERVICES } from "../src/app/public-services.ts";
import { buildRegistry } from "../src/app/registry.ts";
import { INLINE_BINARY_MAX, INLINE_TEXT_MAX, encodingOf, isTextType, readsInline } from "../src/mcp/download.ts";
import { protectedResourceMetadata, resourceMetadataUrlOf, scopesOf, wwwAuthenticate } from "../src/mcp/resource.ts";
import { withProgress } from "../src/mcp/server.ts";
import { ERROR_BODY_SCHEMA, buildTools, toolAnnotations, toolName, type AnnotatedOp } from "../src/mcp/tools.ts";

const registry = buildRegistry(PUBLIC_SERVICES);
const tools = buildTools(registry);

test("toolName: dots become underscores", (t) => {
  t.is(toolName("ui.state.set"), "ui_state_set");
  t.is(toolName("collections.create"), "collections_create");
  t.is(toolName("ping"), "ping");
});

test("toolAnnotations: read-only, destructive, idempotent and open-world hints from the options", (t) => {
  const op = (o: Partial<AnnotatedOp>): AnnotatedOp => ({ mutating: false, scopes: [], destructive: false, openWorld: false, ...o });
  // A read: nothing changes, a repeat is harmless.
  t.deepEqual(toolAnnotations(op({ scopes: ["collections:read"] })), { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false });
  t.deepEqual(toolAnnotations(op({ scopes: [] })), { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false });
  // A write that only adds or changes: idempotent through idempotency_key.
  t.deepEqual(toolAnnotations(op({ mutating: true, scopes: ["collections:write"] })), { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false });
  // A delete.
  t.deepEqual(toolAnnotations(op({ mutating: true, scopes: ["collections:delete"], destructive: true })), { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false });
  // Not mutating, yet it needs a write scope and acts (webhook_test): neither read-only nor idempotent.
  t.deepEqual(toolAnnotations(op({ scopes: ["collections:write"], openWorld: true })), { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true });
  // Mutating with read scopes only (ui.state.set): a write.
  t.is(toolAnnotations(op({ mutating: true, scopes: ["collections:read", "media:read"] })).readOnlyHint, false);
  // destructive never goes with read-only.
  t.false(toolAnnotations(op({ scopes: ["media:read"], destructive: true })).destructiveHint);
});

test("annotations of real operations", (t) => {
  const ann = (name: string) => tools.list.find((x) => x.name === name)!.annotations!;
  for (const name of ["collections_delete", "media_delete", "media_text_note_delete", "bookmarks_delete", "collaborators_revoke", "collections_webhook_remove", "collections_webhook_set", "media_upload_abort", "mcp_revoke_session", "media_replace"]) {
    t.true(ann(name).destructiveHint, name);
  }
  for (const name of ["collections_create", "collections_update", "media_create", "media_replace", "media_thumbnail_finalize", "collections_webhook_set", "collections_webhook_test"]) {
    t.true(ann(name).openWorldHint, name);
  }
  for (const name of ["collections_get", "media_list", "media_download", "operations_list", "schema_get", "ui_state_get", "bug_list"]) {
    t.true(ann(name).readOnlyHint, name);
  }
  for (const name of ["collections_archive", "collections_create", "media_update", "ui_state_set", "bug_report", "player_command"]) {
    t.like(ann(name), { readOnlyHint: false, destructiveHint: false }, name);
  }
});

test("one tool per operation, input schema = the request schema, output schema = the answer or the error body", (t) => {
  t.is(tools.list.length, registry.all().length);
  const ajv = new Ajv({ strict: false, validateFormats: false });
  for (const op of registry.all()) {
    const tool = tools.list.find((x) => x.name === toolName(op.name))!;
    t.truthy(tool, op.name);
    t.is(tools.opOf(tool.name), op);
    t.is(tool.inputSchema as unknown, op.requestSchema);
    t.true(tool.description!.startsWith(op.summary));
    const out = tool.outputSchema!;
    t.is(out.type, "object");
    t.notThrows(() => ajv.compile(out), op.name);
    t.deepEqual((out.anyOf as object[])[1], ERROR_BODY_SCHEMA);
    if (!op.streamsObject) t.is((out.anyOf as object[])[0], op.responseSchema);
  }
  t.is(tools.opOf("collections.create"), undefined, "operation names are not tool names");
  const download = (tools.list.find((x) => x.name === "media_download")!.outputSchema!.anyOf as Array<{ properties: object }>)[0]!;
  t.deepEqual(Object.keys(download.properties).sort(), ["content_base64", "content_length", "content_type", "download_url", "encoding", "expires_at", "filename", "media_id", "sha256", "text"]);
  t.regex(tools.list.find((x) => x.name === "collections_create")!.description!, /Scope: collections:write \(in some cases also media:write\)\. Pass idempotency_key/);
  t.regex(tools.list.find((x) => x.name === "media_thumbnail_uploaded")!.description!, /Deprecated: use media_thumbnail_finalize\./);
});

test("media.download over MCP: text inline, binary of 16 KB or less as base64, the rest as a URL", (t) => {
  t.is(INLINE_BINARY_MAX, 16384);
  for (const type of ["text/plain", "text/markdown; charset=utf-8", "application/json", "application/ld+json", "image/svg+xml", "application/x-yaml"]) t.true(isTextType(type), type);
  for (const type of ["image/png", "application/octet-stream", "application/pdf", "video/mp4"]) t.false(isTextType(type), type);

  t.true(readsInline("image/png", INLINE_BINARY_MAX));
  t.false(readsInline("image/png", INLINE_BINARY_MAX + 1));
  t.true(readsInline("text/plain", INLINE_TEXT_MAX));
  t.false(readsInline("text/plain", INLINE_TEXT_MAX + 1));

  t.is(encodingOf("text/plain", 100_000, true), "text");
  t.is(encodingOf("text/plain", 10, false), "base64", "text that is not UTF-8 is binary");
  t.is(encodingOf("text/plain", 100_000, false), "url");
  t.is(encodingOf("text/plain", INLINE_TEXT_MAX + 1, undefined), "url");
  t.is(encodingOf("image/png", INLINE_BINARY_MAX, false), "base64");
  t.is(encodingOf("image/png", INLINE_BINARY_MAX, true), "base64", "bytes that happen to be UTF-8 are not text unless their type is");
  t.is(encodingOf("image/png", INLINE_BINARY_MAX + 1, undefined), "url");
  t.is(encodingOf("application/octet-stream", 0, true), "base64");
});

test("protected resource: metadata and challenge", (t) => {
  const origins = { baseUrl: "https://api.example.com", mcpUrl: "https://mcp.example.com" };
  const scopes = scopesOf(registry);
  t.deepEqual(scopes, ["collections:delete", "collections:read", "collections:write", "media:delete", "media:read", "media:write", "profile:write"]);
  t.like(protectedResourceMetadata(origins, scopes), {
    resource: "https://mcp.example.com/mcp",
    authorization_servers: ["https://api.example.com"],
    scopes_supported: scopes,
    bearer_methods_supported: ["header"],
  });
  const url = resourceMetadataUrlOf(origins.mcpUrl);
  t.is(url, "https://mcp.example.com/.well-known/oauth-protected-resource/mcp");
  t.is(wwwAuthenticate(url, false), 'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"');
  t.is(wwwAuthenticate(url, true), 'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", error="invalid_token"');

});

test("withProgress: one notification at the start, more while it runs, the last with progress = total", async (t) => {
  const sent: Array<[number, number | undefined, string]> = [];
  const send = async (p: number, total: number | undefined, m: string) => { sent.push([p, total, m]); };
  // The work ends once two notifications of its running have gone out.
  const work = () => new Promise<number>((resolve) => {
    const poll = setInterval(() => { if (sent.length >= 3) { clearInterval(poll); resolve(42); } }, 5);
  });
  const value = await withProgress(send, "slow_tool", 10, work);
  t.is(value, 42);
  t.true(sent.length >= 4, JSON.stringify(sent));
  t.regex(sent[1]![2], /^slow_tool running for \d+ s$/);
  t.deepEqual(sent[0], [0, undefined, "slow_tool started"]);
  const last = sent[sent.length - 1]!;
  t.is(last[0], last[1]!);
  t.is(last[2], "slow_tool finished");
  sent.forEach(([p], i) => t.is(p, i));

  // A failure still ends the progress, and a notification that cannot be sent does not fail the call.
  const ends: number[] = [];
  await t.throwsAsync(withProgress(async (p, total) => { if (total !== undefined) ends.push(p); throw new Error("client gone"); }, "x", 1000, async () => { throw new Error("boom"); }), { message: "boom" });
  t.deepEqual(ends, [1]);
});
