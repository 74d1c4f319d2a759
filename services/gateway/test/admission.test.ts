/**
 * The admission chain shared by the op endpoint and the media proxy, without a database: fakes of
 * the API key checker, the token resolver and the rate limiter. Order of refusals, the caller
 * handed on, the rate-limit key and the x-ratelimit-* and retry-after headers.
 */
import test from "ava";
import { AppError, authorizeOperation, type Caller } from "@cms/platform";
import type { ApiKeyChecker, TokenResolver } from "../src/app/access.ts";
import type { RateDecision } from "../src/domain/rate-window.ts";
import { createAdmission, type AdmissionRequest } from "../src/http/admission.ts";
import { mayReadMedia } from "../src/http/download-routes.ts";
import type { RateLimiter } from "../src/store/rate-limit-store.ts";

const KEY = "cms_key_test";
const alice: Caller = { userId: "u-alice", username: "alice", plan: "free", isAdmin: false, scopes: ["collections:read", "media:read"], tokenId: "t1" };
const bob: Caller = { ...alice, userId: "u-bob", username: "bob", scopes: ["collections:read"], tokenId: "t2" };
const MCP = "https://mcp.example.com/mcp";
/** Alice's token bound (RFC 8707) to the MCP endpoint, and one bound to some other resource. */
const aliceAtMcp: Caller = { ...alice, tokenId: "t3", audience: MCP };
const aliceElsewhere: Caller = { ...alice, tokenId: "t4", audience: "https://other.example.com/api" };

/** A request as admission reads it. */
function request(headers: Record<string, string>, remoteAddress = "203.0.113.9"): AdmissionRequest {
  return { headers, socket: { remoteAddress } };
}

/** The fakes and what they saw. */
function setup(opts: { limit?: number; resetMs?: number; resource?: string } = {}) {
  const limit = opts.limit ?? 3;
  const hits: string[] = [];
  const resolved: string[] = [];
  const apiKeys: ApiKeyChecker = { check: async (k) => k === KEY };
  const tokens: TokenResolver = {
    async resolve(token) {
      resolved.push(token);
      return ({ "tok-alice": alice, "tok-bob": bob, "tok-mcp": aliceAtMcp, "tok-other": aliceElsewhere } as Record<string, Caller>)[token];
    },
    forget() {},
  };
  const counts = new Map<string, number>();
  const rateLimiter: RateLimiter = {
    async hit(key): Promise<RateDecision> {
      hits.push(key);
      const n = (counts.get(key) ?? 0) + 1;
      counts.set(key, n);
      return { allowed: n <= limit, limit, remaining: Math.max(0, limit - n), resetMs: opts.resetMs ?? 42_300 };
    },
    stop() {},
  };
  const headers = new Map<string, string>();
  const res = { setHeader: (name: string, value: string) => headers.set(name, value) };
  const resource = opts.resource;
  return { admit: createAdmission({ apiKeys, tokens, rateLimiter, resource: resource ? () => resource : undefined }), res, headers, hits, resolved };
}

const anyone = { authorize: () => {} };
const readOp = { name: "collections.list", scopes: ["collections:read"], anonymous: false, adminOnly: false };
const publicOp = { name: "ping", scopes: [], anonymous: true, adminOnly: false };

async function refusal(t: import("ava").ExecutionContext, p: Promise<unknown>): Promise<AppError> {
  const err = await t.throwsAsync(p, { instanceOf: AppError });
  return err as AppError;
}

test("a missing API key is 401 unauthorized naming the header, before anything else is read", async (t) => {
  const { admit, res, headers, hits, resolved } = setup();
  let targetRead = false;
  const err = await refusal(t, admit(request({ authorization: "Bearer tok-alice" }), res, { target: async () => { targetRead = true; }, authorize: () => {} }));
  t.is(err.code, "unauthorized");
  t.is(err.status, 401);
  t.is(err.detail, "Missing gateway API key: send it in the \"apikey\" header.");
  t.false(targetRead);
  t.deepEqual([resolved, hits, headers.size], [[], [], 0]);
});

test("a wrong API key is 401 unauthorized saying the key is not valid", async (t) => {
  const { admit, res, hits } = setup();
  const err = await refusal(t, admit(request({ apikey: "nope", authorization: "Bearer tok-alice" }), res, anyone));
  t.is(err.code, "unauthorized");
  t.is(err.detail, "The apikey header is not a valid gateway API key.");
  t.deepEqual(hits, []);
});

