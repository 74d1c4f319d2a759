/** aliases.* through the JSON endpoint, and the social service's internal handle RPCs. */
import test from "ava";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import { fromConnectError } from "@cms/platform";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;
let seq = 0;

/** A fresh handle that no other test (or username) uses. */
function handle(prefix = "h"): string {
  return `${prefix}${process.pid}x${++seq}`;
}

test.before(async () => {
  sys = await startTestSystem();
});
test.after.always(async () => { await sys?.stop(); });

test("aliases.create returns the alias", async (t) => {
  const u = await sys.user({ plan: "paid" });
  const h = handle("photo_");
  const res = await sys.call(u.token, { op: "aliases.create", handle: h });
  t.is(res.status, 200, JSON.stringify(res.body));
  const a = res.body.alias;
  t.regex(a.id, /^[0-9a-f-]{36}$/);
  t.is(a.handle, h);
  t.is(a.is_primary, false);
  t.false(Number.isNaN(Date.parse(a.created_at)));
  t.deepEqual(Object.keys(a).sort(), ["created_at", "handle", "id", "is_primary"]);
});

test("a handle used by another alias gives 400 invalid_request naming handle", async (t) => {
  const a = await sys.user({ plan: "paid" });
  const b = await sys.user({ plan: "paid" });
  const h = handle();
  t.is((await sys.call(a.token, { op: "aliases.create", handle: h })).status, 200);
  for (const who of [b, a]) {
    const res = await sys.call(who.token, { op: "aliases.create", handle: h });
    t.is(res.status, 400);
    t.is(res.body.error, "invalid_request");
    t.is(res.body.field, "handle");
    t.regex(res.body.detail, /taken/);
  }
});

test("a handle equal to any user's username gives 400 invalid_request naming handle", async (t) => {
  const a = await sys.user({ plan: "paid" });
  const other = await sys.user();
  for (const name of [other.username, a.username]) {
    const res = await sys.call(a.token, { op: "aliases.create", handle: name });
    t.is(res.status, 400);
    t.is(res.body.error, "invalid_request");
    t.is(res.body.field, "handle");
  }
});

test("the free plan allows one alias", async (t) => {
  const u = await sys.user({ plan: "free" });
  t.is((await sys.call(u.token, { op: "aliases.create", handle: handle() })).status, 200);
  const res = await sys.call(u.token, { op: "aliases.create", handle: handle() });
  t.is(res.status, 409);
  t.is(res.body.error, "alias_limit_reached");
  t.is(res.body.current, 1);
  t.is(res.body.max, 1);
  t.truthy(res.body.detail);
});

test("the paid plan allows five aliases", async (t) => {
  const u = await sys.user({ plan: "paid" });
  for (let i = 0; i < 5; i++) t.is((await sys.call(u.token, { op: "aliases.create", handle: handle() })).status, 200);
  const res = await sys.call(u.token, { op: "aliases.create", handle: handle() });
  t.is(res.status, 409);
  t.is(res.body.error, "alias_limit_reached");
  t.is(res.body.current, 5);
  t.is(res.body.max, 5);
});

test("reserved names give 400 name_reserved with class on a paid plan", async (t) => {
  const u = await sys.user({ plan: "paid" });
  for (const [h, cls] of [["admin", "operational"], ["adm1n", "operational"], ["r00t", "operational"], ["s_y_s_t_e_m", "operational"], ["admin_2", "operational"], ["login", "route"]] as const) {
    const res = await sys.call(u.token, { op: "aliases.create", handle: h });
    t.is(res.status, 400, h);
    t.is(res.body.error, "name_reserved", h);
    t.is(res.body.class, cls, h);
  }
  t.is((await sys.call(u.token, { op: "aliases.list" })).body.aliases.length, 1);
});

test("an invalid handle gives 400 invalid_request on field handle", async (t) => {
  const u = await sys.user({ plan: "paid" });
  for (const h of ["Bad@Handle", "", "x".repeat(64)]) {
    const res = await sys.call(u.token, { op: "aliases.create", handle: h });
    t.is(res.status, 400, h);
    t.is(res.body.error, "invalid_request");
    t.is(res.body.field, "handle");
  }
});

test("aliases.create needs profile:write", async (t) => {
  const u = await sys.user({ scopes: ["collections:read"] });
  const res = await sys.call(u.token, { op: "aliases.create", handle: handle() });
  t.is(res.status, 403);
  t.is(res.body.need, "profile:write");
});

