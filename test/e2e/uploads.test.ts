/**
 * Bytes in: media.upload, media.get_upload_url with its PUT targets (classic and one-call flows,
 * media and thumbnail purposes), and the chunked upload, through the JSON endpoint and the PUT
 * routes. Runs on the embedded store and, under test/with-backends.ts, on S3 (s3rver).
 */
import test from "ava";
import http from "node:http";
import { createHash, randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { signGrant } from "@cms/platform";
import { runJobNow, startTestSystem, storedAfterCleanup, type TestSystem, type TestUser } from "../helpers/system.js";

let sys: TestSystem;
let png: Buffer<ArrayBuffer>;
let jpeg: Buffer<ArrayBuffer>;

const USER_QUOTA = 60_000_000;
const COLLECTION_QUOTA = 30_000_000;

test.before(async () => {
  sys = await startTestSystem({ USER_STORAGE_QUOTA_BYTES: String(USER_QUOTA), COLLECTION_STORAGE_QUOTA_BYTES: String(COLLECTION_QUOTA) });
  png = Buffer.from(await sharp({ create: { width: 320, height: 200, channels: 3, background: { r: 10, g: 200, b: 90 } } }).png().toBuffer());
  jpeg = Buffer.from(await sharp({ create: { width: 640, height: 480, channels: 3, background: { r: 200, g: 30, b: 60 } } }).jpeg().toBuffer());
});
test.after.always(async () => { await sys?.stop(); });

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

async function collection(u: TestUser, name = `c${randomBytes(3).toString("hex")}`, extra: Record<string, unknown> = {}): Promise<number> {
  const res = await sys.call(u.token, { op: "collections.create", name, ...extra });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.collection.id;
}

async function stored(key: string): Promise<Buffer | undefined> {
  const obj = await sys.system.store.get(key);
  if (!obj) return undefined;
  const parts: Buffer[] = [];
  for await (const c of obj.body) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

/** Objects stored under a user's collection (embedded store only: S3 has no listing here). */
function objectsUnder(userId: string, collectionId: number): string[] | undefined {
  if (sys.system.store.kind !== "fs") return undefined;
  try { return readdirSync(join(sys.env.DATA_DIR!, "objects", userId, String(collectionId))); } catch { return []; }
}

async function mediaCount(u: TestUser, collectionId: number): Promise<number> {
  return (await sys.call(u.token, { op: "media.list", collection_id: collectionId })).body.pagination.total;
}

/** A collaborator on a restricted collection of owner, with the given flags. */
async function collaborator(owner: TestUser, collectionId: number, flags: Record<string, boolean>): Promise<TestUser> {
  const collab = await sys.user();
  const inv = await sys.call(owner.token, { op: "collaborators.invite", collection_id: collectionId, username: collab.username, ...flags });
  if (inv.status !== 200) throw new Error(JSON.stringify(inv.body));
  const acc = await sys.call(collab.token, { op: "collaborators.invite.accept", collection_id: collectionId, inviter_user_id: owner.userId });
  if (acc.status !== 200) throw new Error(JSON.stringify(acc.body));
  return collab;
}

/** A raw PUT, for what fetch cannot send (no Content-Length, a body cut short). */
// headersOnly sends the head and no body, then waits for the answer however long it takes: a
// server that refuses from the headers must answer without reading a byte of the body.
function rawPut(url: string, headers: Record<string, string | number>, body: Buffer, opts: { cutAfter?: number; headersOnly?: boolean } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = http.request(url, { method: "PUT", headers }, (res) => {
      let text = "";
      res.on("data", (d) => { text += d; });
      res.on("end", () => { resolve({ status: res.statusCode ?? 0, body: text }); if (opts.headersOnly) req.destroy(); });
      res.on("error", () => resolve({ status: res.statusCode ?? -1, body: text }));
    });
    req.on("error", () => resolve({ status: -1, body: "" }));
    if (opts.headersOnly) {
      req.flushHeaders();
    } else if (opts.cutAfter !== undefined) {
      req.write(body.subarray(0, opts.cutAfter), () => setTimeout(() => req.destroy(), 50));
    } else {
      req.end(body);
    }
  });
}

// ---- media.upload ------------------------------------------------------------------------------

test("media.upload stores the bytes, sniffs the MIME type and creates the row; whitespace and URL-safe base64 are fine", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  // PNG bytes under a .txt name, base64 in the URL-safe alphabet, wrapped in lines, no padding.
  const b64 = png.toString("base64url").replace(/(.{60})/g, "$1\r\n ");
  const res = await sys.call(u.token, { op: "media.upload", collection_id: c, filename: "picture.txt", content_base64: b64, content_length: png.length, sha256: sha(png), tags: ["Pics"] });
  t.is(res.status, 200, JSON.stringify(res.body));
  const m = res.body.media;
  t.is(m.mime_type, "image/png");
  t.is(m.viewer, "image");
  t.is(m.size_bytes, png.length);
  t.is(m.sha256, sha(png));
  t.is(m.name, "picture.txt");
  t.deepEqual(m.tags, ["pics"]);
  t.regex(m.main_url, new RegExp(`^store://${u.userId}/${c}/\\d+_picture\\.txt$`));
  t.regex(m.thumbnail_url, /_thumb\.webp$/);
  // The row exists only with its object durably stored, byte for byte.
  t.deepEqual(await stored(m.main_url), png);
  t.is((await sys.system.store.head(m.main_url))!.contentType, "image/png");
  const text = Buffer.from("# Heading\n\nSome *markdown* text.\n");
  // A sha256 in upper-case hex is the same digest.
  const md = await sys.call(u.token, { op: "media.upload", collection_id: c, name: "Readme", filename: "readme.md", content_base64: text.toString("base64"), content_length: text.length, sha256: sha(text).toUpperCase() });
  t.is(md.status, 200, JSON.stringify(md.body));
  t.is(md.body.media.sha256, sha(text));
  t.is(md.body.media.mime_type, "text/markdown");
  t.is(md.body.media.viewer, "markdown");
  t.is(md.body.media.name, "Readme");
  const plain = await sys.call(u.token, { op: "media.upload", collection_id: c, content_base64: Buffer.from("just words").toString("base64"), content_length: 10 });
  t.is(plain.body.media.mime_type, "text/plain");
  t.is(plain.body.media.viewer, "text");
  t.is(await mediaCount(u, c), 3);
});

