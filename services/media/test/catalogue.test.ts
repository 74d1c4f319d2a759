/**
 * Catalogue rules that were only reachable end to end, against in-memory fakes: permissions
 * from CheckAccess, dense positions through delete, restore, move and reorder, what goes to the
 * outbox (and what does not on a rollback), orphaned objects kept while something uses them,
 * and no call to the collections service inside a unit of work (the fake refuses one).
 */
import test from "ava";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { AppError, EVENTS, runInCallScope } from "@cms/platform";
import sharp from "sharp";
import { callerOf, fakeMediaApp } from "./fakes.js";

const OWNER = "00000000-0000-4000-8000-000000000001";
const owner = callerOf(OWNER);

async function withNotes(n: number, collectionId = 1) {
  const f = fakeMediaApp();
  const ids: number[] = [];
  for (let i = 0; i < n; i++) ids.push((await f.app.notes.addTextNote(owner, { collectionId, name: `n${i}`, text: `note ${i}` })).id);
  return { ...f, ids };
}

const positions = (f: ReturnType<typeof fakeMediaApp>, collectionId: number) => f.state.media.filter((r) => r.collection_id === collectionId && !r.is_deleted)
  .sort((a, b) => a.position - b.position).map((r) => [r.id, r.position]);

test("permissions come from CheckAccess: a deleted collection is not found, a missing flag names itself, a stranger is forbidden", async (t) => {
  const f = fakeMediaApp();
  f.collections.access.set(1, { isDeleted: true });
  f.collections.access.set(2, { allowed: false, deniedPermission: "can_upload", ownerUserId: "someone" });
  f.collections.access.set(3, { allowed: false, ownerUserId: "someone" });
  const add = (collectionId: number) => f.app.notes.addTextNote(owner, { collectionId, text: "x" });
  const notFound = await t.throwsAsync(add(1), { instanceOf: AppError });
  t.is(notFound.code, "not_found");
  t.is(notFound.detail, "Collection 1 does not exist or is not accessible.");
  const denied = await t.throwsAsync(add(2), { instanceOf: AppError });
  t.is(denied.code, "insufficient_permission");
  t.deepEqual(denied.extra, { permission: "can_upload" });
  t.is((await t.throwsAsync(add(3), { instanceOf: AppError })).code, "forbidden");
  t.deepEqual(f.state.media, []);
  t.deepEqual(f.events, []);
});

test("media.list reads its page while CheckAccess decides, and a refusal wins over a failed read", async (t) => {
  const f = await withNotes(2);
  const order: string[] = [];
  const check = f.collections.client.checkAccess.bind(f.collections.client);
  let release!: () => void;
  const decided = new Promise<void>((resolve) => { release = resolve; });
  (f.collections.client as { checkAccess: typeof check }).checkAccess = async (req, opts) => { order.push("check asked"); await decided; order.push("check answered"); return check(req, opts); };
  const page = f.stores.media.listPage.bind(f.stores.media);
  f.stores.media.listPage = async (q) => { order.push("page read"); return page(q); };
  const listing = f.app.catalogue.listMedia(owner, { collectionId: 1, limit: 10, offset: 0, includeArchived: false });
  await new Promise((resolve) => setImmediate(resolve));
  release();
  t.is((await listing).rows.length, 2);
  t.deepEqual(order, ["page read", "check asked", "check answered"], "the read did not wait for the check");

  f.collections.access.set(1, { allowed: false, ownerUserId: "someone" });
  f.stores.media.listPage = async () => { throw new Error("the database is down"); };
  const refused = await t.throwsAsync(f.app.catalogue.listMedia(owner, { collectionId: 1, limit: 10, offset: 0, includeArchived: false }), { instanceOf: AppError });
  t.is(refused.code, "forbidden");
});

test("rows are appended at the end, and each add writes one collection.updated (no owner, no published)", async (t) => {
  const f = await withNotes(3);
  t.deepEqual(positions(f, 1), f.ids.map((id, i) => [id, i]));
  t.deepEqual(f.events.map((e) => [e.type, e.payload.collection_id, e.payload.kind]), f.ids.map(() => [EVENTS.collectionUpdated, 1, "media_added"]));
  t.deepEqual(Object.keys(f.events[0]!.payload).sort(), ["collection_id", "kind", "occurred_at"]);
});

