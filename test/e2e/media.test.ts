/** media.* catalogue operations through the JSON endpoint. */
import test from "ava";
import { randomUUID } from "node:crypto";
import { runJobNow, startTestSystem, storedAfterCleanup, type TestSystem, type TestUser } from "../helpers/system.js";
import { startImageServer, type ImageServer } from "../helpers/image-server.js";

let sys: TestSystem;
let img: ImageServer;
let owner: TestUser;

test.before(async () => {
  img = await startImageServer();
  sys = await startTestSystem({ OUTBOUND_ALLOWED_HOSTS: img.host });
  owner = await sys.user({ plan: "paid" });
});
test.after.always(async () => { await sys?.stop(); await img?.close(); });

async function collection(u: TestUser, name: string) {
  return (await sys.must(u.token, { op: "collections.create", name })).collection.id as number;
}
async function objectBytes(key: string): Promise<Buffer> {
  const obj = await sys.system.store.get(key);
  if (!obj) throw new Error(`${key} is not in the store`);
  const parts: Buffer[] = [];
  for await (const p of obj.body) parts.push(p as Buffer);
  return Buffer.concat(parts);
}
async function note(u: TestUser, collectionId: number, fields: Record<string, unknown> = {}) {
  return (await sys.must(u.token, { op: "media.text_note.add", collection_id: collectionId, ...fields })).media;
}

test("media.create of a web page keeps the external URL and takes the page's preview image as thumbnail", async (t) => {
  const c = await collection(owner, "Links");
  const res = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/page.html"), tags: ["Web", "web"] });
  t.is(res.status, 200, JSON.stringify(res.body));
  const m = res.body.media;
  t.is(m.main_url, img.url("/page.html"));
  t.is(m.viewer, "website");
  t.deepEqual(m.tags, ["web"]);
  t.is(m.name, "A page");
  t.regex(m.thumbnail_url, /^store:\/\/.+_thumb\.webp$/);
  t.regex(m.background_image_url, /^store:\/\/.+_bg\.webp$/);
  const sharp = (await import("sharp")).default;
  const thumb = await sys.system.store.get(m.thumbnail_url);
  const chunks: Buffer[] = [];
  for await (const ch of thumb!.body) chunks.push(ch as Buffer);
  const meta = await sharp(Buffer.concat(chunks)).metadata();
  t.is(meta.format, "webp");
  t.is(meta.width, 200);
  const tw = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/twitter.html") });
  t.regex(tw.body.media.thumbnail_url, /_thumb\.webp$/);
  // A preview image on a private address is not fetched: no thumbnail, item still created.
  const priv = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/private-preview.html") });
  t.is(priv.status, 200);
  t.is(priv.body.media.thumbnail_url, null);
});

test("media.create of a page that never finishes arriving answers once the page's read timeout passes: a link without a preview", async (t) => {
  const c = await collection(owner, "Slow pages");
  // Before, the call waited for the page's end: the socket's idle timeout restarts with every byte.
  const res = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/trickle.html") });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.media.viewer, "website");
  t.is(res.body.media.main_url, img.url("/trickle.html"));
});

test("video-hosting URLs stay website links even with viewer video; tags default to []", async (t) => {
  const c = await collection(owner, "Videos");
  const res = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: "https://www.youtube.com/watch?v=dQw4w9WgXcQ", viewer: "video", name: "Clip", thumbnail_url: "https://i.ytimg.com/vi/x/hq.jpg" });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.media.main_url, "https://www.youtube.com/watch?v=dQw4w9WgXcQ");
  t.is(res.body.media.viewer, "website");
  t.deepEqual(res.body.media.tags, []);
  t.is(res.body.media.thumbnail_url, "https://i.ytimg.com/vi/x/hq.jpg");
  const vimeo = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: "https://vimeo.com/76979871", viewer: "video", thumbnail_url: "https://example.com/t.jpg" });
  t.is(vimeo.body.media.viewer, "website");
});

test("a file URL is downloaded into the store; the viewer comes from the sniffed bytes, not the name", async (t) => {
  const c = await collection(owner, "Downloads");
  const photo = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/photo.jpg") });
  t.is(photo.status, 200, JSON.stringify(photo.body));
  t.regex(photo.body.media.main_url, new RegExp(`^store://${owner.userId}/${c}/\\d+_photo\\.jpg$`));
  t.is(photo.body.media.viewer, "image");
  t.is(photo.body.media.mime_type, "image/jpeg");
  t.true(photo.body.media.size_bytes > 1000);
  t.regex(photo.body.media.thumbnail_url, /_thumb\.webp$/);
  t.truthy(await sys.system.store.head(photo.body.media.main_url));
  const disguised = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/disguised.txt") });
  t.is(disguised.body.media.viewer, "image");
  t.is(disguised.body.media.mime_type, "image/jpeg");
  const text = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/notes.txt") });
  t.is(text.body.media.viewer, "text");
  t.is(text.body.media.thumbnail_url, null);
});

