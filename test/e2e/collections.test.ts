/** collections.* through the JSON endpoint: creation, names, nesting, listing, export, covers, events. */
import test from "ava";
import { runJobNow, startTestSystem, storedAfterCleanup, type TestSystem, type TestUser } from "../helpers/system.js";
import { startImageServer, type ImageServer } from "../helpers/image-server.js";
import type { BusEvent } from "@cms/platform";

let sys: TestSystem;
let img: ImageServer;
let alice: TestUser;
const events: BusEvent[] = [];

test.before(async () => {
  img = await startImageServer();
  sys = await startTestSystem({ OUTBOUND_ALLOWED_HOSTS: img.host });
  alice = await sys.user({ plan: "paid" });
  await sys.system.subscribe(`test-${process.pid}`, "collection.updated", async (e) => { events.push(e); });
});
test.after.always(async () => { await sys?.stop(); await img?.close(); });

async function create(u: TestUser, fields: Record<string, unknown>) {
  return (await sys.must(u.token, { op: "collections.create", ...fields })).collection;
}

test("create returns the collection with defaults; tags are lowercased and deduplicated", async (t) => {
  const res = await sys.call(alice.token, { op: "collections.create", name: "Create defaults", tags: ["Travel", "travel", " Food "] });
  t.is(res.status, 200);
  const c = res.body.collection;
  t.true(Number.isInteger(c.id) && c.id >= 1);
  t.is(c.share_access_level, "private");
  t.false(c.searchable);
  t.false(c.is_published);
  t.false(c.is_nsfw);
  t.false(c.is_subcollection);
  t.deepEqual(c.tags, ["travel", "food"]);
  t.is(c.description, null);
  t.is(c.user_id, alice.userId);
});

test("searchable=true on create is 400 on field searchable", async (t) => {
  const res = await sys.call(alice.token, { op: "collections.create", name: "Searchable on create", searchable: true });
  t.is(res.status, 400);
  t.is(res.body.field, "searchable");
});

test("playback_prefs are stored normalized with defaults; unknown keys are 400", async (t) => {
  const c = await create(alice, { name: "Prefs", playback_prefs: { loop: false, kinds: { embed: true } } });
  t.deepEqual(c.playback_prefs, { kinds: { image: true, video: true, audio: true, embed: true, other: false }, loop: false, interval_seconds: 5, shuffle: false });
  const bad = await sys.call(alice.token, { op: "collections.update", collection_id: c.id, playback_prefs: { volume: 3 } });
  t.is(bad.status, 400);
  t.is(bad.body.field, "playback_prefs.volume");
});

test("names are unique per (owner, parent): 409 duplicate_collection_name with field name", async (t) => {
  const a = await create(alice, { name: "Unique A" });
  const dup = await sys.call(alice.token, { op: "collections.create", name: "Unique A" });
  t.is(dup.status, 409);
  t.is(dup.body.error, "duplicate_collection_name");
  t.is(dup.body.field, "name");
  // The same name nested under a parent, and under another parent, is fine.
  const nested = await sys.call(alice.token, { op: "collections.create", name: "Unique A", parent_collection_id: a.id });
  t.is(nested.status, 200);
  const other = await create(alice, { name: "Unique B" });
  t.is((await sys.call(alice.token, { op: "collections.create", name: "Unique A", parent_collection_id: other.id })).status, 200);
  // Twice under the same parent is not.
  t.is((await sys.call(alice.token, { op: "collections.create", name: "Unique A", parent_collection_id: a.id })).status, 409);
  // Another user may use the name.
  const bob = await sys.user();
  t.is((await sys.call(bob.token, { op: "collections.create", name: "Unique A" })).status, 200);
  // A rename onto a sibling's name is refused too.
  const ren = await sys.call(alice.token, { op: "collections.update", collection_id: other.id, name: "Unique A" });
  t.is(ren.status, 409);
  t.is(ren.body.error, "duplicate_collection_name");
  t.regex(ren.body.detail, /at the top level/);
  // Inside a parent, the sentence names the parent.
  const inner = await create(alice, { name: "Unique C", parent_collection_id: a.id });
  const renInner = await sys.call(alice.token, { op: "collections.update", collection_id: inner.id, name: "Unique A" });
  t.is(renInner.status, 409);
  t.regex(renInner.body.detail, new RegExp(`under collection ${a.id}`));
});

