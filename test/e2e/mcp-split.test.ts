/**
 * The hosted MCP server in split mode: two gateway processes in front of the service processes.
 * A session opened through one gateway is served by the other (sessions live in the gateway
 * schema), tool calls reach the services over HTTP/2, and a DELETE through either ends the
 * session for both. Needs real backends (DATABASE_URL and NATS_URL); skipped otherwise.
 *
 *   npm run test:backends -- test/e2e/mcp-split.test.ts
 */
import test from "ava";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { call, splitEnabled, startSplitSystem } from "../helpers/split.js";

/** A JSON-RPC POST to a gateway's /mcp with a session id; the status and the answer's message. */
async function post(gateway: string, token: string, sessionId: string, body: unknown): Promise<{ status: number; message?: any }> {
  const res = await fetch(`${gateway}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json", accept: "application/json, text/event-stream",
      authorization: `Bearer ${token}`, "mcp-session-id": sessionId, "mcp-protocol-version": "2025-06-18",
    },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  const data = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)));
  return { status: res.status, message: data.find((m) => "result" in m || "error" in m) ?? (text ? JSON.parse(text) : undefined) };
}

if (!splitEnabled) {
  test.skip("MCP in split mode (skipped: needs DATABASE_URL and NATS_URL; run with npm run test:backends)", () => {});
} else {
  test("MCP in split mode: a session opened on one gateway is served by the other; tools reach the services", async (t) => {
    t.timeout(240_000);
    let sys;
    try {
      sys = await startSplitSystem({ gateways: 2 });
    } catch (err) {
      t.fail((err as Error).message);
      return;
    }
    t.teardown(() => sys.stop());
    const [urlA, urlB] = sys.gateways as [string, string];
    const alice = await sys.user("alice");

    const client = new Client({ name: "mcp-split", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${urlA}/mcp`), { requestInit: { headers: { authorization: `Bearer ${alice.token}` } } });
    await client.connect(transport);
    const sessionId = transport.sessionId!;
    t.truthy(sessionId);
    const { tools } = await client.listTools();
    t.true(tools.some((x) => x.name === "collections_create"));

    const created = await client.callTool({ name: "collections_create", arguments: { name: "Split MCP" } }) as CallToolResult;
    t.falsy(created.isError, JSON.stringify(created.structuredContent));
    const id = (created.structuredContent as { collection: { id: number } }).collection.id;

    // The other gateway knows the session and runs tools in it.
    const viaB = await post(urlB, alice.token, sessionId, { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "collections_get", arguments: { collection_id: id } } });
    t.is(viaB.status, 200, JSON.stringify(viaB.message));
    t.is(viaB.message.result.structuredContent.collection.name, "Split MCP");
    t.is((await call(urlB, alice.token, { op: "collections.get", collection_id: id })).body.collection.name, "Split MCP");

    // A tool error crosses the processes as the contract's error body.
    const missing = await client.callTool({ name: "collections_get", arguments: { collection_id: 999_999_999 } }) as CallToolResult;
    t.true(missing.isError);
    t.regex((missing.structuredContent as { error: string }).error, /^(not_found|forbidden)$/);

    // DELETE through B ends the session on A too.
    const del = await fetch(`${urlB}/mcp`, { method: "DELETE", headers: { authorization: `Bearer ${alice.token}`, "mcp-session-id": sessionId } });
    t.is(del.status, 200);
    const after = await post(urlA, alice.token, sessionId, { jsonrpc: "2.0", id: 8, method: "tools/list", params: {} });
    t.is(after.status, 404);
    await client.close().catch(() => {});
  });
}