test("the first of repeated apikey headers is the one checked", async (t) => {
  const { admit, res } = setup();
  const req: AdmissionRequest = { headers: { apikey: [KEY, "nope"] as unknown as string }, socket: {} };
  await t.notThrowsAsync(admit(req, res, anyone));
});

test("the rule's target is read after the API key and before the token, and its refusal comes first", async (t) => {
  const { admit, res, resolved } = setup();
  const err = await refusal(t, admit(request({ apikey: KEY, authorization: "Bearer unknown" }), res, {
    target: async () => { throw new AppError("invalid_request", "The request body is not valid JSON."); },
    authorize: () => {},
  }));
  t.is(err.code, "invalid_request");
  t.deepEqual(resolved, [], "the token was not looked up");
});

test("an Authorization header that is not Bearer is 401 unauthorized", async (t) => {
  const { admit, res } = setup();
  const err = await refusal(t, admit(request({ apikey: KEY, authorization: "Basic dXNlcjpwYXNz" }), res, anyone));
  t.is(err.code, "unauthorized");
  t.is(err.detail, "The Authorization header must be \"Bearer <access token>\".");
});

test("an unknown, expired or revoked token is 401 unauthorized, not counted", async (t) => {
  const { admit, res, hits, headers } = setup();
  const err = await refusal(t, admit(request({ apikey: KEY, authorization: "Bearer unknown" }), res, anyone));
  t.is(err.code, "unauthorized");
  t.is(err.detail, "The access token is invalid, expired or revoked.");
  t.deepEqual(hits, []);
  t.is(headers.size, 0);
});

test("a missing token: the rule decides (an operation that needs a user refuses it)", async (t) => {
  const { admit, res, hits } = setup();
  const err = await refusal(t, admit(request({ apikey: KEY }), res, { target: async () => readOp, authorize: (c, op) => authorizeOperation(op, c) }));
  t.is(err.code, "unauthorized");
  t.is(err.detail, "Missing access token: send \"Authorization: Bearer <access token>\".");
  t.deepEqual(hits, []);
});

test("an anonymous call the rule allows goes on, rate-limited per address", async (t) => {
  const { admit, res, hits, headers } = setup();
  const out = await admit(request({ apikey: KEY }, "198.51.100.7"), res, { target: async () => publicOp, authorize: (c, op) => authorizeOperation(op, c) });
  t.is(out.caller, undefined);
  t.is(out.target, publicOp);
  t.deepEqual(hits, ["ip:198.51.100.7"]);
  t.is(headers.get("x-ratelimit-limit"), "3");
  t.is(headers.get("x-ratelimit-remaining"), "2");
});

test("an admitted user is handed on with the target, rate-limited per user", async (t) => {
  const { admit, res, hits, resolved } = setup();
  const out = await admit(request({ apikey: KEY, authorization: "Bearer tok-alice" }), res, { target: async () => readOp, authorize: (c, op) => authorizeOperation(op, c) });
  t.is(out.caller, alice);
  t.is(out.target, readOp);
  t.deepEqual(resolved, ["tok-alice"]);
  t.deepEqual(hits, ["u:u-alice"]);
});

test("a token without the scope is 403 insufficient_scope naming it, not counted", async (t) => {
  const { admit, res, hits } = setup();
  const op = { ...readOp, name: "media.list", scopes: ["media:read"] };
  const err = await refusal(t, admit(request({ apikey: KEY, authorization: "Bearer tok-bob" }), res, { target: async () => op, authorize: (c, o) => authorizeOperation(o, c) }));
  t.is(err.code, "insufficient_scope");
  t.is(err.status, 403);
  t.deepEqual(err.extra, { need: "media:read" });
  t.deepEqual(hits, []);
});

test("every counted request carries x-ratelimit-limit and -remaining; past the limit 429 with retry-after", async (t) => {
  const { admit, res, headers } = setup({ limit: 2, resetMs: 42_300 });
  const req = request({ apikey: KEY, authorization: "Bearer tok-alice" });
  await admit(req, res, anyone);
  t.is(headers.get("x-ratelimit-remaining"), "1");
  await admit(req, res, anyone);
  t.is(headers.get("x-ratelimit-remaining"), "0");
  t.false(headers.has("retry-after"));
  const err = await refusal(t, admit(req, res, anyone));
  t.is(err.code, "rate_limited");
  t.is(err.status, 429);
  t.is(err.detail, "Rate limit of 2 requests per minute exceeded; retry in 43 s.");
  t.deepEqual(err.extra, { retry_after_seconds: 43 });
  t.is(headers.get("x-ratelimit-limit"), "2");
  t.is(headers.get("x-ratelimit-remaining"), "0");
  t.is(headers.get("retry-after"), "43");
});