test("server-side fetches refuse private, loopback, link-local and metadata addresses in any encoding", async (t) => {
  const c = await collection(owner, "SSRF");
  for (const url of [
    "http://127.0.0.1:1/x", "http://2130706433/x", "http://0x7f.0.0.1/x", "http://[::1]/x", "http://[::ffff:127.0.0.1]/x",
    "http://169.254.169.254/latest/meta-data/", "http://10.0.0.5/x", "http://192.168.1.1/x", "http://[fd00::1]/x", "http://localhost:9/x",
  ]) {
    const res = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: url });
    t.is(res.status, 400, url);
    t.is(res.body.field, "source_url", url);
  }
  const redirect = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/redirect-to-private") });
  t.is(redirect.status, 400);
  t.is(redirect.body.reason, "blocked_host");
  const list = await sys.call(owner.token, { op: "media.list", collection_id: c });
  t.is(list.body.media.length, 0);
});

test("reserved __names__ are refused on create and update", async (t) => {
  const c = await collection(owner, "Reserved");
  const res = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: "https://vimeo.com/1", name: "__cover__" });
  t.is(res.status, 400);
  t.is(res.body.field, "name");
  const n = await note(owner, c, { name: "ok" });
  const upd = await sys.call(owner.token, { op: "media.update", media_id: n.id, name: "__x__" });
  t.is(upd.status, 400);
  t.is(upd.body.field, "name");
});

test("20 parallel creates get 20 distinct dense positions", async (t) => {
  const c = await collection(owner, "Parallel");
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => sys.call(owner.token, { op: "media.text_note.add", collection_id: c, name: `n${i}`, text: "x" })));
  t.true(results.every((r) => r.status === 200));
  const positions = results.map((r) => r.body.media.position).sort((a, b) => a - b);
  t.deepEqual(positions, Array.from({ length: 20 }, (_, i) => i));
});

test("media.get, describe, update and replace", async (t) => {
  const c = await collection(owner, "Get update");
  const created = (await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/photo.jpg"), name: "Photo", description: "d" })).body.media;
  const got = await sys.call(owner.token, { op: "media.get", media_id: created.id });
  t.is(got.body.media.name, "Photo");
  const desc = await sys.call(owner.token, { op: "media.describe", media_id: created.id });
  t.is(desc.body.kind, "stored_file");
  t.is(desc.body.inferred_viewer, "image");
  t.true(desc.body.proxy_urls.main_url.startsWith(sys.url));
  const upd = await sys.call(owner.token, { op: "media.update", media_id: created.id, name: "Renamed", description: null, tags: ["A"] });
  t.is(upd.body.media.name, "Renamed");
  t.is(upd.body.media.description, null);
  t.deepEqual(upd.body.media.tags, ["a"]);
  const unchanged = await sys.call(owner.token, { op: "media.update", media_id: created.id, name: "Again" });
  t.deepEqual(unchanged.body.media.tags, ["a"]);
  const rep = await sys.call(owner.token, { op: "media.replace", media_id: created.id, source_url: img.url("/page.html") });
  t.is(rep.status, 200);
  t.is(rep.body.media.viewer, "website");
  t.is(rep.body.media.id, created.id);
  await sys.system.drainEvents();
  // The replaced file is removed from the store.
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && (await sys.system.store.head(created.main_url))) await new Promise((r) => setTimeout(r, 50));
  t.is(await sys.system.store.head(created.main_url), undefined);
  t.is((await sys.call(owner.token, { op: "media.get", media_id: 99999999 })).status, 404);
  const stranger = await sys.user();
  t.is((await sys.call(stranger.token, { op: "media.get", media_id: created.id })).status, 403);
});

test("media.list: filters, pagination and the zero-result hints", async (t) => {
  const c = await collection(owner, "List hints");
  const empty = await sys.call(owner.token, { op: "media.list", collection_id: c });
  t.is(empty.body.media.length, 0);
  t.regex(empty.body.hint, /empty/);
  const a = await note(owner, c, { name: "alpha note" });
  const b = await note(owner, c, { name: "beta", display_mode: "markdown" });
  await sys.call(owner.token, { op: "media.update", media_id: b.id, tags: ["keep"] });
  const page = await sys.call(owner.token, { op: "media.list", collection_id: c, limit: 1, offset: 1 });
  t.deepEqual(page.body.media.map((m: any) => m.id), [b.id]);
  t.deepEqual(page.body.pagination, { limit: 1, offset: 1, total: 2 });
  t.deepEqual((await sys.call(owner.token, { op: "media.list", collection_id: c, tag: "keep" })).body.media.map((m: any) => m.id), [b.id]);
  t.deepEqual((await sys.call(owner.token, { op: "media.list", collection_id: c, viewer: "markdown" })).body.media.map((m: any) => m.id), [b.id]);
  t.deepEqual((await sys.call(owner.token, { op: "media.list", collection_id: c, name_contains: "ALPHA" })).body.media.map((m: any) => m.id), [a.id]);
  const filtered = await sys.call(owner.token, { op: "media.list", collection_id: c, tag: "nothing" });
  t.is(filtered.body.also_without_filters, 2);
  t.truthy(filtered.body.hint);
  const past = await sys.call(owner.token, { op: "media.list", collection_id: c, offset: 10 });
  t.regex(past.body.hint, /past the end/);
  await sys.call(owner.token, { op: "media.archive", media_id: a.id });
  await sys.call(owner.token, { op: "media.archive", media_id: b.id });
  const archived = await sys.call(owner.token, { op: "media.list", collection_id: c });
  t.is(archived.body.also_archived, 2);
  t.is((await sys.call(owner.token, { op: "media.list", collection_id: c, include_archived: true })).body.media.length, 2);
  t.is((await sys.call(owner.token, { op: "media.list", collection_id: c, limit: 501 })).status, 400);
});

