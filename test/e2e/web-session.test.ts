/**
 * The first-party web session over HTTP: the sign-in page at APP_URL, its cookie, CSRF tokens on
 * every form, generic errors, the per-account and per-address throttle, sign-out, and the
 * player (its page and its live channel) following the signed-in owner through the cookie.
 */
import test from "ava";
import { randomBytes } from "node:crypto";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { openSse } from "../helpers/sse.js";
import { WebClient, alertOf, hiddenField } from "../helpers/web-client.js";

let sys: TestSystem;
test.before(async () => { sys = await startTestSystem(); });
test.after.always(async () => { await sys?.stop(); });

const PASSWORD = "correct horse battery staple";

/** A user who can sign in with PASSWORD. */
async function member(): Promise<{ username: string; userId: string }> {
  const username = `web_${randomBytes(4).toString("hex")}`;
  const u = await sys.user({ username, password: PASSWORD });
  return { username, userId: u.userId };
}

test("GET / signed out shows the sign-in form with a CSRF token bound to a pre-session cookie", async (t) => {
  const web = new WebClient(sys.url);
  const page = await web.get("/");
  t.is(page.status, 200);
  t.is(page.headers.get("content-type"), "text/html; charset=utf-8");
  t.is(page.headers.get("cache-control"), "no-store");
  t.is(page.headers.get("x-frame-options"), "DENY");
  t.regex(page.headers.get("content-security-policy")!, /default-src 'none'.*form-action 'self'.*frame-ancestors 'none'/);
  t.regex(page.html, /<form method="post" action="\/signin">/);
  t.regex(page.html, /<input type="password" id="password" name="password" autocomplete="current-password"/);
  t.truthy(hiddenField(page.html, "csrf"));
  const pre = page.setCookies.find((c) => c.startsWith("cms_presession="));
  t.truthy(pre);
  t.regex(pre!, /HttpOnly/);
  t.regex(pre!, /SameSite=Lax/);
  t.notRegex(pre!, /Secure/, "APP_URL is http here");
});