test("media.upload refuses a bad character naming it and its position, a wrong length, a wrong sha256 and more than 100KB; nothing is stored", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const bytes = randomBytes(3000);
  const b64 = bytes.toString("base64");
  const badChar = await sys.call(u.token, { op: "media.upload", collection_id: c, content_base64: `${b64.slice(0, 10)}*${b64.slice(10)}`, content_length: bytes.length });
  t.is(badChar.status, 400);
  t.is(badChar.body.error, "invalid_request");
  t.is(badChar.body.field, "content_base64");
  t.is(badChar.body.character, "*");
  t.is(badChar.body.position, 10);
  t.regex(badChar.body.detail, /"\*" at position 10/);
  const midPad = await sys.call(u.token, { op: "media.upload", collection_id: c, content_base64: `QUJD=QUJD`, content_length: 6 });
  t.is(midPad.status, 400);
  t.is(midPad.body.position, 5);
  const wrongLength = await sys.call(u.token, { op: "media.upload", collection_id: c, content_base64: b64, content_length: bytes.length + 1 });
  t.is(wrongLength.status, 400);
  t.is(wrongLength.body.field, "content_length");
  t.is(wrongLength.body.decoded_bytes, bytes.length);
  const wrongSha = await sys.call(u.token, { op: "media.upload", collection_id: c, content_base64: b64, content_length: bytes.length, sha256: sha(Buffer.from("other")) });
  t.is(wrongSha.status, 400);
  t.is(wrongSha.body.field, "sha256");
  t.is(wrongSha.body.actual_sha256, sha(bytes));
  const big = randomBytes(102401);
  const tooBig = await sys.call(u.token, { op: "media.upload", collection_id: c, content_base64: big.toString("base64"), content_length: 102400 });
  t.is(tooBig.status, 400);
  t.is(tooBig.body.error, "invalid_request");
  t.is(tooBig.body.field, "content_base64");
  t.is((await sys.call(u.token, { op: "media.upload", collection_id: c, content_base64: big.toString("base64"), content_length: 102401 })).status, 400);
  const reserved = await sys.call(u.token, { op: "media.upload", collection_id: c, name: "__cover__", content_base64: b64, content_length: bytes.length });
  t.is(reserved.status, 400);
  t.is(reserved.body.field, "name");
  t.is(await mediaCount(u, c), 0);
  const objects = objectsUnder(u.userId, c);
  if (objects) t.deepEqual(objects, []);
  // Exactly 100KB is accepted.
  const max = randomBytes(102400);
  const ok = await sys.call(u.token, { op: "media.upload", collection_id: c, content_base64: max.toString("base64"), content_length: max.length, sha256: sha(max) });
  t.is(ok.status, 200, JSON.stringify(ok.body));
  t.is(ok.body.media.size_bytes, 102400);
  t.is(ok.body.media.mime_type, "application/octet-stream");
});

test("media.upload needs upload permission: owner or can_upload", async (t) => {
  const owner = await sys.user();
  const c = await collection(owner, "Shared uploads", { share_access_level: "restricted" });
  const reader = await collaborator(owner, c, { can_upload: false });
  const uploader = await collaborator(owner, c, { can_upload: true });
  const stranger = await sys.user();
  const body = { op: "media.upload", collection_id: c, content_base64: Buffer.from("hi there").toString("base64"), content_length: 8 };
  const denied = await sys.call(reader.token, body);
  t.is(denied.status, 403);
  t.is(denied.body.error, "insufficient_permission");
  t.is(denied.body.permission, "can_upload");
  t.true([403, 404].includes((await sys.call(stranger.token, body)).status));
  const ok = await sys.call(uploader.token, body);
  t.is(ok.status, 200);
  t.is(ok.body.media.created_by, uploader.userId);
  t.is(await mediaCount(owner, c), 1);
});

// ---- get_upload_url and the PUT targets ------------------------------------------------------