test("media.batch.list across owned collections", async (t) => {
  const c1 = await collection(owner, "Batch A");
  const c2 = await collection(owner, "Batch B");
  const n1 = await note(owner, c1, { name: "one" });
  const n2 = await note(owner, c2, { name: "two" });
  const res = await sys.call(owner.token, { op: "media.batch.list", collection_ids: [c2, c1] });
  t.deepEqual(res.body.media.map((m: any) => m.id), [n2.id, n1.id]);
  t.is((await sys.call(owner.token, { op: "media.batch.list", collection_ids: Array.from({ length: 31 }, (_, i) => i + 1) })).status, 400);
  const other = await sys.user();
  t.is((await sys.call(other.token, { op: "media.batch.list", collection_ids: [c1] })).status, 403);
});

test("media.search: name, description and tags; hints for other collections and archived", async (t) => {
  const u = await sys.user();
  const c1 = await collection(u, "Search one");
  const c2 = await collection(u, "Search two");
  const n1 = await note(u, c1, { name: "Quarterly report", description: "numbers" });
  const n2 = await note(u, c2, { name: "Holiday", description: "Beach in Crète" });
  await sys.call(u.token, { op: "media.update", media_id: n2.id, tags: ["sunny"] });
  t.deepEqual((await sys.call(u.token, { op: "media.search", query: "quarter" })).body.media.map((m: any) => m.id), [n1.id]);
  t.deepEqual((await sys.call(u.token, { op: "media.search", query: "crete" })).body.media.map((m: any) => m.id), [n2.id]);
  t.deepEqual((await sys.call(u.token, { op: "media.search", query: "sunny" })).body.media.map((m: any) => m.id), [n2.id]);
  const scoped = await sys.call(u.token, { op: "media.search", query: "holiday", collection_id: c1 });
  t.is(scoped.body.media.length, 0);
  t.is(scoped.body.also_in_other_collections, 1);
  t.truthy(scoped.body.hint);
  await sys.call(u.token, { op: "media.archive", media_id: n1.id });
  const arch = await sys.call(u.token, { op: "media.search", query: "quarterly" });
  t.is(arch.body.media.length, 0);
  t.is(arch.body.also_archived, 1);
  // Another user's media never show up.
  const other = await sys.user();
  t.is((await sys.call(other.token, { op: "media.search", query: "holiday" })).body.media.length, 0);
});

test("media.delete: hard by default with confirm, soft on request, dry_run, batch; restore", async (t) => {
  const c = await collection(owner, "Deletes");
  const [a, b, d] = [await note(owner, c, { name: "a" }), await note(owner, c, { name: "b" }), await note(owner, c, { name: "d" })];
  const noConfirm = await sys.call(owner.token, { op: "media.delete", media_ids: [a.id] });
  t.is(noConfirm.status, 400);
  t.is(noConfirm.body.error, "confirmation_required");
  const dry = await sys.call(owner.token, { op: "media.delete", media_ids: [a.id, b.id], dry_run: true });
  t.true(dry.body.dry_run);
  t.is((await sys.call(owner.token, { op: "media.list", collection_id: c })).body.media.length, 3);
  const soft = await sys.call(owner.token, { op: "media.delete", media_ids: [a.id], mode: "soft" });
  t.is(soft.status, 200);
  t.is((await sys.call(owner.token, { op: "media.get", media_id: a.id })).status, 404);
  const restored = await sys.call(owner.token, { op: "media.restore", media_id: a.id });
  t.false(restored.body.media.is_deleted);
  const hard = await sys.call(owner.token, { op: "media.delete", media_ids: [b.id, d.id], confirm: true });
  t.is(hard.body.count, 2);
  const left = (await sys.call(owner.token, { op: "media.list", collection_id: c })).body.media;
  t.deepEqual(left.map((m: any) => [m.id, m.position]), [[a.id, 0]]);
  t.is((await sys.call(owner.token, { op: "media.restore", media_id: b.id })).status, 404);
});

test("hard delete removes stored files after the rows, but not while a copy still uses them", async (t) => {
  const c1 = await collection(owner, "Copy source");
  const c2 = await collection(owner, "Copy target");
  const m = (await sys.call(owner.token, { op: "media.create", collection_id: c1, source_url: img.url("/photo.jpg") })).body.media;
  const copy = await sys.call(owner.token, { op: "media.copy", media_id: m.id, target_collection_id: c2 });
  t.is(copy.status, 200);
  t.not(copy.body.media.id, m.id);
  t.is(copy.body.media.main_url, m.main_url);
  t.is(copy.body.media.collection_id, c2);
  await sys.call(owner.token, { op: "media.delete", media_ids: [m.id], confirm: true });
  await sys.system.drainEvents();
  await new Promise((r) => setTimeout(r, 300));
  t.truthy(await sys.system.store.head(m.main_url), "the copy still uses the file");
  await sys.call(owner.token, { op: "media.delete", media_ids: [copy.body.media.id], confirm: true });
  await sys.system.drainEvents();
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && (await sys.system.store.head(m.main_url))) await new Promise((r) => setTimeout(r, 50));
  t.is(await sys.system.store.head(m.main_url), undefined);
  t.is(await sys.system.store.head(m.thumbnail_url), undefined);
});

