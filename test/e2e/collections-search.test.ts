/** collections.search and collections.browse: scopes, matching, ordering, hints. */
import test from "ava";
import { startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";

let sys: TestSystem;
let me: TestUser;
let stranger: TestUser;
const ids: Record<string, number> = {};

async function create(u: TestUser, fields: Record<string, unknown>) {
  return (await sys.must(u.token, { op: "collections.create", ...fields })).collection;
}

test.before(async () => {
  sys = await startTestSystem();
  me = await sys.user();
  stranger = await sys.user();
  ids.ete = (await create(me, { name: "Été à Montréal", description: "Summer photos" })).id;
  ids.tagged = (await create(me, { name: "Misc", tags: ["architecture"] })).id;
  ids.sub = (await create(me, { name: "Montreal nested", parent_collection_id: ids.ete })).id;
  ids.archived = (await create(me, { name: "Montreal archived" })).id;
  await sys.call(me.token, { op: "collections.archive", collection_id: ids.archived });
  // A stranger's collections: one discoverable, one public but not searchable, one private.
  ids.pub = (await create(stranger, { name: "Montreal public guide", tags: ["travel"] })).id;
  await sys.call(stranger.token, { op: "collections.publish", collection_id: ids.pub, slug: "guide", searchable: true });
  ids.unlisted = (await create(stranger, { name: "Montreal unlisted" })).id;
  await sys.call(stranger.token, { op: "collections.publish", collection_id: ids.unlisted, slug: "unlisted" });
  ids.secret = (await create(stranger, { name: "Montreal secret" })).id;
  ids.myPub = (await create(me, { name: "Montreal mine public Zanzibar" })).id;
  await sys.call(me.token, { op: "collections.publish", collection_id: ids.myPub, slug: "mine", searchable: true });
});
test.after.always(async () => { await sys?.stop(); });

const search = (u: TestUser | undefined, fields: Record<string, unknown>) => sys.call(u?.token, { op: "collections.search", ...fields });

test("own search is accent-insensitive, substring, tag and typo tolerant; excludes sub-collections", async (t) => {
  const accent = await search(me, { query: "montreal" });
  const got = accent.body.collections.map((c: any) => c.id);
  t.true(got.includes(ids.ete));
  t.false(got.includes(ids.sub), "sub-collections are excluded");
  t.false(got.includes(ids.archived), "archived are excluded");
  t.false(got.includes(ids.pub), "default scope is own + shared");
  t.true((await search(me, { query: "ETE A MONT" })).body.collections.some((c: any) => c.id === ids.ete));
  t.true((await search(me, { query: "architect" })).body.collections.some((c: any) => c.id === ids.tagged));
  t.true((await search(me, { query: "summer" })).body.collections.some((c: any) => c.id === ids.ete));
  t.true((await search(me, { query: "Montrael" })).body.collections.some((c: any) => c.id === ids.ete), "trigram similarity");
  t.true(accent.body.collections.every((c: any) => c.isOwn === true));
});

test("public scope shows only published + public + searchable collections of others, strictly matched", async (t) => {
  const res = await search(me, { query: "montreal", scope: ["public"] });
  t.is(res.status, 200);
  const got = res.body.collections.map((c: any) => c.id);
  t.deepEqual(got, [ids.pub]);
  t.false(res.body.collections[0].isOwn);
  // Stricter: a typo that own search tolerates finds nothing in public.
  t.is((await search(me, { query: "Montrael", scope: ["public"] })).body.collections.length, 0);
});

test("own hits sort first and every hit carries isOwn", async (t) => {
  const res = await search(me, { query: "montreal", scope: ["own", "public"] });
  const flags = res.body.collections.map((c: any) => c.isOwn);
  t.true(flags.length >= 2);
  t.deepEqual(flags, [...flags].sort((a: boolean, b: boolean) => Number(b) - Number(a)));
  t.true(res.body.collections.some((c: any) => c.id === ids.pub && c.isOwn === false));
});

test("zero results carry also_in_public and a hint", async (t) => {
  const res = await search(stranger, { query: "zanzibar" });
  t.is(res.body.collections.length, 0);
  t.is(res.body.also_in_public, 1);
  t.regex(res.body.hint, /public/);
  const none = await search(me, { query: "zzzqqq" });
  t.is(none.body.also_in_public, 0);
  t.truthy(none.body.hint);
});

test("anonymous callers fall back to public; personal scopes need a token and collections:read", async (t) => {
  const anon = await search(undefined, { query: "montreal" });
  t.is(anon.status, 200);
  t.deepEqual(anon.body.scope, ["public"]);
  t.true(anon.body.collections.every((c: any) => c.isOwn === false));
  t.true(anon.body.collections.some((c: any) => c.id === ids.pub));
  t.is((await search(undefined, { query: "montreal", scope: ["own"] })).status, 401);
  const noRead = await sys.user({ scopes: ["media:read"] });
  const r = await search(noRead, { query: "montreal" });
  t.is(r.status, 403);
  t.is(r.body.need, "collections:read");
  t.is((await search(noRead, { query: "montreal", scope: ["public"] })).status, 200);
});

test("query needs 3 characters and limits are 1 to 50", async (t) => {
  t.is((await search(me, { query: "ab" })).status, 400);
  t.is((await search(me, { query: "abc", limit: 51 })).status, 400);
  t.is((await search(me, { query: "abc", limit: 0 })).status, 400);
  const paged = await search(me, { query: "montreal", scope: ["own", "public"], limit: 1 });
  t.is(paged.body.collections.length, 1);
  t.true(paged.body.pagination.total >= 2);
});

test("liked and following scopes", async (t) => {
  const fan = await sys.user();
  await sys.call(fan.token, { op: "collections.like", collection_id: ids.pub });
  const liked = await search(fan, { query: "montreal", scope: ["liked"] });
  t.deepEqual(liked.body.collections.map((c: any) => c.id), [ids.pub]);
  const following0 = await search(fan, { query: "montreal", scope: ["following"] });
  t.is(following0.body.collections.length, 0);
  await sys.call(fan.token, { op: "aliases.follow", alias_id: stranger.userId });
  const following = await search(fan, { query: "montreal", scope: ["following"] });
  t.deepEqual(following.body.collections.map((c: any) => c.id).sort(), [ids.pub, ids.unlisted].sort());
});

test("browse: public by default, tag OR filter, sort orders, limits, anonymous allowed", async (t) => {
  const viewer = await sys.user();
  const anon = await sys.call(undefined, { op: "collections.browse" });
  t.is(anon.status, 200);
  const got = anon.body.collections.map((c: any) => c.id);
  t.true(got.includes(ids.pub));
  t.true(got.includes(ids.myPub));
  t.false(got.includes(ids.unlisted), "not searchable: not listed");
  t.false(got.includes(ids.secret));
  const tagged = await sys.call(viewer.token, { op: "collections.browse", tags: ["travel", "nothing"] });
  t.deepEqual(tagged.body.collections.map((c: any) => c.id), [ids.pub]);
  await sys.call(viewer.token, { op: "collections.get_by_slug", handle: me.username, slug: "mine" });
  await sys.call(viewer.token, { op: "collections.get_by_slug", handle: me.username, slug: "mine" });
  const byViews = await sys.call(viewer.token, { op: "collections.browse", sort_by: "views" });
  t.is(byViews.body.collections[0].id, ids.myPub);
  await sys.call(viewer.token, { op: "collections.like", collection_id: ids.pub });
  const byLikes = await sys.call(viewer.token, { op: "collections.browse", sort_by: "likes" });
  t.is(byLikes.body.collections[0].id, ids.pub);
  const recent = await sys.call(viewer.token, { op: "collections.browse", sort_by: "recent" });
  t.is(recent.body.collections[0].id, ids.myPub);
  t.is((await sys.call(viewer.token, { op: "collections.browse", limit: 101 })).status, 400);
  const own = await sys.call(me.token, { op: "collections.browse", scope: ["own"] });
  t.true(own.body.collections.every((c: any) => c.isOwn));
  t.is((await sys.call(undefined, { op: "collections.browse", scope: ["own"] })).status, 401);
});

test("a page past the end keeps the true total and says so, for search and browse", async (t) => {
  const all = await search(me, { query: "montreal" });
  const total = all.body.pagination.total as number;
  t.true(total >= 2);
  const past = await search(me, { query: "montreal", offset: total + 5 });
  t.is(past.status, 200);
  t.deepEqual(past.body.collections, []);
  // (Other tests of this file may add matches meanwhile: at least the earlier total.)
  t.true(past.body.pagination.total >= total, JSON.stringify(past.body.pagination));
  t.is(past.body.also_in_public, undefined, "not a zero-result answer");
  t.regex(past.body.hint, /past the/);
  const browse = await sys.call(me.token, { op: "collections.browse", scope: ["public"] });
  const browseTotal = browse.body.pagination.total as number;
  t.true(browseTotal >= 1);
  const browsePast = await sys.call(me.token, { op: "collections.browse", scope: ["public"], offset: browseTotal + 10 });
  t.deepEqual(browsePast.body.collections, []);
  t.true(browsePast.body.pagination.total >= browseTotal, JSON.stringify(browsePast.body.pagination));
});

test("an owner of more collections than the prepared search covers (200) is searched the same way", async (t) => {
  const owner = await sys.user();
  // 250 top-level collections in one statement; every 50th from the 7th is about "quokka".
  const { rows } = await sys.system.dbOf("collections")!.raw(
    `INSERT INTO collections (user_id, name, position)
     SELECT ?, 'Shelf ' || i || CASE WHEN i % 50 = 7 THEN ' quokka' ELSE '' END, i FROM generate_series(0, 249) i RETURNING id, name`,
    [owner.userId],
  );
  const quokkas = (rows as Array<{ id: string; name: string }>).filter((r) => r.name.endsWith("quokka")).map((r) => Number(r.id));
  t.is(quokkas.length, 5);
  const small = await sys.user();
  const mine = (await create(small, { name: "Only quokka" })).id;
  for (const [who, want] of [[owner, quokkas], [small, [mine]]] as const) {
    // Seven times: the first search of a large owner finds it large, the others go straight to
    // its own prepared statement, whose generic plan PostgreSQL takes after five executions.
    for (let i = 0; i < 7; i++) {
      const res = await search(who, { query: "quokka" });
      t.is(res.status, 200);
      t.deepEqual(res.body.collections.map((c: any) => c.id).sort((a: number, b: number) => a - b), [...want].sort((a, b) => a - b));
      t.is(res.body.pagination.total, want.length);
      t.true(res.body.collections.every((c: any) => c.isOwn === true));
    }
    const past = await search(who, { query: "quokka", offset: 10 });
    t.deepEqual(past.body.collections, []);
    t.is(past.body.pagination.total, want.length);
    const none = await search(who, { query: "wombat" });
    t.is(none.body.pagination.total, 0);
    t.regex(none.body.hint, /No collection in scope own\/shared matches "wombat"/);
  }
});