test("classic flow: byte_upload_url PUT without Authorization, then media.create with source_url=<store_key>", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const res = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, filename: "photo.jpg", content_type: "image/jpeg", content_length: jpeg.length });
  t.is(res.status, 200, JSON.stringify(res.body));
  const r = res.body;
  t.is(r.flow, "classic");
  t.is(r.method, "PUT");
  t.true(r.byte_upload_url.startsWith(`${sys.url}/storage/v1/upload/`));
  t.truthy(r.upload_url);
  if (sys.system.store.kind === "s3") t.true(r.upload_url.startsWith(sys.env.S3_ENDPOINT!), "presigned for the configured endpoint");
  else t.true(r.upload_url.startsWith(`${sys.url}/storage/v1/object/`));
  t.regex(r.store_key, new RegExp(`^store://${u.userId}/${c}/`));
  t.deepEqual(r.headers, { "Content-Type": "image/jpeg", "Content-Length": String(jpeg.length) });
  const ttl = new Date(r.expires_at).getTime() - Date.now();
  t.true(ttl > 14 * 60_000 && ttl <= 15 * 60_000, `grant lasts 15 minutes (${ttl} ms)`);
  t.is(r.max_bytes, 100 * 1024 * 1024);
  // Not yet uploaded: media.create refuses the key.
  const early = await sys.call(u.token, { op: "media.create", collection_id: c, source_url: r.store_key });
  t.is(early.status, 400);
  t.is(early.body.field, "source_url");

  const wrongType = await fetch(r.byte_upload_url, { method: "PUT", headers: { "content-type": "image/png" }, body: jpeg });
  t.is(wrongType.status, 400);
  const wrongLength = await fetch(r.byte_upload_url, { method: "PUT", headers: { "content-type": "image/jpeg" }, body: jpeg.subarray(1) });
  t.is(wrongLength.status, 400);
  t.is((await wrongLength.json()).field, "Content-Length");
  const put = await fetch(r.byte_upload_url, { method: "PUT", headers: { "content-type": "image/jpeg" }, body: jpeg });
  t.is(put.status, 200);
  const putBody = await put.json();
  t.is(putBody.size_bytes, jpeg.length);
  t.is(putBody.sha256, sha(jpeg));
  // A key holds one upload: the URL cannot overwrite it.
  t.is((await fetch(r.byte_upload_url, { method: "PUT", headers: { "content-type": "image/jpeg" }, body: jpeg })).status, 409);

  // Another user cannot adopt the key.
  const other = await sys.user();
  const oc = await collection(other);
  const stolen = await sys.call(other.token, { op: "media.create", collection_id: oc, source_url: r.store_key });
  t.is(stolen.status, 403);
  const created = await sys.call(u.token, { op: "media.create", collection_id: c, source_url: r.store_key, name: "Photo" });
  t.is(created.status, 200, JSON.stringify(created.body));
  t.is(created.body.media.main_url, r.store_key);
  t.is(created.body.media.mime_type, "image/jpeg");
  t.is(created.body.media.size_bytes, jpeg.length);
  t.deepEqual(await stored(r.store_key), jpeg);
});

test("classic flow: description and tags are refused (they belong to the one-call flow or to media.create), not silently dropped", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  for (const [field, extra] of [["description", { description: "d" }], ["tags", { tags: ["Shot"] }]] as const) {
    const res = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, filename: "pic.png", content_type: "image/png", ...extra });
    t.is(res.status, 400, JSON.stringify(res.body));
    t.is(res.body.error, "invalid_request");
    t.is(res.body.field, field);
    t.regex(res.body.detail, /name/);
    t.regex(res.body.detail, /media\.create/);
  }
  // An empty tag list asks for nothing; with a name both are kept (the one-call flow).
  t.is((await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, content_type: "image/png", tags: [] })).status, 200);
  const oneCall = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, content_type: "image/png", name: "Named", description: "d", tags: ["Shot"] });
  t.is(oneCall.status, 200, JSON.stringify(oneCall.body));
  t.is(oneCall.body.media.description, "d");
  t.deepEqual(oneCall.body.media.tags, ["shot"]);
});

test("PUT targets: Content-Length required, expired or forged or foreign grants refused, a body cut short leaves nothing, 100 MiB cap", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const res = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, filename: "data.bin", content_type: "application/octet-stream" });
  t.is(res.status, 200);
  const r = res.body;
  t.deepEqual(r.headers, { "Content-Type": "application/octet-stream" });
  const body = randomBytes(50_000);
  // No Content-Length (chunked transfer): 411.
  const chunked = await rawPut(r.byte_upload_url, { "content-type": "application/octet-stream", "transfer-encoding": "chunked" }, body);
  t.is(chunked.status, 411);
  // Over the cap: refused from the header, before any byte is stored.
  const tooBig = await rawPut(r.byte_upload_url, { "content-type": "application/octet-stream", "content-length": 100 * 1024 * 1024 + 1 }, Buffer.alloc(0), { headersOnly: true });
  t.is(tooBig.status, 413);
  // A body that stops short of its Content-Length leaves no object behind.
  await rawPut(r.byte_upload_url, { "content-type": "application/octet-stream", "content-length": body.length }, body, { cutAfter: 20_000 });
  t.is(await sys.system.store.head(r.store_key), undefined);
  // Grants: expired, forged, for another purpose.
  const secret = sys.system.config.grantSecret!;
  const expired = signGrant(secret, { purpose: "upload", exp: Date.now() - 1000, key: r.store_key, content_type: "application/octet-stream", user_id: u.userId });
  const exp = await fetch(`${sys.url}/storage/v1/upload/${expired}`, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body });
  t.is(exp.status, 403);
  t.regex((await exp.json()).detail, /expired/);
  const forged = r.byte_upload_url.replace(/.$/, (ch: string) => (ch === "A" ? "B" : "A"));
  t.is((await fetch(forged, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body })).status, 403);
  const download = signGrant(secret, { purpose: "download", exp: Date.now() + 60_000, key: r.store_key, content_type: null, filename: "x" });
  t.is((await fetch(`${sys.url}/storage/v1/upload/${download}`, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body })).status, 403);
  // An unbound length takes any Content-Length up to the cap; the embedded upload_url as well.
  const put = await fetch(r.upload_url, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body });
  t.is(put.status, 200, await put.clone().text());
  t.deepEqual(await stored(r.store_key), body);
});

