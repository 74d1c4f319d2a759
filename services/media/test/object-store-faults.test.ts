/**
 * The object store failing under an upload, against in-memory fakes (an object store test double
 * that fails on demand): a failed write leaves no row and nothing referenced; when the row fails
 * after the bytes were stored and the store then also fails their removal, the orphan goes to the
 * outbox (media.objects.orphaned) and the cleanup removes it once the store answers again.
 */
import test from "ava";
import { createHash } from "node:crypto";
import { AppError, EVENTS, isTransientFailure, runInCallScope } from "@cms/platform";
import { callerOf, fakeMediaApp } from "./fakes.js";

const owner = callerOf("00000000-0000-4000-8000-000000000001");
const bytes = Buffer.from("hello, object store");
const upload = { collectionId: 1, filename: "hello.txt", contentBase64: bytes.toString("base64"), contentLength: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex"), tags: [] };

/** A store error as the S3 client raises it when the server is down. */
const storeDown = () => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9000"), { code: "ECONNREFUSED" });

test("a write the store fails: the upload fails as a transient error, with no row and no object", async (t) => {
  const f = fakeMediaApp();
  f.objects.store.put = async () => { throw storeDown(); };
  const err = await t.throwsAsync(f.app.uploads.uploadMedia(owner, upload));
  t.true(isTransientFailure(err), "answered as 503 unavailable, safe to retry");
  t.deepEqual(f.state.media, []);
  t.is(f.objects.objects.size, 0);
  t.deepEqual(f.events, []);
});

test("stored bytes whose row fails, and whose removal the store fails too: an orphan event, and the cleanup removes it later", async (t) => {
  const f = fakeMediaApp();
  const insert = f.stores.media.insert;
  f.stores.media.insert = async () => { throw new Error("the row could not be written"); };
  const del = f.objects.store.delete;
  f.objects.store.delete = async () => { throw storeDown(); };
  await t.throwsAsync(f.app.uploads.uploadMedia(owner, upload), { message: /could not be written/ });
  t.deepEqual(f.state.media, [], "no row references the object");
  const [key] = [...f.objects.objects.keys()];
  t.truthy(key, "the bytes stayed in the store (an orphan)");
  const orphaned = f.events.filter((e) => e.type === EVENTS.objectsOrphaned);
  t.deepEqual(orphaned.map((e) => e.payload.store_keys), [[key]]);

  // The store answers again: the object-cleanup consumer (run here as the bus would) removes it.
  f.stores.media.insert = insert;
  f.objects.store.delete = del;
  const outcome = await f.app.objects.removeOrphaned(orphaned[0]!.payload.store_keys as string[]);
  t.deepEqual(outcome, { removed: 1, kept: 0 });
  t.is(f.objects.objects.size, 0);
  // And uploads work again.
  const row = await f.app.uploads.uploadMedia(owner, upload);
  t.is(row.sha256, upload.sha256);
});

test("an upload whose call ended while its bytes were stored, and whose removal the store fails: the orphan is still recorded", async (t) => {
  const f = fakeMediaApp();
  f.objects.store.delete = async () => { throw storeDown(); };
  // The caller's deadline passes while the bytes are written: the row's unit commits nothing.
  const call = new AbortController();
  f.objects.hooks.onPut = () => { call.abort(); };
  const err = await t.throwsAsync(runInCallScope({ principal: { internal: true }, service: "media", signal: call.signal }, () => f.app.uploads.uploadMedia(owner, upload)), { instanceOf: AppError });
  t.is(err.code, "unavailable");
  t.deepEqual(f.state.media, []);
  const [key] = [...f.objects.objects.keys()];
  t.truthy(key, "the bytes stayed in the store");
  // Before, the orphan's record was a unit of the ended call too, refused: nothing would ever remove the object.
  t.deepEqual(f.events.filter((e) => e.type === EVENTS.objectsOrphaned).map((e) => e.payload.store_keys), [[key]]);
});