test("collections.update by a non-owner is refused before any cover is fetched; cover uploads are capped at what update takes", async (t) => {
  const c = await create(alice, { name: "Not yours" });
  const bob = await sys.user();
  const before = img.hits.length;
  const res = await sys.call(bob.token, { op: "collections.update", collection_id: c.id, thumbnail_url: img.url("/photo.jpg?non-owner") });
  t.is(res.status, 403);
  t.false(img.hits.slice(before).some((h) => h.includes("non-owner")), "nothing was fetched for a non-owner");
  const tooBig = await sys.call(alice.token, { op: "collections.get_upload_url", collection_id: c.id, content_type: "image/jpeg", content_length: 20 * 1024 * 1024 + 1 });
  t.is(tooBig.status, 400);
  t.is(tooBig.body.field, "content_length");
  const fits = await sys.call(alice.token, { op: "collections.get_upload_url", collection_id: c.id, content_type: "image/jpeg", content_length: 20 * 1024 * 1024 });
  t.is(fits.status, 200);
  t.is(fits.body.max_bytes, 20 * 1024 * 1024);
});

test("concurrent creates with one name: exactly one wins, the rest get 409", async (t) => {
  const u = await sys.user();
  const results = await Promise.all(Array.from({ length: 12 }, () => sys.call(u.token, { op: "collections.create", name: "Race" })));
  const statuses = results.map((r) => r.status).sort();
  t.is(statuses.filter((s) => s === 200).length, 1);
  t.is(statuses.filter((s) => s === 409).length, 11);
  const list = await sys.call(u.token, { op: "collections.list" });
  t.is(list.body.collections.filter((c: { name: string }) => c.name === "Race").length, 1);
});

test("a sub-collection needs media:write too, and gets a link row at the end of its parent", async (t) => {
  const limited = await sys.user({ scopes: ["collections:read", "collections:write"] });
  const p = await create(limited, { name: "Parent without media scope" });
  const denied = await sys.call(limited.token, { op: "collections.create", name: "Child", parent_collection_id: p.id });
  t.is(denied.status, 403);
  t.is(denied.body.error, "insufficient_scope");
  t.is(denied.body.need, "media:write");

  const parent = await create(alice, { name: "Links parent" });
  const c1 = await sys.call(alice.token, { op: "collections.create", name: "Child 1", parent_collection_id: parent.id });
  t.is(c1.status, 200);
  t.true(c1.body.collection.is_subcollection);
  t.is(c1.body.collection.parent_collection_id, parent.id);
  t.true(Number.isInteger(c1.body.link_media_id));
  const c2 = await create(alice, { name: "Child 2", parent_collection_id: parent.id });
  const c0 = await create(alice, { name: "Child 0", parent_collection_id: parent.id, link_position: 0, link_description: "first" });
  const exp = await sys.call(alice.token, { op: "collections.export", collection_id: parent.id });
  t.is(exp.status, 200);
  const links = exp.body.media.map((m: any) => [m.linked_collection_id, m.position, m.viewer]);
  t.deepEqual(links, [[c0.id, 0, "collection"], [c1.body.collection.id, 1, "collection"], [c2.id, 2, "collection"]]);
  t.is(exp.body.media[0].description, "first");
});

test("a parent of someone else is refused", async (t) => {
  const bob = await sys.user();
  const bobs = await create(bob, { name: "Bob's parent" });
  const res = await sys.call(alice.token, { op: "collections.create", name: "Intruder", parent_collection_id: bobs.id });
  t.is(res.status, 403);
  t.is(res.body.error, "forbidden");
});

