/** Publishing rules, handles, slugs, public reads, likes and stats. */
import test from "ava";
import { startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";

let sys: TestSystem;

test.before(async () => { sys = await startTestSystem(); });
test.after.always(async () => { await sys?.stop(); });

async function create(u: TestUser, fields: Record<string, unknown>) {
  return (await sys.must(u.token, { op: "collections.create", ...fields })).collection;
}
const publish = (u: TestUser, fields: Record<string, unknown>) => sys.call(u.token, { op: "collections.publish", ...fields });

test("rule 2: a never-configured level becomes public on publish, flagged share_access_level_defaulted", async (t) => {
  const u = await sys.user();
  const c = await create(u, { name: "Never configured" });
  const res = await publish(u, { collection_id: c.id, slug: "Never Configured!" });
  t.is(res.status, 200);
  t.is(res.body.collection.share_access_level, "public");
  t.true(res.body.share_access_level_defaulted);
  t.true(res.body.collection.is_published);
  t.is(res.body.collection.share_slug, "never-configured");
  t.is(res.body.collection.share_url, `${sys.url}/${u.username}/never-configured`);
  t.is(res.body.collection.created_with_username, null);
});

test("rules 1 and 4: an explicit level (create or update) is left unchanged, private and restricted included", async (t) => {
  const u = await sys.user();
  const onCreate = await create(u, { name: "Explicit private", share_access_level: "private" });
  const r1 = await publish(u, { collection_id: onCreate.id, slug: "explicit-private" });
  t.is(r1.body.collection.share_access_level, "private");
  t.false(r1.body.share_access_level_defaulted);

  const viaUpdate = await create(u, { name: "Restricted by update" });
  await sys.call(u.token, { op: "collections.update", collection_id: viaUpdate.id, share_access_level: "restricted" });
  const r2 = await publish(u, { collection_id: viaUpdate.id, slug: "restricted" });
  t.is(r2.body.collection.share_access_level, "restricted");
  t.false(r2.body.share_access_level_defaulted);
});

test("rule 2: a passed level is always honoured; a previous publish counts as configured", async (t) => {
  const u = await sys.user();
  const c = await create(u, { name: "Passed level" });
  const r = await publish(u, { collection_id: c.id, slug: "passed", share_access_level: "registered" });
  t.is(r.body.collection.share_access_level, "registered");
  t.false(r.body.share_access_level_defaulted);
  const d = await create(u, { name: "Published before" });
  await publish(u, { collection_id: d.id, slug: "before" });
  await sys.call(u.token, { op: "collections.unpublish", collection_id: d.id, share_access_level: "private" });
  const again = await publish(u, { collection_id: d.id, slug: "before" });
  t.is(again.body.collection.share_access_level, "private");
  t.false(again.body.share_access_level_defaulted);
});

test("rule 3: unpublish leaves the level unchanged unless passed, and turns searchable off", async (t) => {
  const u = await sys.user();
  const c = await create(u, { name: "Unpublish" });
  const p = await publish(u, { collection_id: c.id, slug: "unpublish", searchable: true });
  t.true(p.body.collection.searchable);
  const un = await sys.call(u.token, { op: "collections.unpublish", collection_id: c.id });
  t.is(un.status, 200);
  t.false(un.body.collection.is_published);
  t.false(un.body.collection.searchable);
  t.is(un.body.collection.share_access_level, "public");
  // Republishing does not restore searchable.
  const re = await publish(u, { collection_id: c.id, slug: "unpublish" });
  t.false(re.body.collection.searchable);
  const un2 = await sys.call(u.token, { op: "collections.unpublish", collection_id: c.id, share_access_level: "restricted" });
  t.is(un2.body.collection.share_access_level, "restricted");
});

test("searchable needs published + public: 400 on field searchable otherwise; a downgrade turns it off", async (t) => {
  const u = await sys.user();
  const c = await create(u, { name: "Searchable rules" });
  const unpublished = await sys.call(u.token, { op: "collections.update", collection_id: c.id, searchable: true });
  t.is(unpublished.status, 400);
  t.is(unpublished.body.field, "searchable");
  const priv = await create(u, { name: "Private searchable", share_access_level: "private" });
  const r = await publish(u, { collection_id: priv.id, slug: "private-searchable", searchable: true });
  t.is(r.status, 400);
  t.is(r.body.field, "searchable");
  t.false((await sys.call(u.token, { op: "collections.get", collection_id: priv.id })).body.collection.is_published);

  await publish(u, { collection_id: c.id, slug: "searchable-rules" });
  const on = await sys.call(u.token, { op: "collections.update", collection_id: c.id, searchable: true });
  t.is(on.status, 200);
  t.true(on.body.collection.searchable);
  const down = await sys.call(u.token, { op: "collections.update", collection_id: c.id, share_access_level: "registered" });
  t.false(down.body.collection.searchable);
});

test("slug_taken: a slug stays reserved on the account, even by a deleted collection", async (t) => {
  const u = await sys.user();
  const a = await create(u, { name: "Slug A" });
  const b = await create(u, { name: "Slug B" });
  await publish(u, { collection_id: a.id, slug: "shared-slug" });
  const taken = await publish(u, { collection_id: b.id, slug: "Shared Slug" });
  t.is(taken.status, 409);
  t.is(taken.body.error, "slug_taken");
  t.is(taken.body.field, "slug");
  t.is(taken.body.slug, "shared-slug");
  await sys.call(u.token, { op: "collections.delete", collection_id: a.id });
  t.is((await publish(u, { collection_id: b.id, slug: "shared-slug" })).status, 409);
  // Another account may use the same slug.
  const other = await sys.user();
  const o = await create(other, { name: "Other slug" });
  t.is((await publish(other, { collection_id: o.id, slug: "shared-slug" })).status, 200);
  // Republishing a collection under its own slug is fine.
  t.is((await publish(u, { collection_id: b.id, slug: "b-slug" })).status, 200);
  t.is((await publish(u, { collection_id: b.id, slug: "b-slug" })).status, 200);
});

test("handles: alias on publish, locked while published, default alias, null forces the username", async (t) => {
  const u = await sys.user({ plan: "paid" });
  const a1 = (await sys.call(u.token, { op: "aliases.create", handle: `${u.username}-art` })).body.alias;
  const a2 = (await sys.call(u.token, { op: "aliases.create", handle: `${u.username}-pix` })).body.alias;
  t.truthy(a1?.id);
  const c = await create(u, { name: "Handle" });
  const p = await publish(u, { collection_id: c.id, slug: "handle", alias_id: a1.id });
  t.is(p.status, 200);
  t.is(p.body.collection.created_with_username, a1.handle);
  t.is(p.body.collection.share_url, `${sys.url}/${a1.handle}/handle`);

  const locked = await publish(u, { collection_id: c.id, slug: "handle", alias_id: a2.id });
  t.is(locked.status, 409);
  t.is(locked.body.error, "publish_handle_locked");
  t.is(locked.body.current_handle, a1.handle);
  t.is(locked.body.requested_handle, a2.handle);
  t.is(locked.body.field, "alias_id");
  const lockedUpdate = await sys.call(u.token, { op: "collections.update", collection_id: c.id, alias_id: null });
  t.is(lockedUpdate.status, 409);
  t.is(lockedUpdate.body.error, "publish_handle_locked");

  // Omitted alias_id keeps the stored handle on a republish.
  const keep = await publish(u, { collection_id: c.id, slug: "handle" });
  t.is(keep.body.collection.created_with_username, a1.handle);

  // Unpublish, then null forces the username.
  await sys.call(u.token, { op: "collections.unpublish", collection_id: c.id });
  const byName = await publish(u, { collection_id: c.id, slug: "handle", alias_id: null });
  t.is(byName.body.collection.created_with_username, null);
  t.is(byName.body.collection.publish_handle, u.username);

  // With none stored, the account's default alias is used.
  await sys.call(u.token, { op: "profile.update", default_alias_id: a2.id });
  const d = await create(u, { name: "Default alias" });
  const pd = await publish(u, { collection_id: d.id, slug: "default-alias" });
  t.is(pd.body.collection.created_with_username, a2.handle);

  // Someone else's alias is refused.
  const other = await sys.user();
  const oc = await create(other, { name: "Not mine" });
  t.not((await publish(other, { collection_id: oc.id, slug: "x", alias_id: a1.id })).status, 200);
});

test("open_fullscreen is kept on a republish when omitted", async (t) => {
  const u = await sys.user();
  const c = await create(u, { name: "Fullscreen" });
  const p = await publish(u, { collection_id: c.id, slug: "fs", open_fullscreen: true });
  t.true(p.body.collection.open_fullscreen);
  const again = await publish(u, { collection_id: c.id, slug: "fs" });
  t.true(again.body.collection.open_fullscreen);
  const off = await publish(u, { collection_id: c.id, slug: "fs", open_fullscreen: false });
  t.false(off.body.collection.open_fullscreen);
});

test("get_by_slug, share_url, views and likes", async (t) => {
  const owner = await sys.user();
  const reader = await sys.user();
  const c = await create(owner, { name: "Public read" });
  t.is((await sys.call(owner.token, { op: "collections.share_url", collection_id: c.id })).status, 400);
  await publish(owner, { collection_id: c.id, slug: "public-read" });
  const share = await sys.call(owner.token, { op: "collections.share_url", collection_id: c.id });
  t.is(share.body.url, `${sys.url}/${owner.username}/public-read`);

  const read = await sys.call(reader.token, { op: "collections.get_by_slug", handle: owner.username, slug: "public-read" });
  t.is(read.status, 200);
  t.is(read.body.collection.id, c.id);
  await sys.call(reader.token, { op: "collections.get_by_slug", handle: `${owner.username}`, slug: "public-read" });
  await sys.call(owner.token, { op: "collections.get_by_slug", handle: owner.username, slug: "public-read" });
  const stats = await sys.call(owner.token, { op: "collections.stats.get", collection_id: c.id });
  t.deepEqual(stats.body.stats, { likes: 0, views: 2 });

  t.is((await sys.call(reader.token, { op: "collections.get_by_slug", handle: owner.username, slug: "nope" })).status, 404);
  // The slug is looked up as publish stored it: "Public Read!" was published as public-read.
  const spelled = await sys.call(owner.token, { op: "collections.get_by_slug", handle: owner.username, slug: "Public Read!" });
  t.is(spelled.status, 200);
  t.is(spelled.body.collection.id, c.id);
  const priv = await create(owner, { name: "Private read", share_access_level: "private" });
  await publish(owner, { collection_id: priv.id, slug: "private-read" });
  t.is((await sys.call(reader.token, { op: "collections.get_by_slug", handle: owner.username, slug: "private-read" })).status, 404);
  t.is((await sys.call(owner.token, { op: "collections.get_by_slug", handle: owner.username, slug: "private-read" })).status, 200);

  const like = await sys.call(reader.token, { op: "collections.like", collection_id: c.id });
  t.is(like.status, 200);
  t.is(like.body.stats.likes, 1);
  await sys.call(reader.token, { op: "collections.like", collection_id: c.id });
  t.is((await sys.call(owner.token, { op: "collections.stats.get", collection_id: c.id })).body.stats.likes, 1);
  const liked = await sys.call(reader.token, { op: "collections.liked.list" });
  t.deepEqual(liked.body.collections.map((x: any) => x.id), [c.id]);
  t.is(liked.body.pagination.total, 1);
  const privLike = await sys.call(owner.token, { op: "collections.like", collection_id: priv.id });
  t.is(privLike.status, 400);
  t.is((await sys.call(reader.token, { op: "collections.like", collection_id: priv.id })).status, 404);
  const unlike = await sys.call(reader.token, { op: "collections.unlike", collection_id: c.id });
  t.is(unlike.body.stats.likes, 0);
  t.is((await sys.call(reader.token, { op: "collections.liked.list" })).body.collections.length, 0);
});