test("media.delete: confirmation for hard, dry run changes nothing, soft keeps positions dense, restore appends", async (t) => {
  const f = await withNotes(4);
  const [a, b, c, d] = f.ids as [number, number, number, number];
  const refused = await t.throwsAsync(f.app.catalogue.deleteMedia(owner, [b], { mode: "hard", confirm: false, dryRun: false }), { instanceOf: AppError });
  t.is(refused.code, "confirmation_required");
  t.deepEqual(await f.app.catalogue.deleteMedia(owner, [b], { mode: "hard", confirm: false, dryRun: true }), { dryRun: true, mode: "hard", mediaIds: [b] });
  t.is(positions(f, 1).length, 4);
  await f.app.catalogue.deleteMedia(owner, [b], { mode: "soft", confirm: false, dryRun: false });
  t.deepEqual(positions(f, 1), [[a, 0], [c, 1], [d, 2]]);
  const again = await t.throwsAsync(f.app.catalogue.deleteMedia(owner, [b], { mode: "soft", confirm: false, dryRun: false }), { instanceOf: AppError });
  t.like(again, { code: "not_found", extra: { missing_ids: [b] } });
  await f.app.catalogue.restoreMedia(owner, b);
  t.deepEqual(positions(f, 1), [[a, 0], [c, 1], [d, 2], [b, 3]]);
});

test("a hard delete hands the stored objects to the outbox; the cleanup keeps one a copy still uses, and a cover", async (t) => {
  const f = fakeMediaApp();
  const { media } = f.stores;
  const file = `store://${OWNER}/1/1_photo.png`;
  const thumb = `store://${OWNER}/1/1_thumb.webp`;
  const cover = `store://${OWNER}/1/1_cover.webp`;
  const src = await media.insert({ collection_id: 1, owner_user_id: OWNER, created_by: OWNER, main_url: file, viewer: "image", thumbnail_url: thumb, background_image_url: cover, position: 0 });
  const { row: copy } = await f.app.catalogue.copyMedia(owner, src.id, 2);
  t.like(copy, { collection_id: 2, main_url: file, thumbnail_url: thumb, position: 0 });
  for (const k of [file, thumb, cover]) await f.objects.store.put(k, Buffer.from(k), { contentType: "application/octet-stream" });
  f.collections.covers.add(cover);
  await f.app.catalogue.deleteMedia(owner, [copy.id], { mode: "hard", confirm: true, dryRun: false });
  const orphaned = f.events.filter((e) => e.type === EVENTS.objectsOrphaned).flatMap((e) => e.payload.store_keys as string[]);
  t.deepEqual(orphaned.sort(), [cover, file, thumb].sort());
  t.deepEqual(await f.app.objects.removeOrphaned(orphaned), { removed: 0, kept: 3 }, "the original still uses them");
  await f.app.catalogue.deleteMedia(owner, [src.id], { mode: "hard", confirm: true, dryRun: false });
  t.deepEqual(await f.app.objects.removeOrphaned(orphaned), { removed: 2, kept: 1 });
  t.deepEqual([...f.objects.objects.keys()], [cover], "a collection's cover stays");
});

test("media.move places the rows in order at the start position; both collections stay dense", async (t) => {
  const f = await withNotes(3, 1);
  const target = (await withNotesInto(f, 2, 3));
  await f.app.catalogue.moveMedia(owner, [f.ids[2]!, f.ids[0]!], 2, 1);
  t.deepEqual(positions(f, 1), [[f.ids[1]!, 0]]);
  t.deepEqual(positions(f, 2), [[target[0]!, 0], [f.ids[2]!, 1], [f.ids[0]!, 2], [target[1]!, 3], [target[2]!, 4]]);
  const kinds = f.events.slice(-2).map((e) => [e.payload.collection_id, e.payload.kind]).sort();
  t.deepEqual(kinds, [[1, "media_removed"], [2, "media_added"]]);
});

async function withNotesInto(f: ReturnType<typeof fakeMediaApp>, collectionId: number, n: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < n; i++) ids.push((await f.app.notes.addTextNote(owner, { collectionId, text: `t${i}` })).id);
  return ids;
}