test("collections.list: top level by default, flat with include_subcollections, children with parent_collection_id", async (t) => {
  const u = await sys.user();
  const top = await create(u, { name: "Top", tags: ["keep"] });
  const mid = await create(u, { name: "Mid", parent_collection_id: top.id });
  const deep = await create(u, { name: "Deep", parent_collection_id: mid.id });
  const other = await create(u, { name: "Other top", is_nsfw: true });

  const def = await sys.call(u.token, { op: "collections.list" });
  t.deepEqual(def.body.collections.map((c: any) => c.id).sort(), [top.id, other.id].sort());
  t.deepEqual(def.body.pagination, { limit: 100, offset: 0, total: 2 });

  const flat = await sys.call(u.token, { op: "collections.list", include_subcollections: true });
  t.deepEqual(flat.body.collections.map((c: any) => c.id).sort(), [top.id, mid.id, deep.id, other.id].sort());

  const kids = await sys.call(u.token, { op: "collections.list", parent_collection_id: top.id });
  t.deepEqual(kids.body.collections.map((c: any) => c.id), [mid.id]);

  const both = await sys.call(u.token, { op: "collections.list", parent_collection_id: top.id, include_subcollections: true });
  t.is(both.status, 400);
  t.is(both.body.error, "invalid_request");

  const sel = await sys.call(u.token, { op: "collections.list", fields: "id,name,viewer_permissions" });
  t.deepEqual(Object.keys(sel.body.collections[0]).sort(), ["id", "name", "viewer_permissions"]);
  t.true(sel.body.collections[0].viewer_permissions.is_owner);
  const selArr = await sys.call(u.token, { op: "collections.list", fields: ["id", "is_subcollection"] });
  t.deepEqual(Object.keys(selArr.body.collections[0]).sort(), ["id", "is_subcollection"]);
  t.is((await sys.call(u.token, { op: "collections.list", fields: "id,secret" })).status, 400);

  t.deepEqual((await sys.call(u.token, { op: "collections.list", name_contains: "OTHER" })).body.collections.map((c: any) => c.id), [other.id]);
  t.deepEqual((await sys.call(u.token, { op: "collections.list", tag: "keep" })).body.collections.map((c: any) => c.id), [top.id]);
  t.deepEqual((await sys.call(u.token, { op: "collections.list", is_nsfw: true })).body.collections.map((c: any) => c.id), [other.id]);

  await sys.call(u.token, { op: "collections.archive", collection_id: other.id });
  t.deepEqual((await sys.call(u.token, { op: "collections.list" })).body.collections.map((c: any) => c.id), [top.id]);
  t.is((await sys.call(u.token, { op: "collections.list", include_archived: true })).body.collections.length, 2);

  for (const limit of [0, 501]) t.is((await sys.call(u.token, { op: "collections.list", limit })).status, 400);
  const paged = await sys.call(u.token, { op: "collections.list", include_subcollections: true, limit: 1, offset: 1 });
  t.is(paged.body.collections.length, 1);
  t.deepEqual(paged.body.pagination, { limit: 1, offset: 1, total: 3 });
});

test("collections.get and batch.get: owner only, order of the request, archived on request", async (t) => {
  const a = await create(alice, { name: "Batch 1" });
  const b = await create(alice, { name: "Batch 2" });
  await sys.call(alice.token, { op: "collections.archive", collection_id: b.id });
  const res = await sys.call(alice.token, { op: "collections.batch.get", ids: [b.id, a.id, 999999] });
  t.deepEqual(res.body.collections.map((c: any) => c.id), [a.id]);
  const all = await sys.call(alice.token, { op: "collections.batch.get", ids: [b.id, a.id], include_archived: true });
  t.deepEqual(all.body.collections.map((c: any) => c.id), [b.id, a.id]);
  t.is((await sys.call(alice.token, { op: "collections.batch.get", ids: Array.from({ length: 31 }, (_, i) => i + 1) })).status, 400);

  const got = await sys.call(alice.token, { op: "collections.get", collection_id: a.id });
  t.is(got.status, 200);
  t.is(got.body.collection.name, "Batch 1");
  const bob = await sys.user();
  const theirs = await sys.call(bob.token, { op: "collections.get", collection_id: a.id });
  t.is(theirs.status, 403);
  t.is((await sys.call(alice.token, { op: "collections.get", collection_id: 987654 })).status, 404);
});