test("aliases.list puts the primary username first, then aliases by creation", async (t) => {
  const u = await sys.user({ plan: "paid" });
  const h1 = handle("first");
  const h2 = handle("second");
  const a1 = (await sys.call(u.token, { op: "aliases.create", handle: h1 })).body.alias;
  const a2 = (await sys.call(u.token, { op: "aliases.create", handle: h2 })).body.alias;
  const res = await sys.call(u.token, { op: "aliases.list" });
  t.is(res.status, 200);
  const list = res.body.aliases;
  t.deepEqual(list.map((a: any) => [a.id, a.handle, a.is_primary, a.is_default]), [
    [u.userId, u.username, true, true],
    [a1.id, h1, false, false],
    [a2.id, h2, false, false],
  ]);
});

test("follow, unfollow and following.list", async (t) => {
  const fan = await sys.user();
  const star = await sys.user({ plan: "paid" });
  const alias = (await sys.call(star.token, { op: "aliases.create", handle: handle("star") })).body.alias;

  const f1 = await sys.call(fan.token, { op: "aliases.follow", alias_id: alias.id });
  t.is(f1.status, 200, JSON.stringify(f1.body));
  t.true(f1.body.followed);
  t.like(f1.body.alias, { id: alias.id, handle: alias.handle, owner_user_id: star.userId, is_primary: false });
  const f2 = await sys.call(fan.token, { op: "aliases.follow", alias_id: star.userId });
  t.is(f2.status, 200);
  t.like(f2.body.alias, { id: star.userId, handle: star.username, owner_user_id: star.userId, is_primary: true });

  // Following again is fine and keeps the original follow time.
  const again = await sys.call(fan.token, { op: "aliases.follow", alias_id: alias.id });
  t.is(again.status, 200);
  t.true(again.body.followed);
  t.is(again.body.alias.followed_at, f1.body.alias.followed_at);

  const all = await sys.call(fan.token, { op: "aliases.following.list" });
  t.is(all.status, 200);
  t.is(all.body.pagination, undefined);
  t.is(all.body.aliases.length, 2);
  t.deepEqual(all.body.aliases.map((a: any) => a.id).sort(), [alias.id, star.userId].sort());
  for (const a of all.body.aliases) {
    t.deepEqual(Object.keys(a).sort(), ["followed_at", "handle", "id", "is_primary", "owner_user_id"]);
  }

  const page = await sys.call(fan.token, { op: "aliases.following.list", limit: 1 });
  t.is(page.status, 200);
  t.deepEqual(page.body.pagination, { limit: 1, offset: 0, total: 2 });
  t.is(page.body.aliases.length, 1);
  const page2 = await sys.call(fan.token, { op: "aliases.following.list", offset: 1 });
  t.deepEqual(page2.body.pagination, { limit: 100, offset: 1, total: 2 });
  t.is(page2.body.aliases.length, 1);
  t.not(page2.body.aliases[0].id, page.body.aliases[0].id);

  const u1 = await sys.call(fan.token, { op: "aliases.unfollow", alias_id: alias.id });
  t.is(u1.status, 200);
  t.deepEqual(u1.body, { unfollowed: true });
  const u2 = await sys.call(fan.token, { op: "aliases.unfollow", alias_id: alias.id });
  t.deepEqual(u2.body, { unfollowed: false });
  const after = await sys.call(fan.token, { op: "aliases.following.list", offset: 0 });
  t.deepEqual(after.body.pagination, { limit: 100, offset: 0, total: 1 });
  t.is(after.body.aliases[0].id, star.userId);
});

test("following.list validates limit", async (t) => {
  const u = await sys.user();
  for (const limit of [0, 501]) {
    const res = await sys.call(u.token, { op: "aliases.following.list", limit });
    t.is(res.status, 400);
    t.is(res.body.field, "limit");
  }
});

test("following an unknown id gives 404 not_found", async (t) => {
  const u = await sys.user();
  const missing = "00000000-0000-4000-8000-000000000000";
  for (const op of ["aliases.follow", "aliases.unfollow"]) {
    const res = await sys.call(u.token, { op, alias_id: missing });
    t.is(res.status, 404, op);
    t.is(res.body.error, "not_found");
  }
});