test("media.reorder: listed ids first, the rest after; a foreign id fails the unit and writes nothing", async (t) => {
  const f = await withNotes(4);
  const [a, b, c, d] = f.ids as [number, number, number, number];
  const other = (await withNotesInto(f, 2, 1))[0]!;
  const written = f.events.length;
  const err = await t.throwsAsync(f.app.catalogue.reorderMedia(owner, 1, [c, other]), { instanceOf: AppError });
  t.is(err.detail, `ordered_ids must be non-deleted media of collection 1; not: ${other}.`);
  t.is(f.events.length, written, "the rolled back unit wrote no event");
  const out = await f.app.catalogue.reorderMedia(owner, 1, [d, b]);
  t.deepEqual(out.order, [{ id: d, position: 0 }, { id: b, position: 1 }, { id: a, position: 2 }, { id: c, position: 3 }]);
  t.deepEqual(positions(f, 1), [[d, 0], [b, 1], [a, 2], [c, 3]]);
});

test("sub-collection link rows are not deleted, moved or copied as media", async (t) => {
  const f = fakeMediaApp();
  const link = await f.app.links.insertCollectionLink({ parentId: 1, childId: 9, ownerUserId: OWNER });
  t.like(await t.throwsAsync(f.app.catalogue.deleteMedia(owner, [link.id], { mode: "soft", confirm: false, dryRun: false })), { code: "invalid_request" });
  t.like(await t.throwsAsync(f.app.catalogue.moveMedia(owner, [link.id], 2, undefined)), { detail: "Sub-collection links move with collections.move." });
  t.like(await t.throwsAsync(f.app.catalogue.copyMedia(owner, link.id, 2)), { detail: "Sub-collection links are not copied." });
  t.like(await t.throwsAsync(f.app.catalogue.updateMedia(owner, link.id, { name: "x" })), { code: "invalid_request" });
});

test("text notes: an update with nothing to change writes nothing; a new thumbnail orphans a stored old one", async (t) => {
  const f = fakeMediaApp();
  const note = await f.app.notes.addTextNote(owner, { collectionId: 1, text: "hi", thumbnailUrl: `store://${OWNER}/1/1_t.webp` });
  const written = f.events.length;
  t.deepEqual(await f.app.notes.updateTextNote(owner, note.id, {}), note);
  t.is(f.events.length, written);
  const updated = await f.app.notes.updateTextNote(owner, note.id, { placeholderKind: "poem", text: "héllo" });
  t.like(updated, { thumbnail_url: "/assets/player/carousel_placeholders_webp/carousel-placeholder-poem.webp", placeholder_kind: "poem", size_bytes: 6 });
  t.deepEqual(f.events.filter((e) => e.type === EVENTS.objectsOrphaned).map((e) => e.payload.store_keys), [[`store://${OWNER}/1/1_t.webp`]]);
});

test("media.search: no match explains itself with the counts outside the scope", async (t) => {
  const f = fakeMediaApp();
  await f.app.notes.addTextNote(owner, { collectionId: 1, name: "Crème brûlée", text: "" });
  const archived = await f.app.notes.addTextNote(owner, { collectionId: 2, name: "creme archived", text: "" });
  await f.app.catalogue.setArchived(owner, archived.id, true);
  const hit = await f.app.catalogue.searchMedia(owner, { query: " CREME ", limit: 10, offset: 0 });
  t.is(hit.pagination.total, 1);
  const miss = await f.app.catalogue.searchMedia(owner, { query: "creme", collectionId: 3, limit: 10, offset: 0 });
  t.like(miss, { alsoInOtherCollections: 1, hint: `No item of collection 3 matches "creme", but 1 in your other collections do: search again without collection_id.` });
  const onlyArchived = await f.app.catalogue.searchMedia(owner, { query: "archived", collectionId: 2, limit: 10, offset: 0 });
  t.like(onlyArchived, { alsoArchived: 1, hint: `Only archived items match "archived" (1); unarchive them to see them here.` });
  await t.throwsAsync(f.app.catalogue.searchMedia(owner, { query: "  ", limit: 10, offset: 0 }), { message: "invalid_request: query must not be blank." });
});