test("media.move and media.reorder renumber densely", async (t) => {
  const src = await collection(owner, "Move source");
  const dst = await collection(owner, "Move target");
  const s = [await note(owner, src, { name: "s0" }), await note(owner, src, { name: "s1" }), await note(owner, src, { name: "s2" })];
  const d = [await note(owner, dst, { name: "d0" }), await note(owner, dst, { name: "d1" })];
  const moved = await sys.call(owner.token, { op: "media.move", media_ids: [s[2].id, s[0].id], target_collection_id: dst, start_position: 1 });
  t.is(moved.status, 200);
  const dstList = (await sys.call(owner.token, { op: "media.list", collection_id: dst })).body.media.map((m: any) => [m.name, m.position]);
  t.deepEqual(dstList, [["d0", 0], ["s2", 1], ["s0", 2], ["d1", 3]]);
  const srcList = (await sys.call(owner.token, { op: "media.list", collection_id: src })).body.media.map((m: any) => [m.name, m.position]);
  t.deepEqual(srcList, [["s1", 0]]);
  const re = await sys.call(owner.token, { op: "media.reorder", collection_id: dst, ordered_ids: [d[1].id, s[0].id] });
  t.is(re.status, 200);
  const after = (await sys.call(owner.token, { op: "media.list", collection_id: dst })).body.media.map((m: any) => [m.name, m.position]);
  t.deepEqual(after, [["d1", 0], ["s0", 1], ["d0", 2], ["s2", 3]]);
  t.is((await sys.call(owner.token, { op: "media.reorder", collection_id: dst, ordered_ids: [s[1].id] })).status, 400);
  const other = await sys.user();
  const theirs = await collection(other, "Theirs");
  t.is((await sys.call(owner.token, { op: "media.move", media_ids: [d[0].id], target_collection_id: theirs })).status, 403);
});

test("text notes: modes, placeholders, update rules, get and delete with confirm", async (t) => {
  const c = await collection(owner, "Notes");
  const plain = await note(owner, c, { name: "Plain", text: "hello" });
  t.is(plain.main_url, "inline://text-note");
  t.is(plain.viewer, "text");
  t.is(plain.display_mode, "plain");
  t.is(plain.thumbnail_url, "/assets/player/carousel_placeholders_webp/carousel-placeholder-notes.webp");
  const md = await note(owner, c, { viewer: "markdown", placeholder_kind: "poem", text: "# x" });
  t.is(md.display_mode, "markdown");
  t.is(md.thumbnail_url, "/assets/player/carousel_placeholders_webp/carousel-placeholder-poem.webp");
  const own = await note(owner, c, { display_mode: "code", viewer: "code", thumbnail_url: "https://example.com/t.png", placeholder_kind: "log" });
  t.is(own.thumbnail_url, "https://example.com/t.png");
  const textAlias = await note(owner, c, { display_mode: "plain", viewer: "text" });
  t.is(textAlias.viewer, "text");
  const disagree = await sys.call(owner.token, { op: "media.text_note.add", collection_id: c, display_mode: "markdown", viewer: "code" });
  t.is(disagree.status, 400);

  const upd = await sys.call(owner.token, { op: "media.text_note.update", media_id: md.id, text: "new" });
  t.is(upd.body.media.display_mode, "markdown");
  t.is(upd.body.media.thumbnail_url, md.thumbnail_url);
  const upd2 = await sys.call(owner.token, { op: "media.text_note.update", media_id: md.id, display_mode: "plain", placeholder_kind: "summary" });
  t.is(upd2.body.media.viewer, "text");
  t.is(upd2.body.media.thumbnail_url, "/assets/player/carousel_placeholders_webp/carousel-placeholder-summary.webp");

  const got = await sys.call(owner.token, { op: "media.text_note.get", media_id: md.id });
  t.is(got.body.text_note, "new");
  const noConfirm = await sys.call(owner.token, { op: "media.text_note.delete", media_id: md.id });
  t.is(noConfirm.status, 400);
  t.is(noConfirm.body.error, "confirmation_required");
  const dry = await sys.call(owner.token, { op: "media.text_note.delete", media_id: md.id, dry_run: true });
  t.true(dry.body.dry_run);
  t.is((await sys.call(owner.token, { op: "media.text_note.get", media_id: md.id })).status, 200);
  t.is((await sys.call(owner.token, { op: "media.text_note.delete", media_id: md.id, confirm: true })).status, 200);
  t.is((await sys.call(owner.token, { op: "media.text_note.get", media_id: md.id })).status, 404);

  const asset = await fetch(`${sys.url}${plain.thumbnail_url}`);
  t.is(asset.status, 200);
  t.is(asset.headers.get("content-type"), "image/webp");
  t.is((await fetch(`${sys.url}/assets/../package.json`)).status, 404);
});

