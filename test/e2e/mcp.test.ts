/**
 * The hosted MCP server at {MCP_URL}/mcp, driven by the MCP SDK's own client
 * (Client + StreamableHTTPClientTransport) with tokens minted as the admin CLI mints them.
 */
import test from "ava";
import { createHash, randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { discoverOAuthProtectedResourceMetadata, extractWWWAuthenticateParams } from "@modelcontextprotocol/sdk/client/auth.js";
import type { CallToolResult, Progress, Tool } from "@modelcontextprotocol/sdk/types.js";
import { Ajv } from "ajv";
import addFormatsModule from "ajv-formats";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";

const addFormats = (addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule;
const ajv = new Ajv({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv) => void)(ajv);

let sys: TestSystem;
let alice: TestUser;
let tools: Tool[];

/** An SDK client connected to the system's MCP endpoint with a bearer token (no API key). */
async function connect(token: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: "mcp-e2e", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${sys.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  return { client, transport };
}

/** A raw JSON-RPC POST to /mcp; the answer's JSON-RPC message (from JSON or the SSE stream). */
async function rawPost(token: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; message?: any; text: string }> {
  const res = await fetch(`${sys.url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: Buffer.isBuffer(body) ? new Uint8Array(body) : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let message: any;
  const data = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
  if (data.length) message = data.find((m) => "result" in m || "error" in m);
  else { try { message = JSON.parse(text); } catch { /* not JSON */ } }
  return { status: res.status, headers: res.headers, message, text };
}

const INIT = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } };

test.before(async () => {
  sys = await startTestSystem({ MCP_SESSIONS_PER_USER: "3" });
  alice = await sys.user({ plan: "paid" });
  const { client } = await connect(alice.token);
  tools = (await client.listTools()).tools;
  await client.close();
});
test.after.always(async () => {
  await sys?.stop();
});

test("without a token /mcp answers 401 with WWW-Authenticate naming the protected resource metadata, which names the authorization server and scopes", async (t) => {
  const res = await fetch(`${sys.url}/mcp`, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: JSON.stringify(INIT) });
  t.is(res.status, 401);
  t.is((await res.json()).error, "unauthorized");
  const challenge = res.headers.get("www-authenticate")!;
  t.is(challenge, `Bearer resource_metadata="${sys.url}/.well-known/oauth-protected-resource/mcp"`);
  const { resourceMetadataUrl, error } = extractWWWAuthenticateParams(res);
  t.is(resourceMetadataUrl?.href, `${sys.url}/.well-known/oauth-protected-resource/mcp`);
  t.is(error, undefined, "no error parameter when no token was sent (RFC 6750 §3)");

  const bad = await rawPost("cms_at_not-a-token", INIT);
  t.is(bad.status, 401);
  t.is(bad.headers.get("www-authenticate"), `Bearer resource_metadata="${sys.url}/.well-known/oauth-protected-resource/mcp", error="invalid_token"`);

  // The SDK's own discovery, from the server URL, as a client does after the 401.
  const metadata = await discoverOAuthProtectedResourceMetadata(`${sys.url}/mcp`);
  t.is(metadata.resource, `${sys.url}/mcp`);
  t.deepEqual(metadata.authorization_servers, [sys.url]);
  t.deepEqual([...metadata.scopes_supported!].sort(), ["collections:delete", "collections:read", "collections:write", "media:delete", "media:read", "media:write", "profile:write"]);
  t.deepEqual(metadata.bearer_methods_supported, ["header"]);
  const root = await (await fetch(`${sys.url}/.well-known/oauth-protected-resource`)).json();
  t.deepEqual(root, metadata);
});

test("no API key is needed, and a token works at initialize: the session id is in the answer", async (t) => {
  const init = await rawPost(alice.token, INIT);
  t.is(init.status, 200, init.text);
  t.regex(init.headers.get("mcp-session-id") ?? "", /^[A-Za-z0-9_-]{43}$/);
  t.is(init.message.result.serverInfo.name, "collections-media");
  t.is(init.message.result.protocolVersion, "2025-06-18");
  t.truthy(init.message.result.capabilities.tools);
  // Every protocol version the SDK supports is negotiated; an unknown one is refused on later requests.
  const old = await rawPost(alice.token, { ...INIT, params: { ...INIT.params, protocolVersion: "2024-11-05" } });
  t.is(old.message.result.protocolVersion, "2024-11-05");
  const session = { "mcp-session-id": init.headers.get("mcp-session-id")! };
  t.is((await rawPost(alice.token, { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }, { ...session, "mcp-protocol-version": "2025-11-25" })).status, 200);
  t.is((await rawPost(alice.token, { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }, { ...session, "mcp-protocol-version": "1999-01-01" })).status, 400);
});

test("tools/list names every operation (operations.list), with operation.describe's request schema as input schema and the summary as description", async (t) => {
  const ops = (await sys.must(alice.token, { op: "operations.list" })).operations as Array<{ name: string }>;
  t.deepEqual(tools.map((x) => x.name).sort(), ops.map((o) => o.name.replaceAll(".", "_")).sort());
  t.is(tools.length, ops.length);
  for (const op of ops) {
    const tool = tools.find((x) => x.name === op.name.replaceAll(".", "_"))!;
    const { operation } = await sys.must(alice.token, { op: "operation.describe", operation: op.name });
    const { op: _op, ...properties } = operation.request_schema.properties;
    const expected = { ...operation.request_schema, properties, required: operation.request_schema.required.filter((r: string) => r !== "op") };
    if (!expected.required.length) delete expected.required;
    t.deepEqual(tool.inputSchema, expected, op.name);
    t.true(tool.description!.startsWith(operation.summary), op.name);
    t.is(operation.mcp_tool, tool.name);
    t.is(tool.outputSchema?.type, "object");
    t.truthy(tool.annotations, op.name);
  }
});

test("annotations follow the operations' options", (t) => {
  const ann = (name: string) => tools.find((x) => x.name === name)!.annotations!;
  t.like(ann("collections_get"), { readOnlyHint: true, destructiveHint: false, openWorldHint: false });
  t.like(ann("collections_delete"), { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false });
  t.like(ann("collections_create"), { readOnlyHint: false, destructiveHint: false, openWorldHint: true });
  t.like(ann("media_delete"), { readOnlyHint: false, destructiveHint: true });
  t.like(ann("collections_webhook_test"), { readOnlyHint: false, idempotentHint: false, openWorldHint: true });
  t.like(ann("ui_state_set"), { readOnlyHint: false, destructiveHint: false });
});

test("tools/call collections_create creates a collection the JSON endpoint shows; structuredContent matches the output schema and the operation's response schema", async (t) => {
  const alice = await sys.user();
  const { client } = await connect(alice.token);
  t.teardown(() => client.close());
  const name = `From MCP ${randomBytes(3).toString("hex")}`;
  const result = await client.callTool({ name: "collections_create", arguments: { name, description: "made by a tool", tags: ["mcp"] } }) as CallToolResult;
  t.falsy(result.isError, JSON.stringify(result));
  const created = result.structuredContent as { collection: { id: number; name: string } };
  t.is(created.collection.name, name);
  t.deepEqual(JSON.parse((result.content[0] as { text: string }).text), created);
  const tool = tools.find((x) => x.name === "collections_create")!;
  t.true(ajv.validate(tool.outputSchema!, created), ajv.errorsText());
  const { operation } = await sys.must(alice.token, { op: "operation.describe", operation: "collections.create" });
  t.true(ajv.validate(operation.response_schema, created), ajv.errorsText());

  const seen = await sys.must(alice.token, { op: "collections.get", collection_id: created.collection.id });
  t.is(seen.collection.name, name);
  t.is(seen.collection.description, "made by a tool");

  // A few more answers of different shapes, each against its tool's output schema.
  for (const [tname, args] of [["collections_list", {}], ["ping", {}], ["profile_get", {}], ["tags_vocabulary_get", {}], ["collections_stats_get", { collection_id: created.collection.id }]] as const) {
    const r = await client.callTool({ name: tname, arguments: args }) as CallToolResult;
    t.falsy(r.isError, `${tname}: ${JSON.stringify(r.structuredContent)}`);
    const schema = tools.find((x) => x.name === tname)!.outputSchema!;
    t.true(ajv.validate((schema.anyOf as object[])[0]!, r.structuredContent), `${tname}: ${ajv.errorsText()}`);
  }
});

test("a tool without its scope answers insufficient_scope as a tool error", async (t) => {
  const reader = await sys.user({ scopes: ["collections:read"] });
  const { client } = await connect(reader.token);
  t.teardown(() => client.close());
  const denied = await client.callTool({ name: "collections_create", arguments: { name: "nope" } }) as CallToolResult;
  t.true(denied.isError);
  t.like(denied.structuredContent, { error: "insufficient_scope", need: "collections:write" });
  t.deepEqual(JSON.parse((denied.content[0] as { text: string }).text), denied.structuredContent);
  const listed = await client.callTool({ name: "collections_list", arguments: {} }) as CallToolResult;
  t.falsy(listed.isError);
  t.is(((await sys.must(reader.token, { op: "collections.list" })).collections as unknown[]).length, 0, "nothing was created");
});

test("validation errors are tool errors with the JSON endpoint's body", async (t) => {
  const alice = await sys.user();
  const { client } = await connect(alice.token);
  t.teardown(() => client.close());
  const cases: Array<[Record<string, unknown>, string]> = [
    [{}, "name"],
    [{ name: "x", colour: "red" }, "colour"],
    [{ name: 5 }, "name"],
    [{ name: "x", description: "a\u0000b" }, "description"],
  ];
  for (const [args, field] of cases) {
    const r = await client.callTool({ name: "collections_create", arguments: args }) as CallToolResult;
    t.true(r.isError, JSON.stringify(args));
    t.like(r.structuredContent, { error: "invalid_request", field });
    const viaJson = await sys.call(alice.token, { op: "collections.create", ...args });
    t.is(viaJson.status, 400);
    t.deepEqual(r.structuredContent, viaJson.body, "the same error as the JSON endpoint");
  }
  await t.throwsAsync(client.callTool({ name: "collections.create", arguments: { name: "x" } }), { message: /Unknown tool/ }, "an unknown tool is a protocol error");
});

test("idempotency keys are shared with the JSON endpoint: a replay answers the first call's body", async (t) => {
  const alice = await sys.user();
  const { client } = await connect(alice.token);
  t.teardown(() => client.close());
  const key = `k-${randomBytes(6).toString("hex")}`;
  const args = { name: `Idem ${key}`, idempotency_key: key };
  const first = await client.callTool({ name: "collections_create", arguments: args }) as CallToolResult;
  t.falsy(first.isError);
  const again = await client.callTool({ name: "collections_create", arguments: args }) as CallToolResult;
  t.deepEqual(again.structuredContent, first.structuredContent);
  const viaJson = await sys.call(alice.token, { op: "collections.create", ...args });
  t.is(viaJson.status, 200);
  t.is(viaJson.headers.get("idempotent-replayed"), "true");
  t.deepEqual(viaJson.body, first.structuredContent);
  const reused = await client.callTool({ name: "collections_create", arguments: { ...args, description: "other" } }) as CallToolResult;
  t.like(reused.structuredContent, { error: "idempotency_key_reused" });
});

/** Uploads bytes as a media item of a new collection; its id. */
async function upload(user: TestUser, filename: string, bytes: Buffer): Promise<number> {
  const { collection } = await sys.must(user.token, { op: "collections.create", name: `Files ${randomBytes(4).toString("hex")}` });
  const { media } = await sys.must(user.token, {
    op: "media.upload", collection_id: collection.id, name: filename, filename, content_base64: bytes.toString("base64"), content_length: bytes.length,
  });
  return media.id;
}

test("media_download: text inline, binary of 16 KB or less as base64, larger binary as a download URL", async (t) => {
  const alice = await sys.user();
  const { client } = await connect(alice.token);
  t.teardown(() => client.close());
  const schema = tools.find((x) => x.name === "media_download")!.outputSchema!;
  const call = async (mediaId: number) => {
    const r = await client.callTool({ name: "media_download", arguments: { media_id: mediaId } }) as CallToolResult;
    t.falsy(r.isError, JSON.stringify(r.structuredContent));
    t.true(ajv.validate((schema.anyOf as object[])[0]!, r.structuredContent), ajv.errorsText());
    return r;
  };

  const text = "Notes from the trip\n".repeat(1500); // 30 KB of text: still inline
  const textId = await upload(alice, "notes.txt", Buffer.from(text));
  const t1 = await call(textId);
  t.like(t1.structuredContent, { media_id: textId, encoding: "text", text, content_length: Buffer.byteLength(text), filename: "notes.txt" });
  t.regex((t1.structuredContent as { content_type: string }).content_type, /^text\/plain/);

  const small = randomBytes(16 * 1024);
  const smallId = await upload(alice, "small.bin", small);
  const t2 = await call(smallId);
  t.like(t2.structuredContent, { encoding: "base64", content_length: small.length });
  t.deepEqual(Buffer.from((t2.structuredContent as { content_base64: string }).content_base64, "base64"), small);
  t.is((t2.structuredContent as { sha256: string | null }).sha256, createHash("sha256").update(small).digest("hex"));
  t.true(t2.content.some((c) => c.type === "resource"), "an embedded resource block for clients that show files");

  const large = randomBytes(16 * 1024 + 1);
  const largeId = await upload(alice, "large.bin", large);
  const t3 = await call(largeId);
  const answer = t3.structuredContent as { encoding: string; download_url: string; expires_at: string; content_base64?: string };
  t.is(answer.encoding, "url");
  t.is(answer.content_base64, undefined);
  t.true(Date.parse(answer.expires_at) > Date.now());
  const fetched = await fetch(answer.download_url);
  t.is(fetched.status, 200);
  t.deepEqual(Buffer.from(await fetched.arrayBuffer()), large, "the URL needs no header and gives the bytes");
  t.true(t3.content.some((c) => c.type === "resource_link"));

  const { collection } = await sys.must(alice.token, { op: "collections.create", name: `Notes ${randomBytes(4).toString("hex")}` });
  const { media: note } = await sys.must(alice.token, { op: "media.text_note.add", collection_id: collection.id, name: "n", text: "inline" });
  const refused = await client.callTool({ name: "media_download", arguments: { media_id: note.id } }) as CallToolResult;
  t.true(refused.isError, "an inline text note has no file to download");
  const bob = await sys.user();
  const { client: bobClient } = await connect(bob.token);
  t.teardown(() => bobClient.close());
  const foreign = await bobClient.callTool({ name: "media_download", arguments: { media_id: smallId } }) as CallToolResult;
  t.true(foreign.isError);
  t.regex((foreign.structuredContent as { error: string }).error, /^(forbidden|not_found)$/);
});

test("a tool call with a progress token gets progress notifications, the last one complete", async (t) => {
  const alice = await sys.user();
  const { client } = await connect(alice.token);
  t.teardown(() => client.close());
  const seen: Progress[] = [];
  const bytes = randomBytes(20_000);
  const id = await upload(alice, "p.bin", bytes);
  const r = await client.callTool({ name: "media_download", arguments: { media_id: id } }, undefined, { onprogress: (p) => seen.push(p) }) as CallToolResult;
  t.falsy(r.isError);
  t.true(seen.length >= 2, JSON.stringify(seen));
  t.is(seen[0]!.progress, 0);
  const last = seen[seen.length - 1]!;
  t.is(last.progress, last.total!);
  for (let i = 1; i < seen.length; i++) t.true(seen[i]!.progress > seen[i - 1]!.progress);
});

test("a deleted session is gone; a session belongs to its user; a request without one is refused", async (t) => {
  const alice = await sys.user();
  const { client, transport } = await connect(alice.token);
  const id = transport.sessionId!;
  t.truthy(id);
  const list = { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} };
  t.is((await rawPost(alice.token, list, { "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" })).status, 200);
  const bob = await sys.user();
  t.is((await rawPost(bob.token, list, { "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" })).status, 404, "another user's token cannot use it");
  t.is((await rawPost(alice.token, list)).status, 400, "no session id");
  const get = await fetch(`${sys.url}/mcp`, { headers: { authorization: `Bearer ${alice.token}`, accept: "text/event-stream", "mcp-session-id": id } });
  t.is(get.status, 405, "no stream of server-initiated messages");
  t.is(get.headers.get("allow"), "POST, DELETE");
  await transport.terminateSession();
  await client.close();
  const again = await fetch(`${sys.url}/mcp`, { method: "DELETE", headers: { authorization: `Bearer ${alice.token}`, "mcp-session-id": id } });
  t.is(again.status, 404, "deleted once");
  const after = await rawPost(alice.token, list, { "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" });
  t.is(after.status, 404);
  t.is(after.message.error.code, -32001);
});

test("a body that is not UTF-8 or has a key twice is a JSON-RPC parse error; non-ASCII text is read as UTF-8", async (t) => {
  const notUtf8 = Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"'), Buffer.from([0xe9]), Buffer.from('"}}}')]);
  const bad = await rawPost(alice.token, notUtf8);
  t.is(bad.status, 400);
  t.is(bad.message.error.code, -32700);
  t.regex(bad.message.error.message, /UTF-8/);
  const twice = await rawPost(alice.token, '{"jsonrpc":"2.0","id":1,"id":2,"method":"initialize"}');
  t.is(twice.status, 400);
  t.regex(twice.message.error.message, /"id" appears more than once/);
  const named = await rawPost((await sys.user()).token, { ...INIT, params: { ...INIT.params, clientInfo: { name: "Café 東京", version: "1" } } });
  t.is(named.status, 200, named.text);
  t.truthy(named.message.result.serverInfo);
});

test("sessions per user are bounded: a new one closes the least recently used", async (t) => {
  const u = await sys.user();
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) ids.push((await rawPost(u.token, INIT)).headers.get("mcp-session-id")!);
  const list = { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} };
  const statuses = [];
  for (const id of ids) statuses.push((await rawPost(u.token, list, { "mcp-session-id": id })).status);
  t.deepEqual(statuses, [404, 200, 200, 200], "MCP_SESSIONS_PER_USER=3");
});

test("a token revoked by mcp_revoke_session is refused on the very next request", async (t) => {
  const u = await sys.user();
  const { client, transport } = await connect(u.token);
  const id = transport.sessionId!;
  const r = await client.callTool({ name: "mcp_revoke_session", arguments: {} }) as CallToolResult;
  t.falsy(r.isError, JSON.stringify(r));
  t.true((r.structuredContent as { revoked: number }).revoked >= 1);
  await t.throwsAsync(client.callTool({ name: "ping", arguments: {} }));
  const raw = await rawPost(u.token, { jsonrpc: "2.0", id: 3, method: "tools/list", params: {} }, { "mcp-session-id": id });
  t.is(raw.status, 401);
  t.regex(raw.headers.get("www-authenticate")!, /error="invalid_token"/);
  const fresh = await sys.token(u.username);
  t.is((await rawPost(fresh, { jsonrpc: "2.0", id: 4, method: "tools/list", params: {} }, { "mcp-session-id": id })).status, 404, "the revoked session is closed too");
  await client.close().catch(() => {});
});

test("a token revoked at the auth service is refused at once, mid-session", async (t) => {
  const u = await sys.user();
  const { client } = await connect(u.token);
  t.falsy(((await client.callTool({ name: "ping", arguments: {} })) as CallToolResult).isError);
  await sys.system.clients.get(AuthService).revokeToken({ token: u.token });
  const err = await t.throwsAsync(client.callTool({ name: "ping", arguments: {} }));
  t.is((err as Error & { code?: number }).code, 401);
  t.regex(String(err?.message), /unauthorized/);
  await client.close().catch(() => {});
});

test("schema.get names the MCP endpoint and records the MCP renderings and rules", async (t) => {
  const schema = await sys.must(alice.token, { op: "schema.get" });
  t.is(schema.mcp_endpoint, `${sys.url}/mcp`);
  t.regex(schema.decisions["media.download (MCP)"], /16384 bytes or less in content_base64/);
  t.regex(schema.decisions["mcp tools"], /isError: true/);
  t.regex(schema.decisions["mcp server"], /Mcp-Session-Id/);
});

test("MCP requests count against the same per-user rate limit as the JSON endpoint", async (t) => {
  const limited = await startTestSystem({ RATE_LIMIT_PER_MINUTE: "3" });
  t.teardown(() => limited.stop());
  const u = await limited.user();
  // Fixed one-minute windows: start well inside one, so that the four requests share it.
  if (Date.now() % 60_000 > 45_000) await new Promise((r) => setTimeout(r, 60_000 - (Date.now() % 60_000) + 100));
  const post = (body: unknown, headers: Record<string, string> = {}) => fetch(`${limited.url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${u.token}`, ...headers },
    body: JSON.stringify(body),
  });
  const init = await post(INIT);
  t.is(init.status, 200);
  t.is(init.headers.get("x-ratelimit-remaining"), "2");
  const session = { "mcp-session-id": init.headers.get("mcp-session-id")! };
  t.is((await limited.call(u.token, { op: "ping" })).status, 200);
  t.is((await post({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} }, session)).status, 200);
  const refused = await post({ jsonrpc: "2.0", id: 3, method: "tools/list", params: {} }, session);
  t.is(refused.status, 429);
  t.truthy(refused.headers.get("retry-after"));
  t.is((await refused.json()).error, "rate_limited");
  t.is((await limited.call(u.token, { op: "ping" })).status, 429, "and the JSON endpoint is refused too");
});