test("a row purged while its thumbnails were made: not_found, no event, and the thumbnails made for it removed", async (t) => {
  const f = fakeMediaApp();
  const note = await f.app.notes.addTextNote(owner, { collectionId: 1, text: "hi" });
  const source = `store://${OWNER}/1/source.png`;
  f.objects.objects.set(source, { bytes: await sharp({ create: { width: 40, height: 30, channels: 3, background: "#c33" } }).png().toBuffer(), info: { contentType: "image/png", size: 0, etag: "e" } });
  f.objects.hooks.onPut = () => { f.state.media = f.state.media.filter((r) => r.id !== note.id); };
  const written = f.events.length;
  const err = await t.throwsAsync(f.app.catalogue.finalizeThumbnail(owner, note.id, source), { instanceOf: AppError });
  t.is(err.code, "not_found");
  t.is(f.events.length, written);
  t.deepEqual([...f.objects.objects.keys()], [source]);
});

test("an edit and an archive write the row and their collection.updated", async (t) => {
  const { app, events, ids } = await withNotes(1);
  const written = events.length;
  t.like(await app.catalogue.updateMedia(owner, ids[0]!, { name: "renamed", tags: ["b", "a"] }), { name: "renamed" });
  t.like(await app.catalogue.setArchived(owner, ids[0]!, true), { is_archived: true });
  t.deepEqual(events.slice(written).map((e) => [e.type, e.payload.kind]), [[EVENTS.collectionUpdated, "media_updated"], [EVENTS.collectionUpdated, "media_archived"]]);
  t.is((await app.catalogue.getMedia(owner, ids[0]!)).name, "renamed");
});

/** A small PNG stored under each key, as a thumbnail's source. */
async function storeSources(f: ReturnType<typeof fakeMediaApp>, keys: string[]) {
  const bytes = await sharp({ create: { width: 40, height: 30, channels: 3, background: "#36a" } }).png().toBuffer();
  for (const k of keys) f.objects.objects.set(k, { bytes, info: { contentType: "image/png", size: bytes.length, etag: "e" } });
}

/** A text note, and a stored image to make its thumbnails from. */
async function noteAndSource() {
  const f = fakeMediaApp();
  const note = await f.app.notes.addTextNote(owner, { collectionId: 1, text: "hi" });
  const source = `store://${OWNER}/1/source.png`;
  await storeSources(f, [source]);
  return { f, note, source };
}

const orphanedKeys = (f: ReturnType<typeof fakeMediaApp>) => f.events.filter((e) => e.type === EVENTS.objectsOrphaned).flatMap((e) => e.payload.store_keys as string[]);

test("two finalizes of one item: the one applied last orphans the pair the other stored, so no object is left unnamed", async (t) => {
  const f = fakeMediaApp();
  const note = await f.app.notes.addTextNote(owner, { collectionId: 1, text: "hi" });
  const [first, second] = [`store://${OWNER}/1/first.png`, `store://${OWNER}/1/second.png`];
  await storeSources(f, [first, second]);
  // The second runs whole while the first stores its pair: the first read the row before it.
  let other: Awaited<ReturnType<typeof f.app.catalogue.finalizeThumbnail>> | undefined;
  f.objects.hooks.onPut = async () => { other = await f.app.catalogue.finalizeThumbnail(owner, note.id, second); };
  const { row } = await f.app.catalogue.finalizeThumbnail(owner, note.id, first);
  t.truthy(other);
  t.like(await f.stores.media.byId(note.id), { thumbnail_url: row.thumbnail_url, background_image_url: row.background_image_url });
  t.true(orphanedKeys(f).includes(other!.row.thumbnail_url!), "the pair the row no longer names is orphaned");
  await f.app.objects.removeOrphaned(orphanedKeys(f));
  t.deepEqual([...f.objects.objects.keys()].sort(), [row.thumbnail_url, row.background_image_url].sort());
});

test("a replace orphans the objects the row names when it is written, not those it named when first read", async (t) => {
  const f = fakeMediaApp();
  const file = `store://${OWNER}/1/1_old.png`;
  const item = await f.stores.media.insert({ collection_id: 1, owner_user_id: OWNER, created_by: OWNER, main_url: file, viewer: "image", position: 0 });
  const [source, thumbSource] = [`store://${OWNER}/1/new.png`, `store://${OWNER}/1/thumb.png`];
  await storeSources(f, [file, source, thumbSource]);
  let finalized: Awaited<ReturnType<typeof f.app.catalogue.finalizeThumbnail>> | undefined;
  f.objects.hooks.onPut = async () => { finalized = await f.app.catalogue.finalizeThumbnail(owner, item.id, thumbSource); };
  const replaced = await f.app.catalogue.replaceMedia(owner, item.id, { sourceUrl: source });
  t.truthy(finalized);
  t.true(orphanedKeys(f).includes(finalized!.row.thumbnail_url!));
  await f.app.objects.removeOrphaned(orphanedKeys(f));
  t.deepEqual([...f.objects.objects.keys()].sort(), [replaced.main_url, replaced.thumbnail_url, replaced.background_image_url].sort());
});