test("collections.move: appends the link, noop, cycles, clashes, archived destination, ownership", async (t) => {
  const u = await sys.user();
  const a = await create(u, { name: "A" });
  const b = await create(u, { name: "B" });
  const child = await create(u, { name: "Child", parent_collection_id: a.id });
  const grand = await create(u, { name: "Grand", parent_collection_id: child.id });
  const great = await create(u, { name: "Great", parent_collection_id: grand.id });
  await create(u, { name: "Filler", parent_collection_id: b.id });

  const same = await sys.call(u.token, { op: "collections.move", collection_id: child.id, parent_collection_id: a.id });
  t.is(same.status, 200);
  t.true(same.body.noop);

  const moved = await sys.call(u.token, { op: "collections.move", collection_id: child.id, parent_collection_id: b.id });
  t.is(moved.status, 200);
  t.false(moved.body.noop);
  t.is(moved.body.collection.parent_collection_id, b.id);
  t.is(moved.body.removed_link_media_ids.length, 1);
  const bMedia = (await sys.call(u.token, { op: "collections.export", collection_id: b.id })).body.media;
  t.deepEqual(bMedia.map((m: any) => [m.linked_collection_id, m.position]).at(-1), [child.id, 1]);
  t.is((await sys.call(u.token, { op: "collections.export", collection_id: a.id })).body.media.length, 0);

  for (const dest of [child.id, grand.id, great.id]) {
    const cyc = await sys.call(u.token, { op: "collections.move", collection_id: child.id, parent_collection_id: dest });
    t.is(cyc.status, 409, `move into ${dest}`);
    t.is(cyc.body.error, "cycle_detected");
  }

  // A name clash at the destination, and at the top level on detach.
  await create(u, { name: "Grand", parent_collection_id: a.id });
  const clash = await sys.call(u.token, { op: "collections.move", collection_id: grand.id, parent_collection_id: a.id });
  t.is(clash.status, 409);
  t.is(clash.body.error, "duplicate_collection_name");
  await create(u, { name: "Great" });
  const rootClash = await sys.call(u.token, { op: "collections.move", collection_id: great.id, parent_collection_id: null });
  t.is(rootClash.status, 409);
  t.is(rootClash.body.error, "duplicate_collection_name");
  // The failed move left the link rows where they were.
  t.deepEqual((await sys.call(u.token, { op: "collections.export", collection_id: grand.id })).body.media.map((m: any) => m.linked_collection_id), [great.id]);

  const detached = await sys.call(u.token, { op: "collections.move", collection_id: grand.id });
  t.is(detached.status, 200);
  t.false(detached.body.collection.is_subcollection);
  t.is(detached.body.collection.parent_collection_id, null);

  const arch = await create(u, { name: "Archived dest" });
  await sys.call(u.token, { op: "collections.archive", collection_id: arch.id });
  const toArchived = await sys.call(u.token, { op: "collections.move", collection_id: b.id, parent_collection_id: arch.id });
  t.is(toArchived.status, 400);

  const other = await sys.user();
  const foreign = await create(other, { name: "Foreign" });
  t.is((await sys.call(u.token, { op: "collections.move", collection_id: b.id, parent_collection_id: foreign.id })).status, 403);
  t.is((await sys.call(other.token, { op: "collections.move", collection_id: b.id, parent_collection_id: foreign.id })).status, 403);
  t.is((await sys.call(u.token, { op: "collections.move", collection_id: b.id, parent_collection_id: 99999999 })).status, 404);
});

test("collections.reorder assigns positions in the given order", async (t) => {
  const u = await sys.user();
  const [x, y, z] = [await create(u, { name: "X" }), await create(u, { name: "Y" }), await create(u, { name: "Z" })];
  const res = await sys.call(u.token, { op: "collections.reorder", ordered_ids: [z.id, x.id] });
  t.is(res.status, 200);
  const list = (await sys.call(u.token, { op: "collections.list" })).body.collections;
  t.deepEqual(list.map((c: any) => c.id), [z.id, x.id, y.id]);
  t.deepEqual(list.map((c: any) => c.position), [0, 1, 2]);
  const other = await sys.user();
  const theirs = await create(other, { name: "Theirs" });
  t.is((await sys.call(u.token, { op: "collections.reorder", ordered_ids: [theirs.id] })).status, 400);
});

test("collections.export: JSON and RFC 4180 CSV of media metadata", async (t) => {
  const parent = await create(alice, { name: "Export parent" });
  await create(alice, { name: "Child, \"quoted\"", parent_collection_id: parent.id, link_description: "line1\nline2" });
  const json = await sys.call(alice.token, { op: "collections.export", collection_id: parent.id });
  t.is(json.body.format, "json");
  t.is(json.body.collection.id, parent.id);
  t.is(json.body.media.length, 1);
  const csv = await sys.call(alice.token, { op: "collections.export", collection_id: parent.id, format: "csv" });
  t.is(csv.body.format, "csv");
  const lines = csv.body.content.split("\r\n");
  t.is(lines[0], "id,name,description,viewer,main_url,thumbnail_url,tags,position,is_archived,size_bytes,created_at");
  t.true(csv.body.content.includes("\"line1\nline2\""));
});

