/**
 * The OAuth 2.0 authorization code flow with PKCE in a real browser (headless Chromium): a
 * third-party client registers, sends the user to the authorization page, the user signs in
 * and consents by clicking, the browser lands on the client's callback with the code, and the
 * client exchanges it; refresh rotates, an old refresh token revokes the family, a wrong
 * verifier, redirect URI or client fails, and Deny returns access_denied. Screenshots of the
 * sign-in and consent pages go to test-artifacts/. The same protocol over plain HTTP, case by
 * case, is oauth.test.ts.
 */
import test from "ava";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { launchBrowser, startTogether, screenshot, submitSignIn } from "../helpers/browser.js";
import { authorizeUrl, pkcePair, tokenRequest } from "../helpers/oauth-client.js";

const PASSWORD = "correct horse battery staple";

let sys: TestSystem;
let browser: Browser;
let callback: { url: string; close(): Promise<void> };
let meta: Record<string, any>;

/** The client's redirect URI: a loopback server that shows what it received, as a native app's would. */
async function startCallbackServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const q = new URL(req.url ?? "/", "http://x").searchParams;
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(`<!doctype html><title>callback</title><p id="result">${q.has("code") ? "code received" : `error: ${q.get("error")}`}</p>`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

test.before(async () => {
  [sys, browser, callback] = await startTogether(startTestSystem(), launchBrowser(), startCallbackServer());
  meta = await (await fetch(`${sys.url}/.well-known/oauth-authorization-server`)).json() as Record<string, any>;
});
test.after.always(async () => {
  await browser?.close();
  await sys?.stop();
  await callback?.close();
});

async function member(): Promise<string> {
  const username = `br_${randomBytes(4).toString("hex")}`;
  await sys.user({ username, password: PASSWORD });
  return username;
}

async function registerClient(name: string): Promise<string> {
  const res = await fetch(meta.registration_endpoint, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ client_name: name, redirect_uris: [callback.url], token_endpoint_auth_method: "none" }),
  });
  return ((await res.json()) as { client_id: string }).client_id;
}

async function newTab(): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1100, height: 820 }, deviceScaleFactor: 1 });
  return { context, page: await context.newPage() };
}

/** Waits for the browser to land on the client's callback; its query parameters. */
async function landed(page: Page): Promise<Record<string, string>> {
  await page.waitForURL((u) => u.toString().startsWith(callback.url), { timeout: 15_000 });
  return Object.fromEntries(new URL(page.url()).searchParams);
}

test.serial("a client starts the flow, the user signs in and allows, the code is exchanged, refresh rotates and an old refresh token revokes the family", async (t) => {
  t.timeout(120_000);
  const username = await member();
  const clientId = await registerClient("Photo Sync");
  const { verifier, challenge } = pkcePair();
  const { context, page } = await newTab();
  await page.goto(authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: callback.url, challenge, scope: "collections:read collections:write media:read", state: "s-123" }));

  t.is(await page.locator("h1").textContent(), "Sign in");
  t.regex((await page.locator(".lead").textContent())!, /to continue to Photo Sync/);
  await screenshot(page, "oauth-sign-in");
  // A wrong password first: one generic sentence, the form again.
  await submitSignIn(page, username, "wrong password");
  t.is(await page.locator(".alert").textContent(), "The username or password is incorrect.");
  t.regex((await page.locator(".lead").textContent())!, /to continue to Photo Sync/, "the form still names the client");
  t.is(await page.inputValue("#username"), username);
  await screenshot(page, "oauth-sign-in-error");
  await page.fill("#password", PASSWORD);
  await Promise.all([page.waitForLoadState("load"), page.click("button[type=submit]")]);

  t.regex((await page.locator("h1").textContent())!, /Allow Photo Sync to use your account\?/);
  t.deepEqual(await page.locator(".scopes li").allTextContents(), [
    "See your collections, private ones included",
    "Create, change, publish and share your collections",
    "See and download the media in your collections",
  ]);
  t.regex((await page.locator(".who").textContent())!, new RegExp(`Signed in as ${username}`));
  await screenshot(page, "oauth-consent");
  await page.click("button[value=allow]");
  const cb = await landed(page);
  t.is(cb.state, "s-123");
  t.is(cb.iss, sys.url);
  t.is(await page.locator("#result").textContent(), "code received");

  const tokens = await tokenRequest(meta.token_endpoint, { grant_type: "authorization_code", code: cb.code!, redirect_uri: callback.url, code_verifier: verifier, client_id: clientId });
  t.is(tokens.status, 200);
  t.is(tokens.body.scope, "collections:read collections:write media:read");
  const created = await sys.call(tokens.body.access_token, { op: "collections.create", name: "Made through OAuth" });
  t.is(created.status, 200);

  const r1 = await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: tokens.body.refresh_token, client_id: clientId });
  t.is(r1.status, 200);
  t.not(r1.body.refresh_token, tokens.body.refresh_token);
  t.is((await sys.call(r1.body.access_token, { op: "ping" })).status, 200);
  const reuse = await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: tokens.body.refresh_token, client_id: clientId });
  t.is(reuse.body.error, "invalid_grant");
  t.is((await sys.call(r1.body.access_token, { op: "ping" })).status, 401, "the family is revoked");
  t.is((await tokenRequest(meta.token_endpoint, { grant_type: "refresh_token", refresh_token: r1.body.refresh_token, client_id: clientId })).body.error, "invalid_grant");

  // Signed in and consented: the next authorization goes straight back with a code.
  const again = pkcePair();
  await page.goto(authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: callback.url, challenge: again.challenge, scope: "collections:read", state: "s-2" }));
  const cb2 = await landed(page);
  t.is(cb2.state, "s-2");
  t.truthy(cb2.code);
  await context.close();
});