test("one-call flow: the row exists at mint time and gets size, type, sha256 and thumbnails when the PUT lands", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const res = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, filename: "pic.png", content_type: "image/png", content_length: png.length, name: "My picture", tags: ["Shot"], description: "d" });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.flow, "one_call");
  const m = res.body.media;
  t.is(m.name, "My picture");
  t.is(m.main_url, res.body.store_key);
  t.is(m.size_bytes, null);
  t.deepEqual(m.tags, ["shot"]);
  t.is((await sys.call(u.token, { op: "media.get", media_id: m.id })).status, 200);
  t.is(await mediaCount(u, c), 1);
  const put = await fetch(res.body.byte_upload_url, { method: "PUT", headers: { "content-type": "image/png" }, body: png });
  t.is(put.status, 200);
  const putBody = await put.json();
  t.is(putBody.media.id, m.id);
  const got = (await sys.call(u.token, { op: "media.get", media_id: m.id })).body.media;
  t.is(got.size_bytes, png.length);
  t.is(got.mime_type, "image/png");
  t.is(got.viewer, "image");
  t.is(got.sha256, sha(png));
  t.regex(got.thumbnail_url, /_thumb\.webp$/);
  t.is(await mediaCount(u, c), 1, "no second row");

  // Reserved names are refused at mint time, and nothing is created.
  const reserved = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, content_type: "image/png", name: "__x__" });
  t.is(reserved.status, 400);
  t.is(reserved.body.field, "name");
  t.is(await mediaCount(u, c), 1);
});

test("one-call flow through upload_url (the presigned PUT on S3): finalized on read and by the upload_finalize job", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const res = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, filename: "a.jpg", content_type: "image/jpeg", content_length: jpeg.length, name: "Via upload_url" });
  t.is(res.status, 200);
  const early = await sys.call(u.token, { op: "media.download", media_id: res.body.media.id });
  t.is(early.status, 400, "no bytes yet");
  t.is(early.body.field, "media_id");
  const put = await fetch(res.body.upload_url, { method: "PUT", headers: { "content-type": "image/jpeg", "content-length": String(jpeg.length) }, body: jpeg });
  t.is(put.status, 200, await put.clone().text());
  // On read: the download finalizes the row if nothing did yet.
  const dl = await fetch(`${sys.url}/functions/v1/thirdparty-v1`, {
    method: "POST", headers: { apikey: "test-apikey", authorization: `Bearer ${u.token}`, "content-type": "application/json" },
    body: JSON.stringify({ op: "media.download", media_id: res.body.media.id }),
  });
  t.is(dl.status, 200);
  t.is(dl.headers.get("content-type"), "image/jpeg");
  t.deepEqual(Buffer.from(await dl.arrayBuffer()), jpeg);
  const got = (await sys.call(u.token, { op: "media.get", media_id: res.body.media.id })).body.media;
  t.is(got.size_bytes, jpeg.length);
  t.is(got.sha256, sha(jpeg));

  // Bytes that land where the gateway cannot see them (as a presigned S3 PUT): media.get
  // completes the row on read...
  const res2 = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, filename: "b.png", content_type: "image/png", name: "Unseen" });
  t.is((await sys.call(u.token, { op: "media.get", media_id: res2.body.media.id })).body.media.size_bytes, null, "no bytes yet");
  await sys.system.store.put(res2.body.store_key, png, { contentType: "image/png", contentLength: png.length });
  const onRead = (await sys.call(u.token, { op: "media.get", media_id: res2.body.media.id })).body.media;
  t.is(onRead.size_bytes, png.length);
  t.is(onRead.mime_type, "image/png");
  t.is(onRead.sha256, sha(png));
  t.regex(onRead.thumbnail_url, /_thumb\.webp$/);
  // ...and the upload_finalize job completes rows nobody reads.
  const res3 = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, filename: "c.png", content_type: "image/png", name: "Unread" });
  await sys.system.store.put(res3.body.store_key, png, { contentType: "image/png", contentLength: png.length });
  // (The job's own 30 s timer may get there first; either way the row is complete before the read.)
  const job = await runJobNow(sys.system, "upload_finalize", {});
  t.is(typeof job.finalized, "number", JSON.stringify(job));
  const [{ size_bytes: sizeBeforeRead }] = await sys.system.dbOf("media")!("media").where({ id: res3.body.media.id }).select("size_bytes");
  t.is(Number(sizeBeforeRead), png.length);
  const fin = (await sys.call(u.token, { op: "media.get", media_id: res3.body.media.id })).body.media;
  t.is(fin.size_bytes, png.length);
  t.is(fin.sha256, sha(png));
});

// Serial (before the concurrent tests): the job runs with a clock far ahead, for every row.
test.serial("one-call rows whose bytes never arrive are removed once the grant is long expired", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const res = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, filename: "never.bin", name: "Never uploaded" });
  t.is(res.status, 200);
  const keep = await sys.call(u.token, { op: "media.text_note.add", collection_id: c, name: "stays" });
  // Within the grant's life the row waits.
  await runJobNow(sys.system, "upload_finalize", {});
  t.is((await sys.call(u.token, { op: "media.get", media_id: res.body.media.id })).status, 200);
  const later = new Date(new Date(res.body.expires_at).getTime() + 11 * 60_000).toISOString();
  const job = await runJobNow(sys.system, "upload_finalize", { now: later });
  t.true((job.abandoned as number) >= 1, JSON.stringify(job));
  t.is((await sys.call(u.token, { op: "media.get", media_id: res.body.media.id })).status, 404);
  const left = await sys.call(u.token, { op: "media.list", collection_id: c });
  t.deepEqual(left.body.media.map((m: any) => [m.id, m.position]), [[keep.body.media.id, 0]]);
});