test("a text note's thumbnail replaced twice at once: the one stored first is orphaned", async (t) => {
  const f = fakeMediaApp();
  const note = await f.app.notes.addTextNote(owner, { collectionId: 1, text: "hi", thumbnailUrl: `store://${OWNER}/1/1_a.webp` });
  // Another edit lands between this one's read of the row and its update.
  const updating = f.stores.media.updating.bind(f.stores.media);
  let raced = false;
  f.stores.media.updating = (id, patch, unchanged) => {
    const statement = updating(id, patch, unchanged);
    if (raced) return statement;
    raced = true;
    const run = async () => { await f.app.notes.updateTextNote(owner, note.id, { thumbnailUrl: `store://${OWNER}/1/1_b.webp` }); return statement; };
    return { then: (ok, fail) => run().then(ok, fail), toSQL: () => statement.toSQL() };
  };
  const row = await f.app.notes.updateTextNote(owner, note.id, { thumbnailUrl: `store://${OWNER}/1/1_c.webp` });
  t.is(row.thumbnail_url, `store://${OWNER}/1/1_c.webp`);
  t.is((await f.stores.media.byId(note.id))!.thumbnail_url, `store://${OWNER}/1/1_c.webp`);
  t.deepEqual(orphanedKeys(f).sort(), [`store://${OWNER}/1/1_a.webp`, `store://${OWNER}/1/1_b.webp`]);
});

test("a row whose thumbnails keep being replaced: a finalize answers conflict after its attempts and removes the pair it made", async (t) => {
  const { f, note, source } = await noteAndSource();
  // Every read of the row is followed at once by another write of its thumbnail.
  const byId = f.stores.media.byId.bind(f.stores.media);
  let writes = 0;
  f.stores.media.byId = async (id, opts) => {
    const row = await byId(id, opts);
    f.state.media.find((r) => r.id === id)!.thumbnail_url = `store://${OWNER}/1/other-${++writes}.webp`;
    return row;
  };
  const written = f.events.length;
  const err = await t.throwsAsync(f.app.catalogue.finalizeThumbnail(owner, note.id, source), { instanceOf: AppError });
  t.is(err.code, "conflict");
  t.is(f.events.length, written, "no attempt wrote anything");
  t.deepEqual([...f.objects.objects.keys()], [source], "the pair it made is removed; the source stays");
});

test("a hard delete orphans what the rows named as they went: a thumbnail finalized after the delete read them included", async (t) => {
  const { f, note, source } = await noteAndSource();
  const activeByIds = f.stores.media.activeByIds.bind(f.stores.media);
  let finalized: Awaited<ReturnType<typeof f.app.catalogue.finalizeThumbnail>> | undefined;
  f.stores.media.activeByIds = async (ids) => {
    const rows = await activeByIds(ids);
    finalized ??= await f.app.catalogue.finalizeThumbnail(owner, note.id, source);
    return rows;
  };
  await f.app.catalogue.deleteMedia(owner, [note.id], { mode: "hard", confirm: true, dryRun: false });
  t.truthy(finalized?.row.thumbnail_url);
  await f.app.objects.removeOrphaned(orphanedKeys(f));
  t.deepEqual([...f.objects.objects.keys()], [], "the pair and its source are gone");
});

test("deleting a text note orphans the thumbnail it stored", async (t) => {
  const f = fakeMediaApp();
  const thumb = `store://${OWNER}/1/1_t.webp`;
  const note = await f.app.notes.addTextNote(owner, { collectionId: 1, text: "hi", thumbnailUrl: thumb });
  await f.app.notes.deleteTextNote(owner, note.id, { confirm: true, dryRun: false });
  t.deepEqual(orphanedKeys(f), [thumb]);
});

