/** bookmarks.create/delete/list and tags.vocabulary.get through the JSON endpoint. */
import test from "ava";
import { startTestSystem, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;
test.before(async () => { sys = await startTestSystem(); });
test.after.always(async () => { await sys?.stop(); });

test("a bookmark is created with source agent by default, listed newest first and deleted by its owner", async (t) => {
  const u = await sys.user();
  const a = await sys.must(u.token, { op: "bookmarks.create", title: "Trips", collection_ids: "12, 15,12" });
  t.regex(a.bookmark.id, /^[0-9a-f-]{36}$/);
  t.like(a.bookmark, { title: "Trips", collection_ids: "12,15", source: "agent" });
  t.regex(a.bookmark.created_at, /Z$/);
  const b = await sys.must(u.token, { op: "bookmarks.create", title: "Later", collection_ids: "7", source: "web" });
  t.is(b.bookmark.source, "web");
  const list = await sys.must(u.token, { op: "bookmarks.list" });
  t.deepEqual(list.bookmarks.map((x: { title: string }) => x.title), ["Later", "Trips"]);
  t.deepEqual(list.pagination, { limit: 100, offset: 0, total: 2 });
  const page = await sys.must(u.token, { op: "bookmarks.list", limit: 1, offset: 1 });
  t.deepEqual(page.bookmarks.map((x: { title: string }) => x.title), ["Trips"]);
  t.deepEqual(await sys.must(u.token, { op: "bookmarks.delete", bookmark_id: a.bookmark.id }), { deleted: true, bookmark_id: a.bookmark.id });
  t.deepEqual((await sys.must(u.token, { op: "bookmarks.list" })).bookmarks.map((x: { title: string }) => x.title), ["Later"]);
  const again = await sys.call(u.token, { op: "bookmarks.delete", bookmark_id: a.bookmark.id });
  t.is(again.status, 404);
});

test("only the owner sees and deletes a bookmark", async (t) => {
  const owner = await sys.user();
  const other = await sys.user();
  const { bookmark } = await sys.must(owner.token, { op: "bookmarks.create", title: "Mine", collection_ids: "1" });
  t.deepEqual((await sys.must(other.token, { op: "bookmarks.list" })).bookmarks, []);
  const del = await sys.call(other.token, { op: "bookmarks.delete", bookmark_id: bookmark.id });
  t.is(del.status, 404);
  t.is(del.body.error, "not_found");
  t.is((await sys.must(owner.token, { op: "bookmarks.list" })).bookmarks.length, 1);
});

test("bookmark input rules: title 1-500, collection_ids a list of ids, scopes", async (t) => {
  const u = await sys.user();
  const bad = async (body: Record<string, unknown>, field: string) => {
    const res = await sys.call(u.token, { op: "bookmarks.create", ...body });
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.field, field);
  };
  await bad({ title: "", collection_ids: "1" }, "title");
  await bad({ title: "x".repeat(501), collection_ids: "1" }, "title");
  await bad({ title: "   ", collection_ids: "1" }, "title");
  await bad({ title: "ok", collection_ids: "1,abc" }, "collection_ids");
  await bad({ title: "ok", collection_ids: ",," }, "collection_ids");
  await bad({ title: "ok", collection_ids: [1, 2] }, "collection_ids");
  t.is((await sys.call(u.token, { op: "bookmarks.create", title: "x".repeat(500), collection_ids: "1" })).status, 200);
  const reader = await sys.user({ scopes: ["collections:read"] });
  t.is((await sys.call(reader.token, { op: "bookmarks.create", title: "t", collection_ids: "1" })).body.error, "insufficient_scope");
  t.is((await sys.call(reader.token, { op: "bookmarks.list" })).status, 200);
});

test("tags.vocabulary.get: active entries by sort_order, no scope or token needed", async (t) => {
  const anon = await sys.call(undefined, { op: "tags.vocabulary.get" });
  t.is(anon.status, 200, JSON.stringify(anon.body));
  const tags = anon.body.tags as Array<{ slug: string; label: string; category: string; sort_order: number }>;
  t.true(tags.length >= 20);
  t.deepEqual(Object.keys(tags[0]!), ["slug", "label", "category", "sort_order"]);
  t.deepEqual(tags.map((x) => x.sort_order), [...tags.map((x) => x.sort_order)].sort((a, b) => a - b));
  // Retiring an entry hides it.
  const db = sys.system.dbOf("social")!;
  await db("tag_vocabulary").where({ slug: tags[0]!.slug }).update({ active: false });
  t.teardown(() => db("tag_vocabulary").where({ slug: tags[0]!.slug }).update({ active: true }));
  const after = (await sys.call(undefined, { op: "tags.vocabulary.get" })).body.tags as Array<{ slug: string }>;
  t.false(after.some((x) => x.slug === tags[0]!.slug));
  const scopeless = await sys.user({ scopes: [] });
  t.is((await sys.call(scopeless.token, { op: "tags.vocabulary.get" })).status, 200);
});