test("thumbnails from an object-store key: automatic on update, and media.thumbnail_finalize (and its alias)", async (t) => {
  const c = await collection(owner, "Thumbs");
  const n = await note(owner, c, { name: "needs thumb" });
  const sharp = (await import("sharp")).default;
  const jpeg = await sharp({ create: { width: 1000, height: 800, channels: 3, background: "#aa3366" } }).jpeg().toBuffer();
  const key = `store://${owner.userId}/${c}/${Date.now()}_thumb-src.jpg`;
  await sys.system.store.put(key, jpeg, { contentType: "image/jpeg" });
  const auto = await sys.call(owner.token, { op: "media.update", media_id: n.id, thumbnail_url: key });
  t.regex(auto.body.media.thumbnail_url, /_thumb\.webp$/);
  t.regex(auto.body.media.background_image_url, /_bg\.webp$/);
  const key2 = `store://${owner.userId}/${c}/${Date.now()}_second.jpg`;
  await sys.system.store.put(key2, jpeg, { contentType: "image/jpeg" });
  const fin = await sys.call(owner.token, { op: "media.thumbnail_finalize", media_id: n.id, thumbnail_url: key2 });
  t.is(fin.status, 200);
  t.not(fin.body.media.thumbnail_url, auto.body.media.thumbnail_url);
  const key3 = `store://${owner.userId}/${c}/${Date.now()}_third.jpg`;
  await sys.system.store.put(key3, jpeg, { contentType: "image/jpeg" });
  t.is((await sys.call(owner.token, { op: "media.thumbnail_uploaded", media_id: n.id, thumbnail_url: key3 })).status, 200);
  const missing = await sys.call(owner.token, { op: "media.thumbnail_finalize", media_id: n.id, thumbnail_url: `store://${owner.userId}/${c}/1_none.jpg` });
  t.is(missing.status, 400);
  // Omitted after the row's pair was made: nothing to do, and the 800 px background stays.
  const width = async (k: string) => (await sharp(await objectBytes(k)).metadata()).width;
  const current = (await sys.must(owner.token, { op: "media.get", media_id: n.id })).media;
  t.is(await width(current.background_image_url), 800);
  const again = await sys.call(owner.token, { op: "media.thumbnail_finalize", media_id: n.id });
  t.is(again.status, 200, JSON.stringify(again.body));
  t.is(again.body.noop, true);
  t.is(again.body.media.background_image_url, current.background_image_url);
  t.is(await width(current.background_image_url), 800);
});

test("deleting a text note, or an item hard, removes the thumbnail it stored", async (t) => {
  const c = await collection(owner, "Note thumbs");
  const stored = async (name: string) => {
    const key = `store://${owner.userId}/${c}/${Date.now()}_${name}.webp`;
    await sys.system.store.put(key, Buffer.from(name), { contentType: "image/webp" });
    return key;
  };
  const noteThumb = await stored("note-thumb");
  const n = await note(owner, c, { name: "with thumb", thumbnail_url: noteThumb });
  t.is(n.thumbnail_url, noteThumb);
  const itemThumb = await stored("item-thumb");
  const item = await note(owner, c, { name: "item", thumbnail_url: itemThumb });
  t.is((await sys.call(owner.token, { op: "media.text_note.delete", media_id: n.id, confirm: true })).status, 200);
  t.is((await sys.call(owner.token, { op: "media.delete", media_ids: [item.id], confirm: true })).status, 200);
  t.deepEqual(await storedAfterCleanup(sys.system, [noteThumb, itemThumb]), []);
});

test("concurrent media.thumbnail_finalize of one item: the row keeps one pair, and every other pair and every source is removed", async (t) => {
  const c = await collection(owner, "Raced thumbs");
  const n = await note(owner, c, { name: "raced" });
  const sharp = (await import("sharp")).default;
  const jpeg = await sharp({ create: { width: 1200, height: 900, channels: 3, background: "#3366aa" } }).jpeg().toBuffer();
  const sources = Array.from({ length: 6 }, (_, i) => `store://${owner.userId}/${c}/${Date.now()}_race${i}.jpg`);
  for (const k of sources) await sys.system.store.put(k, jpeg, { contentType: "image/jpeg" });
  // Sent at once, each reads the row before any has written its pair.
  const answers = await Promise.all(sources.map((k) => sys.must(owner.token, { op: "media.thumbnail_finalize", media_id: n.id, thumbnail_url: k })));
  const kept = (await sys.must(owner.token, { op: "media.get", media_id: n.id })).media;
  const pairs = answers.map((a) => [a.media.thumbnail_url as string, a.media.background_image_url as string]);
  t.true(pairs.some(([thumb, bg]) => thumb === kept.thumbnail_url && bg === kept.background_image_url), "the row names the pair of one of the calls");
  const unnamed = [...sources, ...pairs.flat().filter((k) => k !== kept.thumbnail_url && k !== kept.background_image_url)];
  t.is(unnamed.length, sources.length + 2 * (sources.length - 1));
  t.deepEqual(await storedAfterCleanup(sys.system, unnamed), [], "no object is left that no row names");
  t.truthy(await sys.system.store.head(kept.thumbnail_url));
  t.truthy(await sys.system.store.head(kept.background_image_url));
});