/** Runs `race` once, right after the next read of a media row outside a unit's lock. */
function afterNextRead(f: ReturnType<typeof fakeMediaApp>, race: () => Promise<unknown>) {
  const byId = f.stores.media.byId.bind(f.stores.media);
  let raced = false;
  f.stores.media.byId = async (id, opts) => {
    const row = await byId(id, opts);
    if (!raced && !opts?.forUpdate) {
      raced = true;
      await race();
    }
    return row;
  };
}

test("a copy whose source is hard-deleted and cleaned up after the copy read it: not_found, and no row names a removed object", async (t) => {
  const f = fakeMediaApp();
  const file = `store://${OWNER}/1/1_photo.png`;
  await storeSources(f, [file]);
  const src = await f.stores.media.insert({ collection_id: 1, owner_user_id: OWNER, created_by: OWNER, main_url: file, viewer: "image", position: 0 });
  afterNextRead(f, async () => {
    await f.app.catalogue.deleteMedia(owner, [src.id], { mode: "hard", confirm: true, dryRun: false });
    await f.app.objects.removeOrphaned(orphanedKeys(f));
  });
  const err = await t.throwsAsync(f.app.catalogue.copyMedia(owner, src.id, 2), { instanceOf: AppError });
  t.is(err.code, "not_found");
  t.deepEqual(f.state.media, [], "no copy was written");
  t.deepEqual([...f.objects.objects.keys()], []);
});

test("a copy made while its source's thumbnail is replaced names the new pair, which the cleanup keeps", async (t) => {
  const { f, note, source } = await noteAndSource();
  const second = `store://${OWNER}/1/second.png`;
  await storeSources(f, [second]);
  await f.app.catalogue.finalizeThumbnail(owner, note.id, source);
  let finalized: Awaited<ReturnType<typeof f.app.catalogue.finalizeThumbnail>> | undefined;
  afterNextRead(f, async () => {
    finalized = await f.app.catalogue.finalizeThumbnail(owner, note.id, second);
    await f.app.objects.removeOrphaned(orphanedKeys(f));
  });
  const { row: copy } = await f.app.catalogue.copyMedia(owner, note.id, 2);
  t.like(copy, { collection_id: 2, thumbnail_url: finalized!.row.thumbnail_url, background_image_url: finalized!.row.background_image_url });
  await f.app.objects.removeOrphaned(orphanedKeys(f));
  for (const k of [copy.thumbnail_url!, copy.background_image_url!]) t.true(f.objects.objects.has(k), `${k} is still stored`);
});

test("media.create and media.replace with the key of an item hard-deleted and cleaned up meanwhile: refused, and no row names the removed object", async (t) => {
  const f = fakeMediaApp();
  const file = `store://${OWNER}/1/1_photo.png`;
  await storeSources(f, [file]);
  const old = await f.stores.media.insert({ collection_id: 1, owner_user_id: OWNER, created_by: OWNER, main_url: file, viewer: "image", position: 0 });
  const other = await f.stores.media.insert({ collection_id: 1, owner_user_id: OWNER, created_by: OWNER, main_url: "https://example.com/page", viewer: "website", position: 1 });
  // The delete and its cleanup commit after ingesting read the object, before the write's unit.
  f.unitHooks.beforeNextUnit = async () => {
    await f.app.catalogue.deleteMedia(owner, [old.id], { mode: "hard", confirm: true, dryRun: false });
    await f.app.objects.removeOrphaned(orphanedKeys(f));
  };
  const created = await t.throwsAsync(f.app.catalogue.createMedia(owner, { collectionId: 2, sourceUrl: file, tags: [] }), { instanceOf: AppError });
  t.is(created.code, "invalid_request");
  t.regex(created.message, /removed meanwhile/);
  t.false(f.objects.objects.has(file));
  t.deepEqual(f.state.media.map((r) => r.id), [other.id], "no item names the removed object");
  // The same for a replace: the row keeps what it named.
  await storeSources(f, [file]);
  const again = await f.stores.media.insert({ collection_id: 1, owner_user_id: OWNER, created_by: OWNER, main_url: file, viewer: "image", position: 2 });
  f.unitHooks.beforeNextUnit = async () => {
    await f.app.catalogue.deleteMedia(owner, [again.id], { mode: "hard", confirm: true, dryRun: false });
    await f.app.objects.removeOrphaned(orphanedKeys(f));
  };
  const replaced = await t.throwsAsync(f.app.catalogue.replaceMedia(owner, other.id, { sourceUrl: file }), { instanceOf: AppError });
  t.is(replaced.code, "invalid_request");
  t.regex(replaced.message, /removed meanwhile/);
  t.like(await f.stores.media.byId(other.id), { main_url: other.main_url });
});