test("purpose=thumbnail: PUT, set thumbnail_url, media.thumbnail_finalize; name/tags and non-images refused", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const note = await sys.call(u.token, { op: "media.text_note.add", collection_id: c, name: "With thumb" });
  const res = await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, purpose: "thumbnail", content_type: "image/png", content_length: png.length });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.purpose, "thumbnail");
  t.is(res.body.media, undefined);
  t.is(await mediaCount(u, c), 1);
  t.is((await fetch(res.body.byte_upload_url, { method: "PUT", headers: { "content-type": "image/png" }, body: png })).status, 200);
  const fin = await sys.call(u.token, { op: "media.thumbnail_finalize", media_id: note.body.media.id, thumbnail_url: res.body.store_key });
  t.is(fin.status, 200, JSON.stringify(fin.body));
  t.regex(fin.body.media.thumbnail_url, /_thumb\.webp$/);
  t.is((await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, purpose: "thumbnail", content_type: "image/png", name: "x" })).body.field, "name");
  t.is((await sys.call(u.token, { op: "media.get_upload_url", collection_id: c, purpose: "thumbnail", content_type: "application/pdf" })).status, 400);
  const stranger = await sys.user();
  t.true([403, 404].includes((await sys.call(stranger.token, { op: "media.get_upload_url", collection_id: c, content_type: "image/png" })).status));
});

// ---- chunked upload ----------------------------------------------------------------------------

async function begin(u: TestUser, fields: Record<string, unknown>) {
  return sys.call(u.token, { op: "media.upload_begin", ...fields });
}
async function chunk(u: TestUser, uploadId: string, index: number, bytes: Buffer, extra: Record<string, unknown> = {}) {
  return sys.call(u.token, { op: "media.upload_chunk", upload_id: uploadId, index, content_base64: bytes.toString("base64"), content_length: bytes.length, ...extra });
}
/** Chunk rows of a session in index order (current ones only with stored: true). */
async function chunkRows(uploadId: string, opts: { stored?: boolean } = {}): Promise<Array<{ idx: number; store_key: string | null; inline: boolean }>> {
  const q = sys.system.dbOf("media")!("upload_chunks").where({ upload_id: uploadId }).orderBy("idx");
  if (opts.stored) q.where({ state: "stored" });
  return q.select("idx", "store_key", sys.system.dbOf("media")!.raw("data IS NOT NULL AS inline"));
}

/** Store keys of a session's chunk objects (chunks over 64 KiB; smaller ones are kept inline). */
async function chunkKeys(uploadId: string, opts: { stored?: boolean } = {}): Promise<string[]> {
  return (await chunkRows(uploadId, opts)).flatMap((r) => (r.store_key ? [r.store_key] : []));
}

/** Whether every key has left the store within a few seconds (removal goes through the outbox). */
async function allRemoved(keys: string[]): Promise<boolean> {
  return (await storedAfterCleanup(sys.system, keys)).length === 0;
}

function split(bytes: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.subarray(i, i + size));
  return out;
}

test("chunked upload: begin, chunks in any order, a re-sent index replaces, finish creates the item as media.create does; a second finish returns it again", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const file = Buffer.concat([jpeg, randomBytes(40_000)]);
  const b = await begin(u, { collection_id: c, filename: "big photo.jpg", content_type: "image/jpeg", content_length: file.length, sha256: sha(file), name: "Chunked", tags: ["Big"] });
  t.is(b.status, 200, JSON.stringify(b.body));
  t.regex(b.body.upload_id, /^[0-9a-f-]{36}$/);
  t.is(b.body.chunk_bytes, 16384);
  const parts = split(file, 16384);
  t.is(b.body.chunk_count, parts.length);
  const id = b.body.upload_id;
  // Index 1 first with the wrong bytes, then the right ones: the re-sent index replaces.
  t.is((await chunk(u, id, 1, randomBytes(parts[1]!.length))).status, 200);
  for (let i = parts.length - 1; i >= 0; i--) {
    const r = await chunk(u, id, i, parts[i]!, { sha256: sha(parts[i]!) });
    t.is(r.status, 200, JSON.stringify(r.body));
    t.is(r.body.index, i);
    // Index 1 was sent before: counted once.
    const sent = parts.length - i + (i > 1 ? 1 : 0);
    t.like(r.body, { received_chunks: sent, expected_bytes: file.length });
  }
  // Chunks of 16 KiB live in PostgreSQL rows, not in a process: any replica can finish.
  const mdb = sys.system.dbOf("media")!;
  const rows = await chunkRows(id);
  t.deepEqual(rows.map((r) => [r.idx, r.inline]), parts.map((_, i) => [i, true]));
  const fin = await sys.call(u.token, { op: "media.upload_finish", upload_id: id, content_length: file.length, sha256: sha(file).toUpperCase() });
  t.is(fin.status, 200, JSON.stringify(fin.body));
  t.is(fin.body.chunked_upload, true);
  const m = fin.body.media;
  t.is(m.name, "Chunked");
  t.deepEqual(m.tags, ["big"]);
  t.is(m.mime_type, "image/jpeg");
  t.is(m.viewer, "image");
  t.is(m.size_bytes, file.length);
  t.is(m.sha256, sha(file));
  t.regex(m.thumbnail_url, /_thumb\.webp$/);
  t.deepEqual(await stored(m.main_url), file);
  t.is(Number((await mdb("upload_chunks").where({ upload_id: id }).count("* as n"))[0]!.n), 0, "chunks are dropped once finished");
  const again = await sys.call(u.token, { op: "media.upload_finish", upload_id: id });
  t.is(again.status, 200);
  t.is(again.body.media.id, m.id);
  t.is(again.body.chunked_upload, true);
  t.is(await mediaCount(u, c), 1);
  // A finished session takes no more chunks; other users do not see it.
  t.is((await chunk(u, id, 0, parts[0]!)).status, 400);
  const other = await sys.user();
  t.is((await sys.call(other.token, { op: "media.upload_finish", upload_id: id })).status, 404);
});