test("a thumbnail's source key is consumed: removed once its pair is made, and the upload flow's finalize naming it again is a noop", async (t) => {
  const c = await collection(owner, "Consumed sources");
  const n = await note(owner, c, { name: "thumb by update" });
  const sharp = (await import("sharp")).default;
  const png = await sharp({ create: { width: 900, height: 600, channels: 3, background: "#22aa66" } }).png().toBuffer();
  // purpose=thumbnail: PUT, set thumbnail_url with media.update, then media.thumbnail_finalize.
  const minted = await sys.must(owner.token, { op: "media.get_upload_url", collection_id: c, purpose: "thumbnail", content_type: "image/png", content_length: png.length });
  t.is((await fetch(minted.byte_upload_url, { method: "PUT", headers: { "content-type": "image/png" }, body: png })).status, 200);
  const source = minted.store_key as string;
  const updated = (await sys.must(owner.token, { op: "media.update", media_id: n.id, thumbnail_url: source })).media;
  t.regex(updated.thumbnail_url, /_thumb\.webp$/);
  const fin = await sys.must(owner.token, { op: "media.thumbnail_finalize", media_id: n.id, thumbnail_url: source });
  t.is(fin.noop, true);
  t.like(fin.media, { thumbnail_url: updated.thumbnail_url, background_image_url: updated.background_image_url });
  const retried = (await sys.must(owner.token, { op: "media.update", media_id: n.id, thumbnail_url: source })).media;
  t.like(retried, { thumbnail_url: updated.thumbnail_url, background_image_url: updated.background_image_url });
  t.deepEqual(await storedAfterCleanup(sys.system, [source]), [], "the source no row names is removed");
  const other = await note(owner, c, { name: "another" });
  const consumed = await sys.call(owner.token, { op: "media.update", media_id: other.id, thumbnail_url: source });
  t.is(consumed.status, 400);
  t.regex(consumed.body.detail, /already made from it/);
  t.truthy(await sys.system.store.head(updated.thumbnail_url));
  t.truthy(await sys.system.store.head(updated.background_image_url));

  // media.create with thumbnail_url a key: that source goes too, unless it is the item's own file.
  const put = async (name: string) => {
    const key = `store://${owner.userId}/${c}/${Date.now()}_${name}.png`;
    await sys.system.store.put(key, png, { contentType: "image/png" });
    return key;
  };
  const [file, thumbSource, ownFile] = [await put("file"), await put("thumb-src"), await put("own-file")];
  const created = (await sys.must(owner.token, { op: "media.create", collection_id: c, source_url: file, thumbnail_url: thumbSource })).media;
  t.regex(created.thumbnail_url, /_thumb\.webp$/);
  const fromItself = (await sys.must(owner.token, { op: "media.create", collection_id: c, source_url: ownFile, thumbnail_url: ownFile })).media;
  t.regex(fromItself.thumbnail_url, /_thumb\.webp$/);
  t.deepEqual(await storedAfterCleanup(sys.system, [thumbSource]), []);
  t.truthy(await sys.system.store.head(file));
  t.truthy(await sys.system.store.head(ownFile), "a source that is the item's file stays");
});

