/**
 * Finalizing one-call uploads (media.get_upload_url with a name) against in-memory fakes: the
 * ingest (store reads, thumbnails, the cover check) runs outside any unit of work, a short unit
 * claims the pending row, and an attempt that finds the row finalized, replaced or removed
 * meanwhile leaves it alone and hands what it made to media.objects.orphaned. Keys minted with no
 * row waiting for them are handed to it too, a day after their URL expired.
 */
import test from "ava";
import sharp from "sharp";
import { EVENTS } from "@cms/platform";
import { callerOf, fakeMediaApp } from "./fakes.js";

const OWNER = "00000000-0000-4000-8000-000000000001";
const owner = callerOf(OWNER);
const png = () => sharp({ create: { width: 40, height: 30, channels: 3, background: "#c33" } }).png().toBuffer();

/** A one-call row minted in collection 1, and (unless `bytes` is null) its bytes landed. */
async function minted(bytes: Buffer | null = null) {
  const f = fakeMediaApp();
  const minted = await f.app.uploads.getUploadUrl(owner, { collectionId: 1, filename: "photo.png", contentType: "image/png", purpose: "media", name: "photo", tags: ["Red"] });
  const row = minted.row!;
  if (bytes) await f.objects.store.put(row.main_url, bytes, { contentType: "image/png" });
  return { ...f, row };
}

const orphanedKeys = (f: { events: Array<{ type: string; payload: Record<string, unknown> }> }) =>
  f.events.filter((e) => e.type === EVENTS.objectsOrphaned).flatMap((e) => e.payload.store_keys as string[]);

test("the one-call row waits for its bytes, then is completed: type sniffed, size, sha256, thumbnails; the pending row goes", async (t) => {
  const bytes = await png();
  const f = await minted();
  t.like(f.row, { name: "photo", tags: ["red"], size_bytes: null, mime_type: "image/png", viewer: "image" });
  t.is(await f.app.pending.finalizePending(f.row.id), "not_uploaded");
  await f.objects.store.put(f.row.main_url, bytes, { contentType: "application/octet-stream" });
  t.is(await f.app.pending.finalizePending(f.row.id, { sha256: "ab".repeat(32) }), "finalized");
  const row = (await f.stores.media.byId(f.row.id))!;
  t.like(row, { size_bytes: bytes.length, mime_type: "image/png", sha256: "ab".repeat(32) });
  t.truthy(row.thumbnail_url && f.objects.objects.has(row.thumbnail_url));
  t.truthy(row.background_image_url && f.objects.objects.has(row.background_image_url));
  t.deepEqual(f.state.pending, []);
  t.is(f.events.at(-1)!.payload.kind, "media_updated");
  t.is(await f.app.pending.finalizePending(f.row.id), "not_pending");
});

test("a row finalized by another attempt while this one made its thumbnails is left alone; this one's thumbnails go", async (t) => {
  const f = await minted(await png());
  let thumbnails = 0;
  // The thumbnail and background are the two puts of this attempt; after them, the other attempt commits.
  const other = { thumbnail_url: "store://elsewhere/t.webp", size_bytes: 1 };
  const race = async () => {
    if (++thumbnails < 2) { f.objects.hooks.onPut = race; return; }
    await f.stores.media.update(f.row.id, other);
    await f.stores.media.removePending(f.row.id);
  };
  f.objects.hooks.onPut = race;
  t.is(await f.app.pending.finalizePending(f.row.id), "not_pending");
  t.like(await f.stores.media.byId(f.row.id), other, "the other attempt's outcome stands");
  const made = [...f.objects.objects.keys()].filter((k) => k !== f.row.main_url);
  t.is(made.length, 2);
  t.deepEqual(orphanedKeys(f).sort(), made.sort(), "this attempt's thumbnails are removed after the claim's commit");
  t.deepEqual(await f.app.objects.removeOrphaned(orphanedKeys(f)), { removed: 2, kept: 0 });
});

test("a thumbnail set while the bytes were being ingested stays; the ones made here go", async (t) => {
  const f = await minted(await png());
  f.objects.hooks.onPut = async () => { await f.stores.media.update(f.row.id, { thumbnail_url: "https://img.example/t.png" }); };
  t.is(await f.app.pending.finalizePending(f.row.id), "finalized");
  const row = (await f.stores.media.byId(f.row.id))!;
  t.is(row.thumbnail_url, "https://img.example/t.png");
  t.not(row.size_bytes, null);
  t.is(orphanedKeys(f).length, 2);
});

test("a failed claim leaves the pending row and removes the thumbnails at once", async (t) => {
  const f = await minted(await png());
  f.stores.media.removePending = async () => { throw new Error("connection lost"); };
  await t.throwsAsync(f.app.pending.finalizePending(f.row.id), { message: "connection lost" });
  t.is(f.state.pending.length, 1);
  t.deepEqual([...f.objects.objects.keys()], [f.row.main_url], "only the uploaded bytes are left");
  t.is((await f.stores.media.byId(f.row.id))!.size_bytes, null);
});