test("chunked upload: a failing chunk is not stored; finish lists missing indexes, stays open and stores nothing; a wrong whole-file sha256 too", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const file = randomBytes(40_000);
  const parts = split(file, 16384);
  const b = await begin(u, { collection_id: c, filename: "blob.bin", content_length: file.length });
  const id = b.body.upload_id;
  const badSha = await chunk(u, id, 0, parts[0]!, { sha256: sha(Buffer.from("nope")) });
  t.is(badSha.status, 400);
  t.is(badSha.body.field, "sha256");
  const badLen = await sys.call(u.token, { op: "media.upload_chunk", upload_id: id, index: 2, content_base64: parts[2]!.toString("base64"), content_length: parts[2]!.length + 1 });
  t.is(badLen.status, 400);
  t.is(badLen.body.field, "content_length");
  const badChar = await sys.call(u.token, { op: "media.upload_chunk", upload_id: id, index: 2, content_base64: `!${parts[2]!.toString("base64")}`, content_length: parts[2]!.length });
  t.is(badChar.status, 400);
  t.is(badChar.body.position, 0);
  const overflow = await chunk(u, id, 5, randomBytes(40_001 - 0));
  t.is(overflow.status, 400, "more than the declared total");
  t.is((await chunk(u, id, 1, parts[1]!)).status, 200);
  const missing = await sys.call(u.token, { op: "media.upload_finish", upload_id: id });
  t.is(missing.status, 400);
  t.is(missing.body.error, "invalid_request");
  t.deepEqual(missing.body.missing_indexes, [0, 2]);
  t.is(missing.body.received_bytes, parts[1]!.length);
  t.is(await mediaCount(u, c), 0);
  const objects = objectsUnder(u.userId, c);
  if (objects) t.deepEqual(objects, []);
  t.is((await chunk(u, id, 0, parts[0]!)).status, 200);
  t.is((await chunk(u, id, 2, parts[2]!)).status, 200);
  const wrongSha = await sys.call(u.token, { op: "media.upload_finish", upload_id: id, sha256: sha(Buffer.from("x")) });
  t.is(wrongSha.status, 400);
  t.is(wrongSha.body.field, "sha256");
  t.deepEqual(wrongSha.body.missing_indexes, []);
  t.is(wrongSha.body.actual_sha256, sha(file));
  const wrongLen = await sys.call(u.token, { op: "media.upload_finish", upload_id: id, content_length: file.length - 1 });
  t.is(wrongLen.status, 400);
  t.is(wrongLen.body.field, "content_length");
  t.is(await mediaCount(u, c), 0);
  if (objects) t.deepEqual(objectsUnder(u.userId, c), []);
  const ok = await sys.call(u.token, { op: "media.upload_finish", upload_id: id, sha256: sha(file) });
  t.is(ok.status, 200, JSON.stringify(ok.body));
  t.is(ok.body.media.name, "blob.bin");
  t.deepEqual(await stored(ok.body.media.main_url), file);
});

test("chunked upload: chunks over 64 KiB are store objects; sent in parallel, the same index several times at once; replaced and finished objects are removed", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const file = randomBytes(650_000);
  const parts = split(file, 100_000); // six objects and a 50,000-byte tail kept inline
  const b = await begin(u, { collection_id: c, filename: "parallel.bin", content_length: file.length, sha256: sha(file) });
  const id = b.body.upload_id;
  // Every index at once, and index 3 three more times (twice with other bytes first).
  const sends = [
    chunk(u, id, 3, randomBytes(parts[3]!.length)), chunk(u, id, 3, randomBytes(parts[3]!.length)),
    ...parts.map((p, i) => chunk(u, id, i, p)),
  ];
  const answers = await Promise.all(sends);
  t.deepEqual(answers.map((a) => a.status), sends.map(() => 200), JSON.stringify(answers.find((a) => a.status !== 200)?.body));
  const before = await chunkKeys(id);
  t.is((await chunk(u, id, 3, parts[3]!)).status, 200);
  const rows = await chunkRows(id);
  t.deepEqual(rows.map((r) => [r.idx, r.inline]), parts.map((p, i) => [i, p.length <= 65536]), "one row per index once every send has settled");
  const keys = await chunkKeys(id);
  t.is(keys.length, 6);
  t.deepEqual(await Promise.all(keys.map((k) => stored(k))), parts.slice(0, 6));
  const replaced = before.filter((k) => !keys.includes(k));
  t.is(replaced.length, 1);
  t.true(await allRemoved(replaced), "the replaced object of index 3 is removed");
  const fin = await sys.call(u.token, { op: "media.upload_finish", upload_id: id });
  t.is(fin.status, 200, JSON.stringify(fin.body));
  t.is(fin.body.media.sha256, sha(file));
  t.deepEqual(await stored(fin.body.media.main_url), file);
  t.is((await chunkRows(id)).length, 0);
  t.true(await allRemoved(keys), "chunk objects are removed once finished");
});

