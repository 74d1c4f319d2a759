/**
 * A stock MCP client signs a user in by itself: the MCP SDK's Client with an OAuthClientProvider
 * against {MCP_URL}/mcp discovers the authorization server from the 401 (RFC 9728, RFC 8414),
 * registers itself dynamically (RFC 7591), sends the user to the authorization page (the browser
 * step scripted in headless Chromium: sign in, Allow), finishes with the code and PKCE verifier,
 * and calls tools with the audience-bound token it got; the JSON endpoint refuses that token,
 * mcp_revoke_session ends the session.
 */
import test from "ava";
import { randomBytes } from "node:crypto";
import type { Browser } from "playwright-core";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError, type OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { launchBrowser, startTogether, screenshot, submitSignIn } from "../helpers/browser.js";

const PASSWORD = "correct horse battery staple";
/** A native client's loopback callback; the browser is stopped there, nothing needs to listen. */
const REDIRECT = "http://127.0.0.1:33418/callback";

let sys: TestSystem;
let browser: Browser;
test.before(async () => { [sys, browser] = await startTogether(startTestSystem(), launchBrowser()); });
test.after.always(async () => { await browser?.close(); await sys?.stop(); });

/** What an MCP client application keeps: its registration, tokens and verifier; the user's browser step scripted. */
class ScriptedProvider implements OAuthClientProvider {
  client?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = "";
  authorizationUrl?: URL;
  /** The code the browser step brought back. */
  code?: Promise<string>;
  constructor(private readonly username: string) {}
  get redirectUrl() { return REDIRECT; }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: "Scripted MCP Client", redirect_uris: [REDIRECT], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation() { return this.client; }
  saveClientInformation(info: OAuthClientInformationMixed) { this.client = info; }
  tokens() { return this.saved; }
  saveTokens(tokens: OAuthTokens) { this.saved = tokens; }
  saveCodeVerifier(v: string) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
    this.code = this.browserStep(url);
  }
  /** What the user does in the browser: sign in, Allow; the code the client's callback receives. */
  private async browserStep(url: URL): Promise<string> {
    const context = await browser.newContext({ viewport: { width: 1100, height: 820 } });
    try {
      const page = await context.newPage();
      // The loopback callback has no server here: stop the browser there and read the code.
      let landed: (u: string) => void;
      const callback = new Promise<string>((r) => { landed = r; });
      await page.route(`${REDIRECT}**`, async (route) => { landed(route.request().url()); await route.fulfill({ status: 200, body: "done" }); });
      await page.goto(url.toString());
      await submitSignIn(page, this.username, PASSWORD);
      await screenshot(page, "mcp-oauth-consent");
      await page.click("button[value=allow]");
      const params = new URL(await callback).searchParams;
      if (!params.get("code")) throw new Error(`no code: ${params}`);
      return params.get("code")!;
    } finally {
      await context.close();
    }
  }
}

test("discovery from the 401, dynamic registration, sign-in and consent in the browser, tools/call with the token", async (t) => {
  t.timeout(120_000);
  const username = `mcp_${randomBytes(4).toString("hex")}`;
  await sys.user({ username, plan: "paid", password: PASSWORD });
  const provider = new ScriptedProvider(username);
  const mcpUrl = new URL(`${sys.url}/mcp`);

  // First attempt: no token, the SDK discovers, registers and sends the user to the page.
  const first = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
  await t.throwsAsync(new Client({ name: "scripted", version: "1.0.0" }).connect(first), { instanceOf: UnauthorizedError });
  t.regex(String(provider.client?.client_id), /^cms_client_/, "registered dynamically");
  const authUrl = provider.authorizationUrl!;
  t.is(`${authUrl.origin}${authUrl.pathname}`, `${sys.url}/`);
  t.is(authUrl.searchParams.get("oauth"), "1");
  t.is(authUrl.searchParams.get("code_challenge_method"), "S256");
  t.is(authUrl.searchParams.get("resource"), `${sys.url}/mcp`);

  const code = await provider.code!;
  await first.finishAuth(code);
  t.truthy(provider.saved?.access_token);
  t.truthy(provider.saved?.refresh_token);
  const info = await sys.system.clients.get(AuthService).introspectToken({ token: provider.saved!.access_token });
  t.is(info.audience, `${sys.url}/mcp`, "the token is bound to the MCP endpoint");

  // Connected with the token the SDK got: tools work, as the signed-in user.
  const client = new Client({ name: "scripted", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
  const names = (await client.listTools()).tools.map((tool) => tool.name);
  t.true(names.includes("collections_create"));
  const created = await client.callTool({ name: "collections_create", arguments: { name: "Made by an agent" } }) as CallToolResult;
  t.falsy(created.isError, JSON.stringify(created.content));
  const id = (created.structuredContent as { collection: { id: number } }).collection.id;
  const token = await sys.token(username);
  t.is((await sys.must(token, { op: "collections.get", collection_id: id })).collection.name, "Made by an agent");

  // The audience-bound token does not work on the JSON endpoint.
  t.is((await sys.call(provider.saved!.access_token, { op: "ping" })).status, 401);

  // mcp_revoke_session ends it: the token and its refresh family.
  const revoked = await client.callTool({ name: "mcp_revoke_session", arguments: {} }) as CallToolResult;
  t.falsy(revoked.isError, JSON.stringify(revoked.content));
  t.false((await sys.system.clients.get(AuthService).introspectToken({ token: provider.saved!.access_token })).active);
  const refresh = await fetch(`${sys.url}/functions/v1/thirdparty-oauth-token`, {
    method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: provider.saved!.refresh_token!, client_id: String(provider.client!.client_id) }),
  });
  t.is(((await refresh.json()) as { error: string }).error, "invalid_grant");
  await client.close().catch(() => {});
});
