/** profile.get and profile.update through the JSON endpoint. */
import test from "ava";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;
let seq = 0;
const handle = (p = "p") => `${p}${process.pid}y${++seq}`;

test.before(async () => {
  sys = await startTestSystem();
});
test.after.always(async () => { await sys?.stop(); });

test("a fresh profile has defaults", async (t) => {
  const u = await sys.user();
  const res = await sys.call(u.token, { op: "profile.get" });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(res.body, {
    profile: {
      user_id: u.userId,
      username: u.username,
      display_name: null,
      bio: null,
      available_tags: [],
      aliases: [{ id: u.userId, handle: u.username, is_primary: true, is_default: true }],
      default_alias_id: null,
      followers_count: 0,
      following_count: 0,
    },
  });
});

test("profile.get needs a token but no scope", async (t) => {
  t.is((await sys.call(undefined, { op: "profile.get" })).status, 401);
  const u = await sys.user({ scopes: [] });
  t.is((await sys.call(u.token, { op: "profile.get" })).status, 200);
});

test("profile.update changes only the fields given", async (t) => {
  const u = await sys.user();
  const r1 = await sys.call(u.token, { op: "profile.update", display_name: "Alice A.", bio: "Hi there", available_tags: ["cats", "dogs", "cats"] });
  t.is(r1.status, 200, JSON.stringify(r1.body));
  t.like(r1.body.profile, { display_name: "Alice A.", bio: "Hi there", available_tags: ["cats", "dogs"] });
  const r2 = await sys.call(u.token, { op: "profile.update", bio: "Changed" });
  t.like(r2.body.profile, { display_name: "Alice A.", bio: "Changed", available_tags: ["cats", "dogs"] });
  const r3 = await sys.call(u.token, { op: "profile.update", available_tags: [] });
  t.deepEqual(r3.body.profile.available_tags, []);
  t.like((await sys.call(u.token, { op: "profile.get" })).body.profile, { display_name: "Alice A.", bio: "Changed", available_tags: [] });
});

test("profile.update refuses upper-case and too many tags", async (t) => {
  const u = await sys.user();
  const upper = await sys.call(u.token, { op: "profile.update", available_tags: ["Cats"] });
  t.is(upper.status, 400);
  t.is(upper.body.error, "invalid_request");
  t.regex(String(upper.body.field), /available_tags/);
  const many = await sys.call(u.token, { op: "profile.update", available_tags: Array.from({ length: 21 }, (_, i) => `t${i}`) });
  t.is(many.status, 400);
  t.regex(String(many.body.field), /available_tags/);
});

test("profile.update needs profile:write", async (t) => {
  const u = await sys.user({ scopes: ["collections:read"] });
  const res = await sys.call(u.token, { op: "profile.update", bio: "x" });
  t.is(res.status, 403);
  t.is(res.body.need, "profile:write");
});

test("default_alias_id: own alias sets it, null clears it, others are 404", async (t) => {
  const u = await sys.user({ plan: "paid" });
  const other = await sys.user({ plan: "paid" });
  const mine = (await sys.call(u.token, { op: "aliases.create", handle: handle("mine") })).body.alias;
  const theirs = (await sys.call(other.token, { op: "aliases.create", handle: handle("theirs") })).body.alias;

  const set = await sys.call(u.token, { op: "profile.update", default_alias_id: mine.id });
  t.is(set.status, 200, JSON.stringify(set.body));
  t.is(set.body.profile.default_alias_id, mine.id);
  t.deepEqual(set.body.profile.aliases.map((a: any) => [a.id, a.is_default]), [[u.userId, false], [mine.id, true]]);
  const list = await sys.call(u.token, { op: "aliases.list" });
  t.deepEqual(list.body.aliases.map((a: any) => a.is_default), [false, true]);

  for (const id of [theirs.id, "00000000-0000-4000-8000-000000000000"]) {
    const res = await sys.call(u.token, { op: "profile.update", default_alias_id: id });
    t.is(res.status, 404);
    t.is(res.body.error, "not_found");
    t.is(res.body.field, "default_alias_id");
  }
  t.is((await sys.call(u.token, { op: "profile.get" })).body.profile.default_alias_id, mine.id);

  // Another field alone leaves the default alone.
  t.is((await sys.call(u.token, { op: "profile.update", bio: "b" })).body.profile.default_alias_id, mine.id);

  const cleared = await sys.call(u.token, { op: "profile.update", default_alias_id: null });
  t.is(cleared.status, 200);
  t.is(cleared.body.profile.default_alias_id, null);
  t.deepEqual(cleared.body.profile.aliases.map((a: any) => a.is_default), [true, false]);
});

test("followers_count counts follows of any of the user's handles", async (t) => {
  const star = await sys.user({ plan: "paid" });
  const fan1 = await sys.user();
  const fan2 = await sys.user();
  const alias = (await sys.call(star.token, { op: "aliases.create", handle: handle("star") })).body.alias;
  await sys.call(fan1.token, { op: "aliases.follow", alias_id: star.userId });
  await sys.call(fan1.token, { op: "aliases.follow", alias_id: alias.id });
  await sys.call(fan2.token, { op: "aliases.follow", alias_id: alias.id });
  t.like((await sys.call(star.token, { op: "profile.get" })).body.profile, { followers_count: 3, following_count: 0 });
  t.like((await sys.call(fan1.token, { op: "profile.get" })).body.profile, { followers_count: 0, following_count: 2 });
  await sys.call(fan1.token, { op: "aliases.unfollow", alias_id: star.userId });
  t.like((await sys.call(star.token, { op: "profile.get" })).body.profile, { followers_count: 2 });
});