test.serial("a wrong verifier, redirect URI or client does not get tokens for a code", async (t) => {
  t.timeout(120_000);
  const username = await member();
  const clientId = await registerClient("Strict Client");
  const otherClient = await registerClient("Other Client");
  const { context, page } = await newTab();
  /** A fresh code from the browser (sign-in and consent the first time only). */
  const codeFor = async (challenge: string): Promise<string> => {
    await page.goto(authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: callback.url, challenge, scope: "media:read" }));
    if (!page.url().startsWith(callback.url)) {
      if (await page.locator("#password").count()) await submitSignIn(page, username, PASSWORD);
      if (await page.locator("button[value=allow]").count()) await page.click("button[value=allow]");
    }
    return (await landed(page)).code!;
  };
  const exchange = (code: string, over: Record<string, string>, verifier: string) =>
    tokenRequest(meta.token_endpoint, { grant_type: "authorization_code", code, redirect_uri: callback.url, code_verifier: verifier, client_id: clientId, ...over });

  let p = pkcePair();
  t.is((await exchange(await codeFor(p.challenge), { code_verifier: pkcePair().verifier }, p.verifier)).body.error, "invalid_grant");
  p = pkcePair();
  t.is((await exchange(await codeFor(p.challenge), { redirect_uri: "http://127.0.0.1:1/callback" }, p.verifier)).body.error, "invalid_grant");
  p = pkcePair();
  t.is((await exchange(await codeFor(p.challenge), { client_id: otherClient }, p.verifier)).body.error, "invalid_grant");
  p = pkcePair();
  const right = await exchange(await codeFor(p.challenge), {}, p.verifier);
  t.is(right.status, 200, "the same flow with the right verifier, URI and client works");
  await context.close();
});

test.serial("Deny sends access_denied (and the state) back to the client", async (t) => {
  t.timeout(120_000);
  const username = await member();
  const clientId = await registerClient("Nosy App");
  const { context, page } = await newTab();
  await page.goto(authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: callback.url, challenge: pkcePair().challenge, scope: "collections:delete media:delete", state: "no-thanks" }));
  await submitSignIn(page, username, PASSWORD);
  t.deepEqual(await page.locator(".scopes li").allTextContents(), ["Delete your collections", "Delete media from your collections"]);
  await page.click("button[value=deny]");
  const cb = await landed(page);
  t.is(cb.error, "access_denied");
  t.is(cb.state, "no-thanks");
  t.false("code" in cb);
  t.is(await page.locator("#result").textContent(), "error: access_denied");
  await context.close();
});

test.serial("an unregistered redirect URI is explained on the page, the browser stays here", async (t) => {
  const clientId = await registerClient("Lost App");
  const { context, page } = await newTab();
  const res = await page.goto(authorizeUrl(meta.authorization_endpoint, { clientId, redirectUri: "https://attacker.example/steal", challenge: pkcePair().challenge }));
  t.is(res?.status(), 400);
  t.true(page.url().startsWith(sys.url));
  t.is(await page.locator("h1").textContent(), "This sign-in link is not valid");
  await screenshot(page, "oauth-invalid-link");
  await context.close();
});