test("following one's own handle gives 400 on field alias_id", async (t) => {
  const u = await sys.user({ plan: "paid" });
  const alias = (await sys.call(u.token, { op: "aliases.create", handle: handle() })).body.alias;
  for (const id of [u.userId, alias.id]) {
    const res = await sys.call(u.token, { op: "aliases.follow", alias_id: id });
    t.is(res.status, 400);
    t.is(res.body.error, "invalid_request");
    t.is(res.body.field, "alias_id");
  }
});

test("follow needs a uuid alias_id", async (t) => {
  const u = await sys.user();
  const res = await sys.call(u.token, { op: "aliases.follow", alias_id: "nope" });
  t.is(res.status, 400);
  t.is(res.body.field, "alias_id");
});

test("internal ResolvePublishHandle: username, default and alias modes", async (t) => {
  const social = sys.system.clients.get(SocialService);
  const u = await sys.user({ plan: "paid" });
  const other = await sys.user({ plan: "paid" });
  const alias = (await sys.call(u.token, { op: "aliases.create", handle: handle("pub") })).body.alias;
  const foreign = (await sys.call(other.token, { op: "aliases.create", handle: handle("foreign") })).body.alias;

  t.like(await social.resolvePublishHandle({ userId: u.userId, mode: "username" }), { handle: u.username, aliasId: "" });
  t.like(await social.resolvePublishHandle({ userId: u.userId, mode: "default" }), { handle: u.username, aliasId: "" });
  t.like(await social.resolvePublishHandle({ userId: u.userId, mode: "alias", aliasId: alias.id }), { handle: alias.handle, aliasId: alias.id });

  t.is((await sys.call(u.token, { op: "profile.update", default_alias_id: alias.id })).status, 200);
  t.like(await social.resolvePublishHandle({ userId: u.userId, mode: "default" }), { handle: alias.handle, aliasId: alias.id });
  t.like(await social.resolvePublishHandle({ userId: u.userId, mode: "username" }), { handle: u.username, aliasId: "" });

  const forbidden = await t.throwsAsync(social.resolvePublishHandle({ userId: u.userId, mode: "alias", aliasId: foreign.id }));
  t.is(fromConnectError(forbidden).code, "forbidden");
  const missing = await t.throwsAsync(social.resolvePublishHandle({ userId: u.userId, mode: "alias", aliasId: "00000000-0000-4000-8000-000000000000" }));
  t.is(fromConnectError(missing).code, "not_found");
  const bad = await t.throwsAsync(social.resolvePublishHandle({ userId: u.userId, mode: "sideways" }));
  t.is(fromConnectError(bad).code, "invalid_request");
});

test("internal ResolveHandle: username, alias and unknown", async (t) => {
  const social = sys.system.clients.get(SocialService);
  const u = await sys.user({ plan: "paid" });
  const alias = (await sys.call(u.token, { op: "aliases.create", handle: handle("res") })).body.alias;
  t.like(await social.resolveHandle({ handle: u.username }), { found: true, userId: u.userId, aliasId: "" });
  t.like(await social.resolveHandle({ handle: alias.handle }), { found: true, userId: u.userId, aliasId: alias.id });
  t.like(await social.resolveHandle({ handle: handle("nobody") }), { found: false, userId: "", aliasId: "" });
});

test("internal ListFollowedHandles lists aliases and primary handles", async (t) => {
  const social = sys.system.clients.get(SocialService);
  const fan = await sys.user();
  const star = await sys.user({ plan: "paid" });
  const alias = (await sys.call(star.token, { op: "aliases.create", handle: handle("lf") })).body.alias;
  t.deepEqual((await social.listFollowedHandles({ userId: fan.userId })).handles, []);
  await sys.call(fan.token, { op: "aliases.follow", alias_id: alias.id });
  await sys.call(fan.token, { op: "aliases.follow", alias_id: star.userId });
  const res = await social.listFollowedHandles({ userId: fan.userId });
  const got = res.handles.map((h) => ({ aliasId: h.aliasId, ownerUserId: h.ownerUserId, isPrimary: h.isPrimary, handle: h.handle }));
  t.deepEqual(got.sort((a, b) => Number(a.isPrimary) - Number(b.isPrimary)), [
    { aliasId: alias.id, ownerUserId: star.userId, isPrimary: false, handle: alias.handle },
    { aliasId: star.userId, ownerUserId: star.userId, isPrimary: true, handle: star.username },
  ]);
});