test("chunked upload: a chunk object lost from the store is reported as a missing index at finish", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const file = randomBytes(300_000);
  const parts = split(file, 100_000);
  const b = await begin(u, { collection_id: c, filename: "lost.bin", content_length: file.length });
  const id = b.body.upload_id;
  for (let i = 0; i < parts.length; i++) t.is((await chunk(u, id, i, parts[i]!)).status, 200);
  await sys.system.store.delete([(await chunkKeys(id))[1]!]);
  const fin = await sys.call(u.token, { op: "media.upload_finish", upload_id: id });
  t.is(fin.status, 400);
  t.deepEqual(fin.body.missing_indexes, [1]);
  t.is(await mediaCount(u, c), 0);
  t.is((await chunk(u, id, 1, parts[1]!)).status, 200);
  const again = await sys.call(u.token, { op: "media.upload_finish", upload_id: id });
  t.is(again.status, 200, JSON.stringify(again.body));
  t.deepEqual(await stored(again.body.media.main_url), file);
});

test("chunked upload: 25MB in chunks of up to 8 MiB", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const file = randomBytes(25 * 1024 * 1024);
  const b = await begin(u, { collection_id: c, filename: "large.bin", content_length: file.length, sha256: sha(file) });
  t.is(b.status, 200, JSON.stringify(b.body));
  t.is(b.body.max_chunk_bytes, 8 * 1024 * 1024);
  const parts = split(file, 8 * 1024 * 1024);
  t.is(parts.length, 4);
  for (let i = 0; i < parts.length; i++) t.is((await chunk(u, b.body.upload_id, i, parts[i]!)).status, 200);
  t.is((await chunk(u, b.body.upload_id, 0, randomBytes(8 * 1024 * 1024 + 1))).status, 400, "over 8 MiB");
  const fin = await sys.call(u.token, { op: "media.upload_finish", upload_id: b.body.upload_id });
  t.is(fin.status, 200, JSON.stringify(fin.body));
  t.is(fin.body.media.size_bytes, file.length);
  t.is(fin.body.media.sha256, sha(file));
  const head = await sys.system.store.head(fin.body.media.main_url);
  t.is(head!.size, file.length);
});

// Serial (before the concurrent tests): the job runs with a clock far ahead, for every key.
test.serial("an object PUT under a classic or thumbnail key that nothing took up is removed by upload_cleanup a day after its URL expired; one an item names stays", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const putUnder = async (fields: Record<string, unknown>) => {
    const minted = await sys.must(u.token, { op: "media.get_upload_url", collection_id: c, content_type: "image/png", content_length: png.length, ...fields });
    t.is((await fetch(minted.byte_upload_url, { method: "PUT", headers: { "content-type": "image/png" }, body: png })).status, 200);
    return minted.store_key as string;
  };
  const [unusedFile, usedFile, unusedThumb] = [await putUnder({}), await putUnder({}), await putUnder({ purpose: "thumbnail" })];
  const item = (await sys.must(u.token, { op: "media.create", collection_id: c, source_url: usedFile })).media;

  const early = await runJobNow(sys.system, "upload_cleanup", {});
  t.is(early.unclaimed_uploads, 0, JSON.stringify(early));
  t.deepEqual(await storedAfterCleanup(sys.system, [unusedFile, unusedThumb], 200), [unusedFile, unusedThumb], "kept while media.create may still take them up");
  const day = await runJobNow(sys.system, "upload_cleanup", { now: new Date(Date.now() + 25 * 3600_000).toISOString() });
  t.true((day.unclaimed_uploads as number) >= 3, JSON.stringify(day));
  t.deepEqual(await storedAfterCleanup(sys.system, [unusedFile, unusedThumb, usedFile]), [usedFile], "only the object an item names stays");
  const download = await fetch(`${sys.url}/storage/v1/media/${item.id}/main`, { headers: { apikey: "test-apikey", authorization: `Bearer ${u.token}` } });
  t.is(download.status, 200);
  t.deepEqual(Buffer.from(await download.arrayBuffer()), png);
  const late = await sys.call(u.token, { op: "media.create", collection_id: c, source_url: unusedFile });
  t.is(late.status, 400, "a removed upload cannot be taken up any more");
  t.regex(late.body.detail, /removed a day after its URL expired/);
});

