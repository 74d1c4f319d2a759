/** The JSON op endpoint's common contract: keys, tokens, scopes, validation, errors, limits. */
import test from "ava";
import { startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";

let sys: TestSystem;
let alice: TestUser;

test.before(async () => {
  sys = await startTestSystem();
  alice = await sys.user({ plan: "paid" });
});
test.after.always(async () => { await sys?.stop(); });

test("ping answers 200 for a valid token and API key", async (t) => {
  const res = await sys.call(alice.token, { op: "ping" });
  t.is(res.status, 200);
  t.true(res.body.ok);
  t.is(res.body.user.username, alice.username);
  t.regex(res.headers.get("content-type") ?? "", /application\/json/);
});

test("a missing token gives 401 unauthorized", async (t) => {
  const res = await sys.call(undefined, { op: "ping" });
  t.is(res.status, 401);
  t.is(res.body.error, "unauthorized");
  t.truthy(res.body.detail);
});

test("an unknown token gives 401 unauthorized", async (t) => {
  const res = await sys.call("cms_at_not-a-real-token", { op: "ping" });
  t.is(res.status, 401);
  t.is(res.body.error, "unauthorized");
});

test("a malformed Authorization header gives 401", async (t) => {
  const res = await sys.call(undefined, { op: "ping" }, { headers: { authorization: "Basic abc" } });
  t.is(res.status, 401);
  t.is(res.body.error, "unauthorized");
});

test("a wrong API key gives 401 naming the key as the problem", async (t) => {
  const res = await sys.call(alice.token, { op: "ping" }, { apikey: "wrong" });
  t.is(res.status, 401);
  t.is(res.body.error, "unauthorized");
  t.regex(res.body.detail, /apikey|API key/i);
});

test("a missing API key gives 401 naming the key as the problem", async (t) => {
  const res = await sys.call(alice.token, { op: "ping" }, { apikey: null });
  t.is(res.status, 401);
  t.regex(res.body.detail, /API key/i);
});

test("a token without the op's scope gives 403 insufficient_scope with need", async (t) => {
  const reader = await sys.user({ scopes: ["media:read"] });
  const res = await sys.call(reader.token, { op: "collections.get", collection_id: 1 });
  t.is(res.status, 403);
  t.is(res.body.error, "insufficient_scope");
  t.is(res.body.need, "collections:read");
});

test("an op needing two scopes names every missing one in need", async (t) => {
  const none = await sys.user({ scopes: ["profile:write"] });
  const res = await sys.call(none.token, { op: "ui.state.get" });
  t.is(res.status, 403);
  t.deepEqual(res.body.need, ["collections:read", "media:read"]);
});

test("an unknown field gives 400 invalid_request naming it", async (t) => {
  const res = await sys.call(alice.token, { op: "collections.get", collection_id: 1, colour: "red" });
  t.is(res.status, 400);
  t.is(res.body.error, "invalid_request");
  t.is(res.body.field, "colour");
});

test("a field of the wrong type gives 400 naming it", async (t) => {
  const res = await sys.call(alice.token, { op: "collections.get", collection_id: "12" });
  t.is(res.status, 400);
  t.is(res.body.field, "collection_id");
});

test("an out-of-range value gives 400 naming the field", async (t) => {
  const res = await sys.call(alice.token, { op: "collections.list", limit: 501 });
  t.is(res.status, 400);
  t.is(res.body.field, "limit");
  const low = await sys.call(alice.token, { op: "collections.get", collection_id: 0 });
  t.is(low.status, 400);
  t.is(low.body.field, "collection_id");
});

test("a value outside an enumeration gives 400 naming the field", async (t) => {
  const res = await sys.call(alice.token, { op: "collections.delete", collection_id: 1, mode: "shred" });
  t.is(res.status, 400);
  t.is(res.body.field, "mode");
});

test("a missing required field gives 400 naming it", async (t) => {
  const res = await sys.call(alice.token, { op: "collections.get" });
  t.is(res.status, 400);
  t.is(res.body.field, "collection_id");
});

test("a nested unknown key gives 400 with its path", async (t) => {
  const res = await sys.call(alice.token, { op: "collections.create", name: "x", playback_prefs: { loop: true, speed: 2 } });
  t.is(res.status, 400);
  t.is(res.body.field, "playback_prefs.speed");
});

test("an unknown op gives 400 invalid_request with did_you_mean", async (t) => {
  const res = await sys.call(alice.token, { op: "collections.creat" });
  t.is(res.status, 400);
  t.is(res.body.error, "invalid_request");
  t.is(res.body.field, "op");
  t.is(res.body.did_you_mean, "collections.create");
});

test("a missing op gives 400 on field op", async (t) => {
  const res = await sys.call(alice.token, { name: "x" });
  t.is(res.status, 400);
  t.is(res.body.field, "op");
});

test("a body that is not a JSON object gives 400", async (t) => {
  for (const raw of ["[1,2]", "\"ping\"", "{not json", "null"]) {
    const res = await fetch(`${sys.url}/functions/v1/thirdparty-v1`, {
      method: "POST",
      headers: { apikey: "test-apikey", authorization: `Bearer ${alice.token}`, "content-type": "application/json" },
      body: raw,
    });
    t.is(res.status, 400, raw);
    t.is((await res.json()).error, "invalid_request");
  }
});

test("a body over the size limit gives 413", async (t) => {
  const small = await startTestSystem({ MAX_BODY_BYTES: "2048" });
  t.teardown(() => small.stop());
  const u = await small.user();
  const res = await small.call(u.token, { op: "ping", pad: "x".repeat(5000) });
  t.is(res.status, 413);
  t.is(res.body.error, "payload_too_large");
});

test("GET on the op endpoint gives 405; an unknown path 404", async (t) => {
  const get = await fetch(`${sys.url}/functions/v1/thirdparty-v1`);
  t.is(get.status, 405);
  const nf = await fetch(`${sys.url}/nowhere`);
  t.is(nf.status, 404);
  t.is((await nf.json()).error, "not_found");
});

test("bug.list is for administrators: 403 forbidden for others", async (t) => {
  const res = await sys.call(alice.token, { op: "bug.list" });
  t.is(res.status, 403);
  t.is(res.body.error, "forbidden");
});

test("the per-user rate limit answers 429 rate_limited once exceeded", async (t) => {
  const limited = await startTestSystem({ RATE_LIMIT_PER_MINUTE: "5" });
  t.teardown(() => limited.stop());
  const u = await limited.user();
  const other = await limited.user();
  const statuses: number[] = [];
  for (let i = 0; i < 7; i++) statuses.push((await limited.call(u.token, { op: "ping" })).status);
  t.deepEqual(statuses.slice(0, 5), [200, 200, 200, 200, 200]);
  const last = await limited.call(u.token, { op: "ping" });
  t.is(last.status, 429);
  t.is(last.body.error, "rate_limited");
  t.truthy(last.headers.get("retry-after"));
  // Another user has a budget of their own.
  t.is((await limited.call(other.token, { op: "ping" })).status, 200);
});

test("once the rate limiter has counted a request, every answer carries x-ratelimit-limit and x-ratelimit-remaining, errors and the 429 too", async (t) => {
  const limited = await startTestSystem({ RATE_LIMIT_PER_MINUTE: "3" });
  t.teardown(() => limited.stop());
  const u = await limited.user();
  // Windows are whole clock minutes: start well inside one so that the counts below hold.
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 5_000) await new Promise((r) => setTimeout(r, left + 100));
  const ok = await limited.call(u.token, { op: "ping" });
  t.is(ok.status, 200);
  t.is(ok.headers.get("x-ratelimit-limit"), "3");
  t.is(ok.headers.get("x-ratelimit-remaining"), "2");
  const missing = await limited.call(u.token, { op: "collections.get", collection_id: 987654321 });
  t.is(missing.status, 404, JSON.stringify(missing.body));
  t.is(missing.headers.get("x-ratelimit-limit"), "3");
  t.is(missing.headers.get("x-ratelimit-remaining"), "1");
  const invalid = await limited.call(u.token, { op: "collections.get", collection_id: "x" });
  t.is(invalid.status, 400);
  t.is(invalid.headers.get("x-ratelimit-remaining"), "0");
  const over = await limited.call(u.token, { op: "ping" });
  t.is(over.status, 429);
  t.is(over.headers.get("x-ratelimit-limit"), "3");
  t.is(over.headers.get("x-ratelimit-remaining"), "0");
  t.truthy(over.headers.get("retry-after"));
});

test("a revoked token stops working at once (mcp.revoke_session)", async (t) => {
  const u = await sys.user();
  t.is((await sys.call(u.token, { op: "ping" })).status, 200);
  const res = await sys.call(u.token, { op: "mcp.revoke_session" });
  t.is(res.status, 200);
  t.true(res.body.revoked >= 1);
  const after = await sys.call(u.token, { op: "ping" });
  t.is(after.status, 401);
});

test("an expired token is refused", async (t) => {
  const { AuthService } = await import("@cms/contracts/auth/v1/auth_pb");
  const u = await sys.user();
  const auth = sys.system.clients.get(AuthService);
  const minted = await auth.mintToken({ username: u.username, ttlSeconds: 1 });
  t.is((await sys.call(minted.accessToken, { op: "ping" })).status, 200);
  await new Promise((r) => setTimeout(r, 3500));
  t.is((await sys.call(minted.accessToken, { op: "ping" })).status, 401);
});

test("errors carry the contract shape: error code and detail sentence", async (t) => {
  const res = await sys.call(alice.token, { op: "collections.get", collection_id: "x" });
  t.deepEqual(Object.keys(res.body).slice(0, 2), ["error", "detail"]);
  t.is(typeof res.body.detail, "string");
});