test("the object cleanup locks the keys it decides on, and an adopting write locks its key in share mode", async (t) => {
  const f = fakeMediaApp();
  const file = `store://${OWNER}/1/1_photo.png`;
  await storeSources(f, [file]);
  const locks: Array<[string[], string]> = [];
  f.stores.media.lockStoreKeys = async (keys, mode) => { locks.push([keys, mode]); };
  await f.app.catalogue.createMedia(owner, { collectionId: 1, sourceUrl: file, tags: [] });
  await f.app.objects.removeOrphaned([file, `store://${OWNER}/1/1_gone.png`]);
  t.deepEqual(locks, [[[file], "share"], [[file, `store://${OWNER}/1/1_gone.png`], "exclusive"]]);
  t.true(f.objects.objects.has(file), "the item still names it");
});

test("a thumbnail's source key is consumed by media.update: orphaned with the pair's write, and naming it again changes nothing", async (t) => {
  const { f, note, source } = await noteAndSource();
  const row = await f.app.catalogue.updateMedia(owner, note.id, { thumbnailUrl: source });
  t.like(row, { thumbnail_source: source });
  t.true(orphanedKeys(f).includes(source));
  await f.app.objects.removeOrphaned(orphanedKeys(f));
  t.false(f.objects.objects.has(source));
  const events = f.events.length;
  const again = await f.app.catalogue.updateMedia(owner, note.id, { thumbnailUrl: source });
  t.like(again, { thumbnail_url: row.thumbnail_url, background_image_url: row.background_image_url });
  const finalized = await f.app.catalogue.finalizeThumbnail(owner, note.id, source);
  t.like(finalized, { noop: true, row: { thumbnail_url: row.thumbnail_url } });
  t.is(f.events.length, events, "nothing was written");
});

test("a thumbnail set anew forgets the source the old pair was made from", async (t) => {
  const { f, note, source } = await noteAndSource();
  await f.app.catalogue.finalizeThumbnail(owner, note.id, source);
  await f.app.objects.removeOrphaned(orphanedKeys(f));
  const row = await f.app.notes.updateTextNote(owner, note.id, { placeholderKind: "notes" });
  t.is(row.thumbnail_source, null);
  const err = await t.throwsAsync(f.app.catalogue.finalizeThumbnail(owner, note.id, source), { instanceOf: AppError });
  t.is(err.code, "invalid_request", "the consumed source is not taken for the row's pair any more");
});

test("a source_url download stops once its call has ended: the connection is closed and no item is made", async (t) => {
  // A 10 MiB file sent 16 bytes every 50 ms: its pauses are short, so only the call's end stops it.
  let sending!: () => void;
  let closed!: () => void;
  const downloadStarted = new Promise<void>((resolve) => { sending = resolve; });
  const connectionClosed = new Promise<void>((resolve) => { closed = resolve; });
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(10 * 1024 * 1024) });
    res.write(Buffer.alloc(1024));
    sending();
    const drip = setInterval(() => res.write(Buffer.alloc(16)), 50);
    res.on("close", () => { clearInterval(drip); closed(); });
  });
  await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
  t.teardown(() => { server.closeAllConnections(); server.close(); });
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const f = fakeMediaApp({ outboundAllowedHosts: [host] });
  const call = new AbortController();
  const created = runInCallScope({ principal: { internal: true }, service: "media", signal: call.signal }, () =>
    f.app.catalogue.createMedia(owner, { collectionId: 1, sourceUrl: `http://${host}/big.bin`, tags: [] }));
  // The gateway gives up (split mode's 60 s) while the file is still arriving.
  await downloadStarted;
  setTimeout(() => call.abort(), 300);
  await t.throwsAsync(created);
  // Before, the download went on until the whole file came (about nine hours at this pace).
  await connectionClosed;
  t.deepEqual(f.state.media, []);
});