// Serial (before the concurrent tests): the job runs with a clock far ahead, for every session.
test.serial("chunked upload: abort discards; expired sessions and their chunks are cleaned by the upload_cleanup job", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const bytes = randomBytes(100_000); // over 64 KiB: an object in the store
  const a = await begin(u, { collection_id: c, content_length: bytes.length });
  t.is((await chunk(u, a.body.upload_id, 0, bytes)).status, 200);
  const abortedKeys = await chunkKeys(a.body.upload_id);
  t.is(abortedKeys.length, 1);
  const abort = await sys.call(u.token, { op: "media.upload_abort", upload_id: a.body.upload_id });
  t.is(abort.status, 200);
  t.is(abort.body.aborted, true);
  t.is(abort.body.discarded_chunks, 1);
  t.true(await allRemoved(abortedKeys), "an aborted session's chunk objects are removed");
  t.is((await chunk(u, a.body.upload_id, 0, bytes)).status, 404);
  t.is((await sys.call(u.token, { op: "media.upload_finish", upload_id: a.body.upload_id })).status, 404);
  t.is(await mediaCount(u, c), 0);

  const b = await begin(u, { collection_id: c, content_length: bytes.length });
  t.is((await chunk(u, b.body.upload_id, 0, bytes)).status, 200);
  const ttl = new Date(b.body.expires_at).getTime() - Date.now();
  t.true(ttl > 23 * 3600_000 && ttl <= 24 * 3600_000, "sessions last 24 hours");
  const mdb = sys.system.dbOf("media")!;
  const expiringKeys = await chunkKeys(b.body.upload_id);
  t.is(expiringKeys.length, 1);
  await runJobNow(sys.system, "upload_cleanup", {});
  t.truthy(await mdb("upload_sessions").where({ id: b.body.upload_id }).first(), "an open session survives before its expiry");
  const job = await runJobNow(sys.system, "upload_cleanup", { now: new Date(Date.now() + 25 * 3600_000).toISOString() });
  t.true((job.expired_upload_sessions as number) >= 1, JSON.stringify(job));
  t.is(await mdb("upload_sessions").where({ id: b.body.upload_id }).first(), undefined);
  t.is(Number((await mdb("upload_chunks").where({ upload_id: b.body.upload_id }).count("* as n"))[0]!.n), 0);
  t.true(await allRemoved(expiringKeys), "an expired session's chunk objects are removed");
  t.is((await chunk(u, b.body.upload_id, 0, bytes)).status, 404);
});

// Serial too: the job runs with a clock far ahead, for every session.
test.serial("chunked upload: a finished session outlives its expiry, still answering upload_finish with its item; the upload_cleanup job removes it after 30 days", async (t) => {
  const u = await sys.user();
  const c = await collection(u);
  const bytes = randomBytes(20_000);
  const b = await begin(u, { collection_id: c, content_length: bytes.length, name: "Kept" });
  t.is(b.status, 200, JSON.stringify(b.body));
  const id = b.body.upload_id;
  for (const [i, part] of split(bytes, 16384).entries()) t.is((await chunk(u, id, i, part)).status, 200);
  const fin = await sys.call(u.token, { op: "media.upload_finish", upload_id: id });
  t.is(fin.status, 200, JSON.stringify(fin.body));
  const mdb = sys.system.dbOf("media")!;

  await runJobNow(sys.system, "upload_cleanup", { now: new Date(Date.now() + 25 * 3600_000).toISOString() });
  t.truthy(await mdb("upload_sessions").where({ id }).first(), "a finished session survives its expiry");
  const again = await sys.call(u.token, { op: "media.upload_finish", upload_id: id });
  t.is(again.status, 200, JSON.stringify(again.body));
  t.is(again.body.media.id, fin.body.media.id);
  t.is(await mediaCount(u, c), 1);

  const job = await runJobNow(sys.system, "upload_cleanup", { now: new Date(new Date(b.body.expires_at).getTime() + 31 * 24 * 3600_000).toISOString() });
  t.true((job.expired_upload_sessions as number) >= 1, JSON.stringify(job));
  t.is(await mdb("upload_sessions").where({ id }).first(), undefined);
  t.is((await sys.call(u.token, { op: "media.upload_finish", upload_id: id })).status, 404);
  t.is((await sys.call(u.token, { op: "media.get", media_id: fin.body.media.id })).status, 200, "the item stays");
});

test("upload_begin checks upload permission and both storage quotas (open sessions count)", async (t) => {
  const owner = await sys.user();
  const c1 = await collection(owner, "Quota one", { share_access_level: "restricted" });
  const c2 = await collection(owner);
  const c3 = await collection(owner);
  const reader = await collaborator(owner, c1, { can_upload: false });
  const denied = await begin(reader, { collection_id: c1, content_length: 10 });
  t.is(denied.status, 403);
  t.is(denied.body.permission, "can_upload");
  t.is((await begin(owner, { collection_id: c1, content_length: 10, name: "__x__" })).status, 400);

  t.is((await begin(owner, { collection_id: c1, content_length: 20_000_000 })).status, 200);
  const coll = await begin(owner, { collection_id: c1, content_length: 10_000_001 });
  t.is(coll.status, 400);
  t.is(coll.body.error, "invalid_request");
  t.is(coll.body.field, "content_length");
  t.is(coll.body.quota, "collection_storage");
  t.is(coll.body.limit_bytes, COLLECTION_QUOTA);
  t.is((await begin(owner, { collection_id: c1, content_length: 10_000_000 })).status, 200, "exactly at the collection quota");
  t.is((await begin(owner, { collection_id: c2, content_length: 25_000_000 })).status, 200);
  const user = await begin(owner, { collection_id: c3, content_length: 5_000_001 });
  t.is(user.status, 400);
  t.is(user.body.quota, "user_storage");
  t.is(user.body.used_bytes, 55_000_000);
  // A collaborator's upload counts against the same quotas.
  const uploader = await collaborator(owner, c1, { can_upload: true });
  const collab = await begin(uploader, { collection_id: c1, content_length: 1 });
  t.is(collab.status, 400);
});