test("get_upload_url: byte_upload_url PUT, then update thumbnail_url to the key makes WebP covers", async (t) => {
  const c = await create(alice, { name: "Cover by PUT" });
  const sharp = (await import("sharp")).default;
  const jpeg = await sharp({ create: { width: 900, height: 600, channels: 3, background: "#3366aa" } }).jpeg().toBuffer();
  const res = await sys.call(alice.token, { op: "collections.get_upload_url", collection_id: c.id, content_type: "image/jpeg", content_length: jpeg.length, filename: "my cover.jpg" });
  t.is(res.status, 200);
  t.regex(res.body.store_key, new RegExp(`^store://${alice.userId}/${c.id}/\\d+_my_cover\\.jpg$`));
  t.truthy(res.body.upload_url);
  t.true(res.body.byte_upload_url.startsWith(sys.url));

  const wrongType = await fetch(res.body.byte_upload_url, { method: "PUT", headers: { "content-type": "image/png" }, body: jpeg });
  t.is(wrongType.status, 400);
  const short = await fetch(res.body.byte_upload_url, { method: "PUT", headers: { "content-type": "image/jpeg" }, body: jpeg.subarray(1) });
  t.is(short.status, 400);
  const forged = await fetch(res.body.byte_upload_url.replace(/.$/, (ch: string) => (ch === "A" ? "B" : "A")), { method: "PUT", headers: { "content-type": "image/jpeg" }, body: jpeg });
  t.is(forged.status, 403);
  const put = await fetch(res.body.byte_upload_url, { method: "PUT", headers: { "content-type": "image/jpeg" }, body: jpeg });
  t.is(put.status, 200);
  t.is((await put.json()).size_bytes, jpeg.length);

  // Not an image type: refused at mint time.
  t.is((await sys.call(alice.token, { op: "collections.get_upload_url", collection_id: c.id, content_type: "text/plain", content_length: 3 })).status, 400);

  const upd = await sys.call(alice.token, { op: "collections.update", collection_id: c.id, thumbnail_url: res.body.store_key });
  t.is(upd.status, 200);
  t.regex(upd.body.collection.thumbnail_url, /^store:\/\/.+_cover\.webp$/);
  t.regex(upd.body.collection.cover_thumbnail_url, /^store:\/\/.+_cover_thumb\.webp$/);

  // Another user's key is refused.
  const bob = await sys.user();
  const bc = await create(bob, { name: "Bob cover" });
  const steal = await sys.call(bob.token, { op: "collections.update", collection_id: bc.id, thumbnail_url: res.body.store_key });
  t.is(steal.status, 403);
  // A key never uploaded is refused.
  const never = await sys.call(alice.token, { op: "collections.update", collection_id: c.id, thumbnail_url: `store://${alice.userId}/${c.id}/1_nothing.jpg` });
  t.is(never.status, 400);
});

test("the presigned upload_url accepts a PUT as well", async (t) => {
  const c = await create(alice, { name: "Cover by presigned" });
  const png = Buffer.from("89504e470d0a1a0a", "hex");
  const res = await sys.call(alice.token, { op: "collections.get_upload_url", collection_id: c.id, content_type: "image/png", content_length: png.length });
  const put = await fetch(res.body.upload_url, { method: "PUT", headers: { "content-type": "image/png" }, body: png });
  t.is(put.status, 200);
});