test("signing in sets an HttpOnly, SameSite=Lax session cookie and GET / then shows who is signed in", async (t) => {
  const { username } = await member();
  const web = new WebClient(sys.url);
  const res = await web.signIn(username, PASSWORD);
  t.is(res.status, 303);
  t.is(res.location, "/");
  const cookie = res.setCookies.find((c) => c.startsWith("cms_session="));
  t.truthy(cookie);
  t.regex(cookie!, /^cms_session=cms_ws_[A-Za-z0-9_-]{43};/);
  t.regex(cookie!, /HttpOnly/);
  t.regex(cookie!, /SameSite=Lax/);
  t.regex(cookie!, /Path=\//);
  t.regex(cookie!, /Max-Age=\d{6,}/);
  t.notRegex(cookie!, /Secure/);
  const home = await web.get("/");
  t.is(home.status, 200);
  t.regex(home.html, new RegExp(`Signed in as <strong>${username}</strong>`));
  t.regex(home.html, /<form method="post" action="\/signout">/);
});

test("a username is matched whatever its case; the form keeps to a local return path", async (t) => {
  const { username } = await member();
  const web = new WebClient(sys.url);
  const page = await web.get("/");
  const res = await web.post("/signin", { csrf: hiddenField(page.html, "csrf"), return_to: "//evil.example/x", username: username.toUpperCase(), password: PASSWORD });
  t.is(res.status, 303);
  t.is(res.location, "/", "another origin is never a place to go back to");
});

test("a form without its CSRF token, or with another browser's, signs nobody in", async (t) => {
  const { username } = await member();
  const web = new WebClient(sys.url);
  await web.get("/");
  const none = await web.post("/signin", { return_to: "/", username, password: PASSWORD });
  t.is(none.status, 403);
  t.is(alertOf(none.html), "This form expired. Please sign in again.");
  t.false(none.setCookies.some((c) => c.startsWith("cms_session=")));

  const other = new WebClient(sys.url);
  const otherPage = await other.get("/");
  const stolen = await web.post("/signin", { csrf: hiddenField(otherPage.html, "csrf"), return_to: "/", username, password: PASSWORD });
  t.is(stolen.status, 403);
  t.false(stolen.setCookies.some((c) => c.startsWith("cms_session=")));

  // A cross-site form post brings no pre-session cookie at all (SameSite=Lax): refused too.
  const bare = new WebClient(sys.url);
  const cross = await bare.post("/signin", { csrf: hiddenField(otherPage.html, "csrf"), return_to: "/", username, password: PASSWORD });
  t.is(cross.status, 403);
});

test("a wrong password and an unknown username get the same generic answer", async (t) => {
  const { username } = await member();
  const web = new WebClient(sys.url);
  const wrong = await web.signIn(username, "not the password");
  const unknown = await web.signIn(`nobody_${randomBytes(3).toString("hex")}`, PASSWORD);
  t.is(wrong.status, 401);
  t.is(unknown.status, 401);
  t.is(alertOf(wrong.html), "The username or password is incorrect.");
  t.is(alertOf(unknown.html), alertOf(wrong.html));
  t.false([...wrong.setCookies, ...unknown.setCookies].some((c) => c.startsWith("cms_session=")));
  // The form comes back with the username filled in, never the password.
  t.regex(wrong.html, new RegExp(`value="${username}"`));
  t.false(wrong.html.includes("not the password"));
});

test("five wrong passwords for one account within 15 minutes refuse the sixth attempt, even the right password, from any address", async (t) => {
  const { username } = await member();
  const attacker = new WebClient(sys.url);
  for (let i = 0; i < 5; i++) t.is((await attacker.signIn(username, `guess ${i} wrong`)).status, 401);
  const refused = await attacker.signIn(username, PASSWORD);
  t.is(refused.status, 429);
  t.regex(alertOf(refused.html)!, /^Too many sign-in attempts\. Try again in \d+ minutes?\.$/);
  t.truthy(Number(refused.headers.get("retry-after")) > 0);
  t.false(refused.setCookies.some((c) => c.startsWith("cms_session=")));
  // The account is throttled, not the address: the owner elsewhere is refused too ...
  const owner = new WebClient(sys.url);
  t.is((await owner.signIn(username, PASSWORD)).status, 429);
  // ... while another account from the attacker's address still signs in.
  const other = await member();
  t.is((await attacker.signIn(other.username, PASSWORD)).status, 303);
});

test("a successful sign-in clears the account's earlier failures", async (t) => {
  const { username } = await member();
  const web = new WebClient(sys.url);
  for (let i = 0; i < 4; i++) t.is((await web.signIn(username, `typo ${i}`)).status, 401);
  t.is((await web.signIn(username, PASSWORD)).status, 303);
  const again = new WebClient(sys.url);
  for (let i = 0; i < 4; i++) t.is((await again.signIn(username, `typo again ${i}`)).status, 401);
  t.is((await again.signIn(username, PASSWORD)).status, 303);
});

test("twenty failures from one address refuse it, whatever the accounts (a password tried across many users)", async (t) => {
  t.timeout(120_000);
  const sprayer = new WebClient(sys.url);
  for (let i = 0; i < 20; i++) t.is((await sprayer.signIn(`spray_${i}_${randomBytes(2).toString("hex")}`, "Summer2026!")).status, 401);
  const victim = await member();
  const refused = await sprayer.signIn(victim.username, PASSWORD);
  t.is(refused.status, 429);
  t.regex(alertOf(refused.html)!, /^Too many sign-in attempts/);
  // The victim, from their own address, is not affected.
  t.is((await new WebClient(sys.url).signIn(victim.username, PASSWORD)).status, 303);
});

test("sign-out needs the session's CSRF token, clears the cookie and ends the session at once", async (t) => {
  const { username } = await member();
  const web = new WebClient(sys.url);
  await web.signIn(username, PASSWORD);
  const token = web.jar.get("cms_session")!;
  const home = await web.get("/");
  const forged = await web.post("/signout", { csrf: "forged", return_to: "/" });
  t.is(forged.status, 403);
  t.regex((await web.get("/")).html, /Signed in as/);

  const out = await web.post("/signout", { csrf: hiddenField(home.html, "csrf"), return_to: "/" });
  t.is(out.status, 303);
  t.true(out.setCookies.some((c) => /^cms_session=;.*Max-Age=0/.test(c)));
  t.regex((await web.get("/")).html, /<form method="post" action="\/signin">/);
  // The old token is dead everywhere, not just forgotten by this browser.
  const replay = new WebClient(sys.url);
  replay.jar.set("cms_session", token);
  t.regex((await replay.get("/")).html, /action="\/signin"/);
  t.is((await sys.call(token, { op: "ping" })).status, 401);
});

test("the web session token acts as its user on the JSON endpoint and for mcp.revoke_session", async (t) => {
  const { username, userId } = await member();
  const web = new WebClient(sys.url);
  await web.signIn(username, PASSWORD);
  const token = web.jar.get("cms_session")!;
  const ping = await sys.call(token, { op: "ping" });
  t.is(ping.status, 200);
  t.is(ping.body.user.user_id, userId);
  t.is((await sys.call(token, { op: "mcp.revoke_session" })).status, 200);
  t.is((await sys.call(token, { op: "ping" })).status, 200, "revoking MCP sessions does not sign the user out of the web");
});

test("the player channel accepts the session cookie; a signed-out cookie gets 401", async (t) => {
  const { username } = await member();
  const web = new WebClient(sys.url);
  await web.signIn(username, PASSWORD);
  const stream = await openSse(`${sys.url}/player/events`, { cookie: web.cookieHeader() });
  t.is(stream.status, 200);
  const first = await stream.next(5000);
  t.is(first.event, "ui_state");
  stream.close();

  const home = await web.get("/");
  const cookie = web.cookieHeader();
  await web.post("/signout", { csrf: hiddenField(home.html, "csrf"), return_to: "/" });
  const after = await fetch(`${sys.url}/player/events`, { headers: { cookie } });
  t.is(after.status, 401);
  t.is((await after.json()).error, "unauthorized");
  const anonymous = await fetch(`${sys.url}/player/events`);
  t.is(anonymous.status, 401);
});

test("the owner's player page boots live with the session cookie; anonymous and other users' pages do not", async (t) => {
  const { username } = await member();
  const token = await sys.token(username);
  const c = (await sys.must(token, { op: "collections.create", name: "Signed-in page" })).collection;
  await sys.must(token, { op: "collections.publish", collection_id: c.id, slug: "signed-in", share_access_level: "public" });
  const { url } = await sys.must(token, { op: "collections.share_url", collection_id: c.id });
  const path = new URL(url).pathname;
  const live = (html: string) => JSON.parse(/<script type="application\/json" id="player-data">([^<]*)<\/script>/.exec(html)![1]!).live;

  const web = new WebClient(sys.url);
  t.false(live((await web.get(path)).html));
  await web.signIn(username, PASSWORD);
  t.true(live((await web.get(path)).html));
  const stranger = await member();
  const other = new WebClient(sys.url);
  await other.signIn(stranger.username, PASSWORD);
  t.false(live((await other.get(path)).html));
});

test("the pages refuse what they do not serve: GET /signin, a JSON body, an oversized form", async (t) => {
  const web = new WebClient(sys.url);
  t.is((await web.get("/signin")).status, 405);
  t.is((await web.request("/signin", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status, 400);
  const big = await web.request("/signin", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `username=${"a".repeat(20_000)}` });
  t.is(big.status, 413);
});