test("the cover check of the key runs outside the unit (the fake collections client fails a call inside one)", async (t) => {
  const f = fakeMediaApp();
  const key = `store://${OWNER}/1/1_cover.webp`;
  const row = await f.stores.media.insert({ collection_id: 1, owner_user_id: OWNER, created_by: OWNER, main_url: key, viewer: "image", position: 0 });
  await f.stores.media.insertPending({ media_id: row.id, store_key: key, user_id: OWNER, collection_id: 1, owner_user_id: OWNER, content_type: "image/webp", expires_at: new Date() });
  await f.objects.store.put(key, await png(), { contentType: "image/png" });
  t.is(await f.app.pending.finalizePending(row.id), "finalized");
  t.true(f.collections.calls.includes("coverStoreKeys"));
  f.collections.covers.add(key);
  await f.stores.media.insertPending({ media_id: row.id, store_key: key, user_id: OWNER, collection_id: 1, owner_user_id: OWNER, content_type: "image/webp", expires_at: new Date() });
  await t.throwsAsync(f.app.pending.finalizePending(row.id), { message: /source_url is a collection's cover image/ });
});

test("the upload_finalize job completes landed rows and removes rows whose bytes never came, once well past their grant, with a thumbnail set on them", async (t) => {
  const f = await minted(await png());
  const never = (await f.app.uploads.getUploadUrl(owner, { collectionId: 1, filename: "never.bin", purpose: "media", name: "never", tags: [] })).row!;
  const thumb = `store://${OWNER}/1/never_thumb.webp`;
  f.state.media.find((r) => r.id === never.id)!.thumbnail_url = thumb;
  const after = await f.app.notes.addTextNote(owner, { collectionId: 1, text: "after" });
  t.deepEqual(await f.app.jobs.uploadFinalize(new Date()), { finalized: 1, abandoned: 0, waiting: 1 }, "the other one still waits");
  t.is(f.state.pending.length, 1);
  t.deepEqual(await f.app.jobs.uploadFinalize(new Date(Date.now() + 24 * 3600_000)), { finalized: 0, abandoned: 1, waiting: 0 });
  t.is(await f.stores.media.byId(never.id), undefined);
  t.true(orphanedKeys(f).includes(thumb), "its thumbnail goes with it");
  t.deepEqual(f.state.pending, []);
  t.deepEqual(f.state.media.sort((a, b) => a.position - b.position).map((r) => [r.id, r.position]), [[f.row.id, 0], [after.id, 1]], "renumbered");
});

test("a job whose lease another replica holds is skipped; the lease is released after a run", async (t) => {
  const f = fakeMediaApp();
  f.state.leases.set("upload_finalize", { holder: "another", expiresAt: Date.now() + 60_000 });
  t.deepEqual(await f.app.jobs.uploadFinalize(new Date()), { skipped: "another replica is running this job" });
  f.state.leases.set("upload_finalize", { holder: "another", expiresAt: Date.now() - 1 });
  t.deepEqual(await f.app.jobs.uploadFinalize(new Date()), { finalized: 0, abandoned: 0, waiting: 0 }, "an expired lease is taken over");
  t.false(f.state.leases.has("upload_finalize"));
});

test("ObjectUploaded finalizes the row of its key; bytes for a row deleted meanwhile are removed", async (t) => {
  const f = await minted(await png());
  const report = await f.app.pending.objectUploaded({ storeKey: f.row.main_url, mediaId: f.row.id, sha256: "cd".repeat(32) });
  t.true(report.finalized);
  t.is(report.row!.sha256, "cd".repeat(32));
  const orphan = `store://${OWNER}/1/2_gone.bin`;
  await f.objects.store.put(orphan, Buffer.from("x"), { contentType: "application/octet-stream" });
  t.deepEqual(await f.app.pending.objectUploaded({ storeKey: orphan, mediaId: 999 }), { finalized: false, removed: true });
  t.false(f.objects.objects.has(orphan));
});

test("keys minted with no row waiting (classic, thumbnail) go to the object cleanup UPLOAD_SESSION_TTL_MS after their URL expired, in batches; one-call keys are not recorded", async (t) => {
  const grace = 3600_000;
  const f = fakeMediaApp({ uploadSessionTtlMs: grace });
  const classic = await f.app.uploads.getUploadUrl(owner, { collectionId: 1, filename: "a.png", contentType: "image/png", purpose: "media", tags: [] });
  const thumb = await f.app.uploads.getUploadUrl(owner, { collectionId: 1, filename: "t.png", contentType: "image/png", purpose: "thumbnail", tags: [] });
  await f.app.uploads.getUploadUrl(owner, { collectionId: 1, filename: "o.png", contentType: "image/png", purpose: "media", name: "one call", tags: [] });
  t.deepEqual(f.state.uploadKeys.map((k) => k.store_key), [classic.targets.store_key, thumb.targets.store_key]);
  const expiry = classic.targets.expires_at.getTime();
  t.is(await f.app.uploads.forgetUnclaimedUploads(new Date(expiry + grace - 60_000)), 0, "inside the grace");
  t.deepEqual(orphanedKeys(f), []);
  t.is(await f.app.uploads.forgetUnclaimedUploads(new Date(expiry + grace + 60_000)), 2);
  t.deepEqual(orphanedKeys(f).sort(), [classic.targets.store_key, thumb.targets.store_key].sort());
  // More than a batch: every key goes, 500 to a unit.
  const past = new Date(expiry - 3600_000);
  for (let i = 0; i < 1203; i++) await f.stores.uploadKeys.record(`store://${OWNER}/1/${i}_x.png`, OWNER, past);
  const units = f.units();
  t.is(await f.app.uploads.forgetUnclaimedUploads(new Date(expiry + grace)), 1203);
  t.is(f.units() - units, 3);
  t.deepEqual(f.state.uploadKeys, []);
});