test("an http(s) thumbnail_url is downloaded and processed; private hosts are refused", async (t) => {
  const c = await sys.call(alice.token, { op: "collections.create", name: "Fetched cover", thumbnail_url: img.url("/cover.png") });
  t.is(c.status, 200);
  t.regex(c.body.collection.thumbnail_url, /^store:\/\/.+_cover\.webp$/);
  const blocked = await sys.call(alice.token, { op: "collections.create", name: "Blocked cover", thumbnail_url: "http://127.0.0.2:9/x.png" });
  t.is(blocked.status, 400);
  t.is(blocked.body.field, "thumbnail_url");
  t.is(blocked.body.reason, "blocked_host");
  const meta = await sys.call(alice.token, { op: "collections.create", name: "Metadata cover", thumbnail_url: "http://169.254.169.254/latest/meta-data" });
  t.is(meta.status, 400);
  const redirect = await sys.call(alice.token, { op: "collections.create", name: "Redirect cover", thumbnail_url: img.url("/redirect-to-private") });
  t.is(redirect.status, 400);
  t.is(redirect.body.reason, "blocked_host");
  const notImage = await sys.call(alice.token, { op: "collections.create", name: "Text cover", thumbnail_url: img.url("/not-an-image") });
  t.is(notImage.status, 400);
  // Nothing was created by the failed calls.
  const names = (await sys.call(alice.token, { op: "collections.list", limit: 500 })).body.collections.map((x: any) => x.name);
  t.false(names.includes("Blocked cover"));
  t.false(names.includes("Text cover"));
});

