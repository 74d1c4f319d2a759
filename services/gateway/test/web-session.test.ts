/** The web session's cookies, CSRF tokens and return paths. */
import test from "ava";
import { cookieHeader, cookieNames } from "../src/http/web-session.js";
import { localPath } from "../src/http/account-routes.js";
import { csrfToken, csrfValid } from "../src/domain/csrf.js";
import { renderConsent, renderSignIn } from "../src/domain/account-pages.js";

test("on an https APP_URL the cookies are Secure and __Host- prefixed; on http neither", (t) => {
  const https = cookieNames("https://app.example.com");
  t.is(https.session, "__Host-cms_session");
  const set = cookieHeader(https, https.session, "cms_ws_x", 60);
  t.is(set, "__Host-cms_session=cms_ws_x; Max-Age=60; Path=/; HttpOnly; Secure; SameSite=Lax");
  const http = cookieNames("http://127.0.0.1:8080");
  t.is(cookieHeader(http, http.session, "v", 0), "cms_session=v; Max-Age=0; Path=/; HttpOnly; SameSite=Lax");
});

test("a CSRF token fits only its own binding", (t) => {
  const a = csrfToken("secret", { session: "s1" });
  t.true(csrfValid("secret", { session: "s1" }, a));
  t.false(csrfValid("secret", { session: "s2" }, a));
  t.false(csrfValid("other secret", { session: "s1" }, a));
  t.false(csrfValid("secret", { presession: "s1" }, a), "a signed-out form's token is not a signed-in one's");
  t.false(csrfValid("secret", { session: "s1" }, undefined));
  t.false(csrfValid("secret", { session: "s1" }, `${a}x`));
});

test("return paths stay on this origin", (t) => {
  t.is(localPath("/?oauth=1&client_id=x"), "/?oauth=1&client_id=x");
  for (const bad of ["//evil.example", "/\\evil.example", "https://evil.example/", "javascript:alert(1)", "", null, "/\nx"]) t.is(localPath(bad), "/");
});

test("the pages escape what they show", (t) => {
  const html = renderSignIn({ assetVersion: "v", action: "/signin", csrf: "c", returnTo: "/?a=1&b=\"2\"", clientName: "<img src=x onerror=alert(1)>", username: "\"><script>" });
  t.false(html.includes("<img src=x"));
  t.false(html.includes("<script>"));
  t.true(html.includes("&lt;img src=x onerror=alert(1)&gt;"));
  t.true(html.includes('value="/?a=1&amp;b=&quot;2&quot;"'));
  const consent = renderConsent({ assetVersion: "v", username: "u", clientName: "Evil <b>", redirectUri: "http://127.0.0.1/cb?x=<y>", scopes: ["collections:read", "made:up"], action: "/?oauth=1", signOutAction: "/signout", returnTo: "/?oauth=1", csrf: "c" });
  t.true(consent.includes("Evil &lt;b&gt;"));
  t.true(consent.includes("See your collections, private ones included"));
  t.true(consent.includes("made:up"), "a scope without words is shown as it is");
  t.false(consent.includes("<y>"));
});