test("retry-after is at least one second", async (t) => {
  const { admit, res, headers } = setup({ limit: 0, resetMs: 20 });
  const err = await refusal(t, admit(request({ apikey: KEY, authorization: "Bearer tok-alice" }), res, anyone));
  t.deepEqual(err.extra, { retry_after_seconds: 1 });
  t.is(headers.get("retry-after"), "1");
});

test("the media proxy's rule: a user's token with media:read, the missing token pointing at download links", async (t) => {
  const { admit, res, hits } = setup();
  const missing = await refusal(t, admit(request({ apikey: KEY }), res, { authorize: mayReadMedia }));
  t.is(missing.code, "unauthorized");
  t.regex(missing.detail, /media\.download_url/);
  const scope = await refusal(t, admit(request({ apikey: KEY, authorization: "Bearer tok-bob" }), res, { authorize: mayReadMedia }));
  t.is(scope.code, "insufficient_scope");
  t.is(scope.detail, "The token lacks the scope media:read required to read media files.");
  t.deepEqual(scope.extra, { need: "media:read" });
  t.deepEqual(hits, []);
  const ok = await admit(request({ apikey: KEY, authorization: "Bearer tok-alice" }), res, { authorize: mayReadMedia });
  t.is(ok.caller, alice);
  t.deepEqual(hits, ["u:u-alice"]);
});

test("a bearer-only route (the MCP endpoint) takes no API key: the token alone, then the rate limit", async (t) => {
  const { admit, res, headers, hits } = setup();
  const needsUser = { bearerOnly: true, authorize: (who: Caller | undefined) => { if (!who) throw new AppError("unauthorized", "Missing access token."); } };
  const ok = await admit(request({ authorization: "Bearer tok-alice" }), res, needsUser);
  t.is(ok.caller, alice);
  t.deepEqual(hits, ["u:u-alice"]);
  t.is(headers.get("x-ratelimit-remaining"), "2");
  // A wrong API key does not matter there; a missing or unknown token does.
  t.is((await admit(request({ authorization: "Bearer tok-alice", apikey: "wrong" }), res, needsUser)).caller, alice);
  t.is((await refusal(t, admit(request({}), res, needsUser))).code, "unauthorized");
  t.is((await refusal(t, admit(request({ authorization: "Bearer tok-nobody" }), res, needsUser))).detail, "The access token is invalid, expired or revoked.");
  t.deepEqual(hits, ["u:u-alice", "u:u-alice"], "refused requests are not counted");
  // Elsewhere the key is still required.
  t.is((await refusal(t, admit(request({ authorization: "Bearer tok-alice" }), res, anyone))).code, "unauthorized");
});

test("audience-bound tokens: the MCP endpoint takes its own and unbound ones, the JSON endpoint only unbound ones", async (t) => {
  const { admit, res } = setup({ resource: "https://api.example.com/functions/v1/thirdparty-v1" });
  const mcpRule = { bearerOnly: true, resource: () => MCP, authorize: (who: Caller | undefined) => { if (!who) throw new AppError("unauthorized", "Missing access token."); } };
  t.is((await admit(request({ authorization: "Bearer tok-mcp" }), res, mcpRule)).caller, aliceAtMcp);
  t.is((await admit(request({ authorization: "Bearer tok-alice" }), res, mcpRule)).caller, alice, "CLI tokens have no audience");
  t.regex((await refusal(t, admit(request({ authorization: "Bearer tok-other" }), res, mcpRule))).detail, /bound to https:\/\/other\.example\.com\/api/);
  const json = { apikey: KEY };
  t.is((await refusal(t, admit(request({ ...json, authorization: "Bearer tok-mcp" }), res, anyone))).code, "unauthorized", "a token for the MCP endpoint is refused at the JSON endpoint");
  t.is((await admit(request({ ...json, authorization: "Bearer tok-alice" }), res, anyone)).caller, alice);
});