test("every change writes collection.updated through the outbox", async (t) => {
  const c = await create(alice, { name: "Evented" });
  await sys.call(alice.token, { op: "collections.update", collection_id: c.id, name: "Evented renamed" });
  await sys.call(alice.token, { op: "collections.publish", collection_id: c.id, slug: "evented" });
  await sys.call(alice.token, { op: "collections.unpublish", collection_id: c.id });
  await sys.system.drainEvents();
  const deadline = Date.now() + 10_000;
  const kinds = () => events.filter((e) => e.payload.collection_id === c.id).map((e) => e.payload.kind);
  while (kinds().length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.deepEqual(kinds(), ["created", "renamed", "published", "unpublished"]);
  const published = events.find((e) => e.payload.collection_id === c.id && e.payload.kind === "published")!;
  t.true(published.payload.published as boolean);
});

test("idempotency_key: a replay returns the stored response and creates nothing; another body is 409", async (t) => {
  const u = await sys.user();
  const body = { op: "collections.create", name: "Idem", idempotency_key: "key-1" };
  const first = await fetch(`${sys.url}/functions/v1/thirdparty-v1`, { method: "POST", headers: { apikey: "test-apikey", authorization: `Bearer ${u.token}` }, body: JSON.stringify(body) });
  const firstText = await first.text();
  const again = await fetch(`${sys.url}/functions/v1/thirdparty-v1`, { method: "POST", headers: { apikey: "test-apikey", authorization: `Bearer ${u.token}` }, body: JSON.stringify({ idempotency_key: "key-1", name: "Idem", op: "collections.create" }) });
  t.is(again.status, 200);
  t.is(await again.text(), firstText);
  const list = await sys.call(u.token, { op: "collections.list" });
  t.is(list.body.collections.length, 1);
  const other = await sys.call(u.token, { op: "collections.create", name: "Idem 2", idempotency_key: "key-1" });
  t.is(other.status, 409);
  t.is(other.body.error, "idempotency_key_reused");
  // The same key on another op is independent.
  const c = JSON.parse(firstText).collection;
  t.is((await sys.call(u.token, { op: "collections.archive", collection_id: c.id, idempotency_key: "key-1" })).status, 200);
  // idempotency_key is refused on read-only ops (not part of their schema).
  t.is((await sys.call(u.token, { op: "collections.get", collection_id: c.id, idempotency_key: "k" })).status, 400);
});

async function until(cond: () => Promise<boolean>, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return cond();
}

// Serial (before the concurrent tests, whose cover uploads it would take for unclaimed): the job
// runs with a clock a day ahead.
test.serial("a cover upload nothing took up is removed by the retention job a day after its URL expired", async (t) => {
  const c = await create(alice, { name: "Unclaimed cover upload" });
  const png = await (await import("sharp")).default({ create: { width: 300, height: 200, channels: 3, background: "#5599cc" } }).png().toBuffer();
  const upload = async () => {
    const res = await sys.must(alice.token, { op: "collections.get_upload_url", collection_id: c.id, content_type: "image/png", content_length: png.length });
    t.is((await fetch(res.byte_upload_url, { method: "PUT", headers: { "content-type": "image/png" }, body: png })).status, 200);
    return res.store_key as string;
  };
  const [unclaimed, claimed] = [await upload(), await upload()];
  const cover = (await sys.must(alice.token, { op: "collections.update", collection_id: c.id, thumbnail_url: claimed })).collection;
  const early = await runJobNow(sys.system, "retention", {});
  t.is(early.unclaimed_cover_uploads, 0, JSON.stringify(early));
  t.deepEqual(await storedAfterCleanup(sys.system, [unclaimed], 200), [unclaimed], "kept while an update may still take it up");
  const day = await runJobNow(sys.system, "retention", { now: new Date(Date.now() + 25 * 3600_000).toISOString() });
  t.true((day.unclaimed_cover_uploads as number) >= 2, JSON.stringify(day));
  t.deepEqual(await storedAfterCleanup(sys.system, [unclaimed]), []);
  t.truthy(await sys.system.store.head(cover.thumbnail_url), "the cover made from the other stays");
  t.truthy(await sys.system.store.head(cover.cover_thumbnail_url));
});

test("a cover's uploaded source is consumed: removed once the cover is stored, and an update naming it again keeps the cover", async (t) => {
  const sharp = (await import("sharp")).default;
  const jpeg = await sharp({ create: { width: 700, height: 500, channels: 3, background: "#aa6633" } }).jpeg().toBuffer();
  const upload = async (collectionId: number) => {
    const res = await sys.must(alice.token, { op: "collections.get_upload_url", collection_id: collectionId, content_type: "image/jpeg", content_length: jpeg.length });
    t.is((await fetch(res.byte_upload_url, { method: "PUT", headers: { "content-type": "image/jpeg" }, body: jpeg })).status, 200);
    return res.store_key as string;
  };
  const gone = (key: string) => until(async () => (await sys.system.store.head(key)) === undefined);

  const c = await create(alice, { name: "Consumed cover source" });
  const source = await upload(c.id);
  const first = (await sys.must(alice.token, { op: "collections.update", collection_id: c.id, thumbnail_url: source })).collection;
  await sys.system.drainEvents();
  t.true(await gone(source), "the uploaded source is removed once the cover is made");
  const retried = await sys.call(alice.token, { op: "collections.update", collection_id: c.id, thumbnail_url: source, description: "retried" });
  t.is(retried.status, 200, JSON.stringify(retried.body));
  t.like(retried.body.collection, { thumbnail_url: first.thumbnail_url, cover_thumbnail_url: first.cover_thumbnail_url, description: "retried" });
  t.truthy(await sys.system.store.head(first.thumbnail_url));
  const elsewhere = await create(alice, { name: "Another cover" });
  const consumed = await sys.call(alice.token, { op: "collections.update", collection_id: elsewhere.id, thumbnail_url: source });
  t.is(consumed.status, 400);
  t.regex(consumed.body.detail, /already made from it/);

  // collections.create with an uploaded key consumes it too.
  const holder = await create(alice, { name: "Upload holder" });
  const createSource = await upload(holder.id);
  const made = await create(alice, { name: "Created with a cover", thumbnail_url: createSource });
  t.regex(made.thumbnail_url, /_cover\.webp$/);
  await sys.system.drainEvents();
  t.true(await gone(createSource));
});

test("replacing a cover and hard-deleting a collection remove the stored cover objects", async (t) => {
  const c = await create(alice, { name: "Cover lifecycle", thumbnail_url: img.url("/cover.png") });
  const first = [c.thumbnail_url, c.cover_thumbnail_url];
  for (const k of first) t.truthy(await sys.system.store.head(k), k);
  const upd = await sys.call(alice.token, { op: "collections.update", collection_id: c.id, thumbnail_url: img.url("/cover.png") });
  const second = [upd.body.collection.thumbnail_url, upd.body.collection.cover_thumbnail_url];
  t.notDeepEqual(second, first);
  await sys.system.drainEvents();
  t.true(await until(async () => (await Promise.all(first.map((k) => sys.system.store.head(k)))).every((h) => h === undefined)), "old cover removed");
  for (const k of second) t.truthy(await sys.system.store.head(k));
  const del = await sys.call(alice.token, { op: "collections.delete", collection_id: c.id, mode: "hard", confirm: true });
  t.is(del.status, 200);
  await sys.system.drainEvents();
  t.true(await until(async () => (await Promise.all(second.map((k) => sys.system.store.head(k)))).every((h) => h === undefined)), "cover removed after hard delete");
});