test("media.thumbnail_finalize takes an http(s) image URL (fetched through the SSRF guard), given or already on the row", async (t) => {
  const c = await collection(owner, "Remote thumbs");
  const sharp = (await import("sharp")).default;
  const n = await note(owner, c, { name: "remote" });
  const fin = await sys.call(owner.token, { op: "media.thumbnail_finalize", media_id: n.id, thumbnail_url: img.url("/photo.jpg") });
  t.is(fin.status, 200, JSON.stringify(fin.body));
  t.regex(fin.body.media.thumbnail_url, /_thumb\.webp$/);
  t.is((await sharp(await objectBytes(fin.body.media.background_image_url)).metadata()).width, 800);
  // media.create keeps an http(s) thumbnail_url as it is; finalize then makes the pair from it.
  const link = (await sys.must(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/page.html"), thumbnail_url: img.url("/photo.jpg") })).media;
  t.is(link.thumbnail_url, img.url("/photo.jpg"));
  const fromRow = await sys.call(owner.token, { op: "media.thumbnail_finalize", media_id: link.id });
  t.is(fromRow.status, 200, JSON.stringify(fromRow.body));
  t.regex(fromRow.body.media.thumbnail_url, /_thumb\.webp$/);
  t.truthy(fromRow.body.media.background_image_url);
  const notImage = await sys.call(owner.token, { op: "media.thumbnail_finalize", media_id: n.id, thumbnail_url: img.url("/page.html") });
  t.is(notImage.status, 400);
  t.is(notImage.body.field, "thumbnail_url");
  const blocked = await sys.call(owner.token, { op: "media.thumbnail_finalize", media_id: n.id, thumbnail_url: "http://169.254.169.254/latest/meta-data" });
  t.is(blocked.status, 400);
  t.is(blocked.body.field, "thumbnail_url");
});

test("media.update: viewer collection is refused; a text note's viewer sets its display_mode too", async (t) => {
  const c = await collection(owner, "Viewer updates");
  const item = (await sys.must(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/photo.jpg") })).media;
  const asLink = await sys.call(owner.token, { op: "media.update", media_id: item.id, viewer: "collection" });
  t.is(asLink.status, 400);
  t.is(asLink.body.field, "viewer");
  const n = await note(owner, c, { name: "md", text: "# hi" });
  const md = await sys.call(owner.token, { op: "media.update", media_id: n.id, viewer: "markdown" });
  t.is(md.status, 200, JSON.stringify(md.body));
  t.is(md.body.media.viewer, "markdown");
  t.is((await sys.must(owner.token, { op: "media.text_note.get", media_id: n.id })).display_mode, "markdown");
  const image = await sys.call(owner.token, { op: "media.update", media_id: n.id, viewer: "image" });
  t.is(image.status, 400);
  t.is(image.body.field, "viewer");
});

test("a one-call item replaced before its bytes arrived is not taken for abandoned by the upload_finalize job", async (t) => {
  const c = await collection(owner, "Replaced one-call");
  const minted = await sys.must(owner.token, { op: "media.get_upload_url", collection_id: c, filename: "never.png", content_type: "image/png", name: "Will be replaced" });
  const id = minted.media.id as number;
  const replaced = await sys.call(owner.token, { op: "media.replace", media_id: id, source_url: img.url("/photo.jpg") });
  t.is(replaced.status, 200, JSON.stringify(replaced.body));
  await runJobNow(sys.system, "upload_finalize", { now: new Date(Date.now() + 24 * 3600_000).toISOString() });
  const after = await sys.call(owner.token, { op: "media.get", media_id: id });
  t.is(after.status, 200, "the replaced item survives");
  t.is(after.body.media.name, "Will be replaced");
  t.deepEqual(await objectBytes(after.body.media.main_url) !== undefined, true);
});

test("every media change emits collection.updated for its collection", async (t) => {
  const events: Array<Record<string, unknown>> = [];
  await sys.system.subscribe(`media-events-${process.pid}`, "collection.updated", async (e) => { events.push(e.payload); });
  const c = await collection(owner, "Media events");
  const n = await note(owner, c, { name: "e" });
  await sys.call(owner.token, { op: "media.text_note.update", media_id: n.id, text: "x" });
  await sys.call(owner.token, { op: "media.archive", media_id: n.id });
  await sys.call(owner.token, { op: "media.delete", media_ids: [n.id], confirm: true });
  await sys.system.drainEvents();
  const deadline = Date.now() + 10_000;
  const kinds = () => events.filter((e) => e.collection_id === c).map((e) => e.kind);
  while (Date.now() < deadline && kinds().length < 5) await new Promise((r) => setTimeout(r, 50));
  t.deepEqual(kinds(), ["created", "media_added", "media_updated", "media_archived", "media_removed"]);
});

test("a collection's cover is not a media item: refused as source_url and as thumbnail_url, and never removed by media cleanup", async (t) => {
  const created = await sys.call(owner.token, { op: "collections.create", name: "With a cover", thumbnail_url: img.url("/photo.jpg") });
  t.is(created.status, 200, JSON.stringify(created.body));
  const c = created.body.collection.id as number;
  const row = await sys.system.dbOf("collections")!("collections").where({ id: c }).first();
  const coverKeys = [row.thumbnail_url, row.cover_thumbnail_url] as string[];
  t.true(coverKeys.every((k) => k.startsWith(`store://${owner.userId}/`)));
  const asSource = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: coverKeys[0] });
  t.is(asSource.status, 400);
  t.is(asSource.body.field, "source_url");
  t.regex(asSource.body.detail, /cover/);
  const n = await note(owner, c);
  const asThumb = await sys.call(owner.token, { op: "media.thumbnail_finalize", media_id: n.id, thumbnail_url: coverKeys[1] });
  t.is(asThumb.status, 400);
  t.is(asThumb.body.field, "thumbnail_url");
  t.is((await sys.call(owner.token, { op: "media.update", media_id: n.id, thumbnail_url: coverKeys[1] })).status, 400);

  // An orphaned-objects event naming a cover, a live item's file and a free object removes only
  // the free one: references are checked again when objects are removed.
  const item = (await sys.must(owner.token, { op: "media.create", collection_id: c, source_url: img.url("/photo.jpg") })).media;
  const free = `store://${owner.userId}/${c}/free-object.bin`;
  await sys.system.store.put(free, Buffer.from("x"), { contentType: "application/octet-stream" });
  await sys.system.dbOf("media")!("outbox").insert({
    id: randomUUID(), type: "media.objects.orphaned", payload: JSON.stringify({ store_keys: [...coverKeys, item.main_url, free] }), headers: JSON.stringify({}),
  });
  await sys.system.drainEvents();
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && (await sys.system.store.head(free))) await new Promise((r) => setTimeout(r, 50));
  t.is(await sys.system.store.head(free), undefined, "the free object is removed");
  for (const k of [...coverKeys, item.main_url]) t.truthy(await sys.system.store.head(k), `${k} is still in use and stays`);
});

test("media.list counts its total from the collection's order index (is_archived in the index), archived items left out unless asked", async (t) => {
  const owner = await sys.user();
  const { collection } = await sys.must(owner.token, { op: "collections.create", name: "Counted" });
  const db = sys.system.dbOf("media")!;
  // Every seventh archived.
  await db.raw(
    `INSERT INTO media (collection_id, owner_user_id, created_by, name, tags, main_url, viewer, position, is_archived)
     SELECT ?, ?, ?, 'Note ' || i, ARRAY['n'], 'inline://text-note', 'text', i, i % 7 = 0 FROM generate_series(0, 69) i`,
    [collection.id, owner.userId, owner.userId],
  );
  const page = await sys.must(owner.token, { op: "media.list", collection_id: collection.id, limit: 5, offset: 2 });
  t.is(page.pagination.total, 60);
  t.deepEqual(page.media.map((m: { position: number }) => m.position), [3, 4, 5, 6, 8]);
  t.is((await sys.must(owner.token, { op: "media.list", collection_id: collection.id, limit: 1, include_archived: true })).pagination.total, 70);

  // Which plan answers the count is the planner's free choice, and it depends on what share of
  // the shared table this collection holds: an Index Only Scan, a Seq Scan and an Index Scan of
  // another index with a filter were all seen (and enable_indexscan = off disables index-only scans
  // too). What the count needs is an index that can answer it alone: led by collection_id, over the
  // rows not deleted, carrying is_archived. An index without is_archived makes every plan read the rows.
  const { rows: [order] } = await db.raw(
    `SELECT pg_get_expr(i.indpred, i.indrelid) AS predicate,
            array(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n)
                  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n)::text[] AS columns
       FROM pg_index i WHERE i.indexrelid = to_regclass('media_collection_order_v2')`,
  );
  t.truthy(order, "the order index exists");
  t.is(order.predicate, "(NOT is_deleted)");
  t.is(order.columns[0], "collection_id");
  t.true(order.columns.includes("is_archived"), `is_archived is in the index: ${order.columns}`);
});

test("media.list's page, prepared, reads the order index in its generic plan too (its constant conditions imply the partial index's predicate)", async (t) => {
  const owner = await sys.user();
  const { collection } = await sys.must(owner.token, { op: "collections.create", name: "Generic plan" });
  const db = sys.system.dbOf("media")!;
  await db.raw(
    `INSERT INTO media (collection_id, owner_user_id, created_by, name, tags, main_url, viewer, position)
     SELECT ?, ?, ?, 'Note ' || i, ARRAY['n'], 'inline://text-note', 'text', i FROM generate_series(0, 199) i`,
    [collection.id, owner.userId, owner.userId],
  );
  // The statement as the store sends it: the prepared one that carries this collection's id.
  const sent: Array<{ sql: string; bindings: unknown[] }> = [];
  const listen = (q: { sql: string; bindings: unknown[]; options?: { cmsPrepared?: boolean } }) => {
    if (q.options?.cmsPrepared && q.sql.includes(" as \"total\"") && q.bindings.includes(collection.id)) sent.push(q);
  };
  db.on("query", listen);
  try {
    t.is((await sys.must(owner.token, { op: "media.list", collection_id: collection.id, limit: 10, offset: 20 })).pagination.total, 200);
  } finally {
    db.off("query", listen);
  }
  t.is(sent.length, 1);
  const { sql, bindings } = sent[0]!;
  t.true(sql.includes("media_list_counts"), "an unfiltered page reads the collection's kept count, it does not count its rows");
  // The job that folds the appended changes into the counts; the total stays what it was.
  const folded = await runJobNow(sys.system, "list_counts_fold", {}) as { folded?: number; skipped?: string };
  t.true((folded.folded ?? 0) >= 200 || Boolean(folded.skipped), JSON.stringify(folded));
  t.is((await sys.must(owner.token, { op: "media.list", collection_id: collection.id, limit: 10, offset: 20 })).pagination.total, 200);
  await sys.must(owner.token, { op: "media.archive", media_id: (await sys.must(owner.token, { op: "media.list", collection_id: collection.id, limit: 1 })).media[0].id });
  t.is((await sys.must(owner.token, { op: "media.list", collection_id: collection.id, limit: 1 })).pagination.total, 199, "an archived item leaves the total at once");
  const plan = await db.transaction(async (trx) => {
    await trx.raw(`PREPARE generic_media_page AS ${sql}`);
    // Only scans of an index are left to the planner; a statement whose text does not imply
    // the index's predicate (`is_deleted = $n`) cannot use it, and its plan is a disabled scan.
    await trx.raw("SET LOCAL plan_cache_mode = force_generic_plan");
    await trx.raw("SET LOCAL enable_seqscan = off");
    await trx.raw("SET LOCAL enable_bitmapscan = off");
    const values = bindings.map((v) => (typeof v === "number" ? String(v) : `'${String(v).replace(/'/g, "''")}'`)).join(", ");
    const { rows } = await trx.raw(`EXPLAIN (COSTS OFF) EXECUTE generic_media_page(${values})`);
    await trx.raw("DEALLOCATE generic_media_page");
    return rows.map((r: Record<string, string>) => r["QUERY PLAN"]).join("\n");
  });
  t.regex(plan, /Index (Only )?Scan using media_collection_order_v2/, plan);
  t.notRegex(plan, /Seq Scan/, plan);
});
