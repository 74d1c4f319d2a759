/**
 * Bytes out and drop links: media.download (raw bytes at the JSON endpoint, Range, ETag),
 * media.download_url links, the chunked download, describe's proxy URLs, and media.drop_link's
 * page and form. Runs on the embedded store and, under test/with-backends.ts, on S3 (s3rver).
 */
import test from "ava";
import { createHash, randomBytes } from "node:crypto";
import net from "node:net";
import sharp from "sharp";
import { signGrant } from "@cms/platform";
import { API_KEY, startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";

let sys: TestSystem;
let owner: TestUser;
let c: number;
let png: Buffer<ArrayBuffer>;
let file: Buffer;
let fileId: number;
let imageId: number;

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

async function upload(u: TestUser, collectionId: number, bytes: Buffer, filename: string): Promise<Record<string, any>> {
  const b = await sys.call(u.token, { op: "media.upload_begin", collection_id: collectionId, filename, content_length: bytes.length });
  if (b.status !== 200) throw new Error(JSON.stringify(b.body));
  for (let i = 0, n = 0; i < bytes.length; i += 1024 * 1024, n++) {
    const part = bytes.subarray(i, i + 1024 * 1024);
    const r = await sys.call(u.token, { op: "media.upload_chunk", upload_id: b.body.upload_id, index: n, content_base64: part.toString("base64"), content_length: part.length });
    if (r.status !== 200) throw new Error(JSON.stringify(r.body));
  }
  const f = await sys.call(u.token, { op: "media.upload_finish", upload_id: b.body.upload_id });
  if (f.status !== 200) throw new Error(JSON.stringify(f.body));
  return f.body.media;
}

function download(token: string | undefined, mediaId: number, headers: Record<string, string> = {}) {
  return fetch(`${sys.url}/functions/v1/thirdparty-v1`, {
    method: "POST",
    headers: { apikey: API_KEY, "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: JSON.stringify({ op: "media.download", media_id: mediaId }),
  });
}

test.before(async () => {
  sys = await startTestSystem();
  owner = await sys.user();
  c = (await sys.call(owner.token, { op: "collections.create", name: "Downloads", share_access_level: "restricted" })).body.collection.id;
  png = Buffer.from(await sharp({ create: { width: 400, height: 300, channels: 3, background: { r: 250, g: 180, b: 0 } } }).png().toBuffer());
  // Text bytes so that the sniffed type is stable (text/plain), 3 MB: several 16KB chunks.
  file = Buffer.from(Array.from({ length: 3_000_000 }, (_, i) => String.fromCharCode(97 + (i % 26))).join(""));
  fileId = (await upload(owner, c, file, "letters.txt")).id;
  const img = await sys.call(owner.token, { op: "media.upload", collection_id: c, filename: "dot.png", content_base64: png.toString("base64"), content_length: png.length });
  if (img.status !== 200) throw new Error(JSON.stringify(img.body));
  imageId = img.body.media.id;
});
test.after.always(async () => { await sys?.stop(); });

test("media.download answers the raw bytes with Content-Type, Content-Length and ETag", async (t) => {
  const res = await download(owner.token, fileId);
  t.is(res.status, 200);
  t.is(res.headers.get("content-type"), "text/plain");
  t.is(res.headers.get("content-length"), String(file.length));
  t.is(res.headers.get("accept-ranges"), "bytes");
  t.regex(res.headers.get("etag") ?? "", /^"[^"]+"$/);
  t.regex(res.headers.get("content-disposition") ?? "", /^attachment; filename="letters\.txt"/);
  t.truthy(res.headers.get("x-ratelimit-limit"));
  const body = Buffer.from(await res.arrayBuffer());
  t.is(sha(body), sha(file));
  const img = await download(owner.token, imageId);
  t.is(img.headers.get("content-type"), "image/png");
  t.deepEqual(Buffer.from(await img.arrayBuffer()), png);
});

test("media.download: Range gives 206 with Content-Range, past the end 416, If-None-Match 304", async (t) => {
  const first = await download(owner.token, fileId, { range: "bytes=0-99" });
  t.is(first.status, 206);
  t.is(first.headers.get("content-range"), `bytes 0-99/${file.length}`);
  t.is(first.headers.get("content-length"), "100");
  t.deepEqual(Buffer.from(await first.arrayBuffer()), file.subarray(0, 100));
  const mid = await download(owner.token, fileId, { range: "bytes=1000000-1000009" });
  t.deepEqual(Buffer.from(await mid.arrayBuffer()), file.subarray(1_000_000, 1_000_010));
  const tail = await download(owner.token, fileId, { range: "bytes=-10" });
  t.is(tail.status, 206);
  t.deepEqual(Buffer.from(await tail.arrayBuffer()), file.subarray(file.length - 10));
  const open = await download(owner.token, fileId, { range: `bytes=${file.length - 5}-` });
  t.is((await open.arrayBuffer()).byteLength, 5);
  const past = await download(owner.token, fileId, { range: `bytes=${file.length}-` });
  t.is(past.status, 416);
  t.is(past.headers.get("content-range"), `bytes */${file.length}`);
  await past.arrayBuffer();
  const etag = (await download(owner.token, fileId, { range: "bytes=0-0" })).headers.get("etag")!;
  const cached = await download(owner.token, fileId, { "if-none-match": etag });
  t.is(cached.status, 304);
  t.is(cached.headers.get("etag"), etag);
  const stale = await download(owner.token, fileId, { range: "bytes=0-9", "if-range": '"not-the-tag"' });
  t.is(stale.status, 200, "If-Range with another tag sends the whole file");
  t.is((await stale.arrayBuffer()).byteLength, file.length);
});

test("media.download refuses text notes, sub-collection links and external links with a clear 400; needs the bearer and read access", async (t) => {
  const note = await sys.call(owner.token, { op: "media.text_note.add", collection_id: c, name: "A note", text: "hello" });
  const res = await download(owner.token, note.body.media.id);
  t.is(res.status, 400);
  const body = await res.json();
  t.is(body.error, "invalid_request");
  t.is(body.kind, "text_note");
  t.regex(body.detail, /text note/);
  const sub = await sys.call(owner.token, { op: "collections.create", name: "Child", parent_collection_id: c });
  t.is(sub.status, 200, JSON.stringify(sub.body));
  const links = await sys.call(owner.token, { op: "media.list", collection_id: c, viewer: "collection" });
  const linkRow = links.body.media[0];
  const lr = await download(owner.token, linkRow.id);
  t.is(lr.status, 400);
  t.is((await lr.json()).kind, "collection_link");
  const ext = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: "https://vimeo.com/76979871", thumbnail_url: "https://example.com/t.jpg" });
  const er = await download(owner.token, ext.body.media.id);
  t.is(er.status, 400);
  t.is((await er.json()).kind, "external_link");
  const anon = await download(undefined, fileId);
  t.is(anon.status, 401);
  const stranger = await sys.user();
  t.true([403, 404].includes((await download(stranger.token, fileId)).status));
  const noScope = await sys.user({ scopes: ["media:write"] });
  t.is((await download(noScope.token, fileId)).status, 403);
});

test("media.download_url: a short-lived link on the API origin that needs no header, with Range; expired, forged and foreign grants refused", async (t) => {
  const res = await sys.call(owner.token, { op: "media.download_url", media_id: fileId });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.true(res.body.url.startsWith(`${sys.url}/storage/v1/download/`));
  const ttl = new Date(res.body.expires_at).getTime() - Date.now();
  t.true(ttl > 0 && ttl <= 5 * 60_000);
  t.is(res.body.size_bytes, file.length);
  const got = await fetch(res.body.url);
  t.is(got.status, 200);
  t.is(got.headers.get("content-type"), "text/plain");
  t.is(sha(Buffer.from(await got.arrayBuffer())), sha(file));
  const part = await fetch(res.body.url, { headers: { range: "bytes=10-19" } });
  t.is(part.status, 206);
  t.deepEqual(Buffer.from(await part.arrayBuffer()), file.subarray(10, 20));
  const head = await fetch(res.body.url, { method: "HEAD" });
  t.is(head.status, 200);
  t.is(head.headers.get("content-length"), String(file.length));
  const secret = sys.system.config.grantSecret!;
  const key = (await sys.call(owner.token, { op: "media.get", media_id: fileId })).body.media.main_url;
  const expired = signGrant(secret, { purpose: "download", exp: Date.now() - 1, key, content_type: "text/plain", filename: "x.txt" });
  const exp = await fetch(`${sys.url}/storage/v1/download/${expired}/x.txt`);
  t.is(exp.status, 403);
  t.regex((await exp.json()).detail, /expired/);
  const token = res.body.url.split("/storage/v1/download/")[1].split("/")[0] as string;
  const forged = token.replace(/\.(.)/, (_m: string, ch: string) => `.${ch === "A" ? "B" : "A"}`);
  t.is((await fetch(`${sys.url}/storage/v1/download/${forged}/letters.txt`)).status, 403);
  const upload = signGrant(secret, { purpose: "upload", exp: Date.now() + 60_000, key, content_type: "text/plain", user_id: owner.userId });
  t.is((await fetch(`${sys.url}/storage/v1/download/${upload}`)).status, 403, "an upload grant is not a download link");
  const note = await sys.call(owner.token, { op: "media.text_note.add", collection_id: c, name: "n" });
  t.is((await sys.call(owner.token, { op: "media.download_url", media_id: note.body.media.id })).status, 400);
});

test("chunked download: begin gives the session facts; chunks in any order, any number of times, reassemble to the sha256", async (t) => {
  const b = await sys.call(owner.token, { op: "media.download_begin", media_id: fileId });
  t.is(b.status, 200, JSON.stringify(b.body));
  const d = b.body;
  t.regex(d.download_id, /^[0-9a-f-]{36}$/);
  t.is(d.content_type, "text/plain");
  t.is(d.content_length, file.length);
  t.is(d.sha256, sha(file));
  t.is(d.chunk_bytes, 16384);
  t.is(d.chunk_count, Math.ceil(file.length / 16384));
  const chunks: Buffer[] = new Array(d.chunk_count);
  // Backwards, and the last one twice.
  for (let i = d.chunk_count - 1; i >= 0; i--) {
    const r = await sys.call(owner.token, { op: "media.download_chunk", download_id: d.download_id, index: i });
    t.is(r.status, 200);
    t.is(r.body.index, i);
    const bytes = Buffer.from(r.body.content_base64, "base64");
    t.is(r.body.content_length, bytes.length);
    chunks[i] = bytes;
  }
  t.is(chunks[d.chunk_count - 1]!.length, file.length % 16384 || 16384, "the last chunk is shorter");
  const again = await sys.call(owner.token, { op: "media.download_chunk", download_id: d.download_id, index: d.chunk_count - 1 });
  t.deepEqual(Buffer.from(again.body.content_base64, "base64"), chunks[d.chunk_count - 1]);
  t.is(sha(Buffer.concat(chunks)), d.sha256);
  const past = await sys.call(owner.token, { op: "media.download_chunk", download_id: d.download_id, index: d.chunk_count });
  t.is(past.status, 400);
  t.is(past.body.field, "index");
  const stranger = await sys.user();
  t.is((await sys.call(stranger.token, { op: "media.download_chunk", download_id: d.download_id, index: 0 })).status, 404);
  // Sessions are rows in PostgreSQL (any replica serves the next chunk).
  t.truthy(await sys.system.dbOf("media")!("download_sessions").where({ id: d.download_id }).first());
  // An item without a recorded sha256 gets one computed.
  const img = await sys.call(owner.token, { op: "media.download_begin", media_id: imageId });
  t.is(img.body.sha256, sha(png));
  t.is(img.body.chunk_count, Math.ceil(png.length / 16384));
  const note = await sys.call(owner.token, { op: "media.text_note.add", collection_id: c, name: "n2" });
  t.is((await sys.call(owner.token, { op: "media.download_begin", media_id: note.body.media.id })).status, 400);
});

test("an empty file: media.download answers 200 with no bytes; its one download chunk is empty and reassembles to its sha256", async (t) => {
  const mint = await sys.call(owner.token, { op: "media.get_upload_url", collection_id: c, filename: "empty.txt", content_type: "text/plain" });
  t.is(mint.status, 200, JSON.stringify(mint.body));
  const put = await fetch(mint.body.byte_upload_url, { method: "PUT", headers: { "content-type": "text/plain", "content-length": "0" }, body: Buffer.alloc(0) });
  t.is(put.status, 200, await put.text());
  const created = await sys.call(owner.token, { op: "media.create", collection_id: c, source_url: mint.body.store_key, name: "Empty" });
  t.is(created.status, 200, JSON.stringify(created.body));
  const id = created.body.media.id;

  const raw = await download(owner.token, id);
  t.is(raw.status, 200);
  t.is(raw.headers.get("content-length"), "0");
  t.is((await raw.arrayBuffer()).byteLength, 0);

  const b = await sys.call(owner.token, { op: "media.download_begin", media_id: id });
  t.is(b.status, 200, JSON.stringify(b.body));
  t.is(b.body.content_length, 0);
  t.is(b.body.chunk_count, 1);
  t.is(b.body.sha256, sha(Buffer.alloc(0)));
  const first = await sys.call(owner.token, { op: "media.download_chunk", download_id: b.body.download_id, index: 0 });
  t.is(first.status, 200, JSON.stringify(first.body));
  t.is(first.body.content_base64, "");
  t.is(first.body.content_length, 0);
  t.true(first.body.is_last);
  t.is(sha(Buffer.from(first.body.content_base64, "base64")), b.body.sha256);
  const past = await sys.call(owner.token, { op: "media.download_chunk", download_id: b.body.download_id, index: 1 });
  t.is(past.status, 400);
  t.is(past.body.field, "index");
});

test("describe's proxy URLs serve the stored bytes with the apikey and a bearer token (read permission)", async (t) => {
  const d = await sys.call(owner.token, { op: "media.describe", media_id: imageId });
  t.is(d.status, 200);
  const { main_url, thumbnail_url, background_image_url } = d.body.proxy_urls;
  t.is(main_url, `${sys.url}/storage/v1/media/${imageId}/main`);
  const headers = { apikey: API_KEY, authorization: `Bearer ${owner.token}` };
  const main = await fetch(main_url, { headers });
  t.is(main.status, 200);
  // The proxy goes through the op endpoint's admission chain, rate-limit headers included.
  t.truthy(main.headers.get("x-ratelimit-limit"));
  t.is(main.headers.get("content-type"), "image/png");
  t.regex(main.headers.get("content-disposition") ?? "", /^inline/);
  t.deepEqual(Buffer.from(await main.arrayBuffer()), png);
  const thumb = await fetch(thumbnail_url, { headers });
  t.is(thumb.status, 200);
  t.is(thumb.headers.get("content-type"), "image/webp");
  t.is((await sharp(Buffer.from(await thumb.arrayBuffer())).metadata()).width, 200);
  t.is((await fetch(background_image_url, { headers, method: "HEAD" })).status, 200);
  const range = await fetch(main_url, { headers: { ...headers, range: "bytes=0-7" } });
  t.is(range.status, 206);
  t.deepEqual(Buffer.from(await range.arrayBuffer()), png.subarray(0, 8));
  t.is((await fetch(main_url, { headers: { apikey: API_KEY } })).status, 401);
  t.is((await fetch(main_url, { headers: { authorization: `Bearer ${owner.token}` } })).status, 401);
  const stranger = await sys.user();
  t.true([403, 404].includes((await fetch(main_url, { headers: { apikey: API_KEY, authorization: `Bearer ${stranger.token}` } })).status));
  t.is((await fetch(`${sys.url}/storage/v1/media/${imageId}/nope`, { headers })).status, 404);
  const note = await sys.call(owner.token, { op: "media.text_note.add", collection_id: c, name: "n3" });
  t.is((await fetch(`${sys.url}/storage/v1/media/${note.body.media.id}/main`, { headers })).status, 400);
});

test("media.drop_link: a page with a file input; dropped files become media items of that collection only", async (t) => {
  const u = await sys.user();
  const dc = (await sys.call(u.token, { op: "collections.create", name: "Drop target" })).body.collection.id;
  const other = (await sys.call(u.token, { op: "collections.create", name: "Other" })).body.collection.id;
  const res = await sys.call(u.token, { op: "media.drop_link", collection_id: dc, expires_in_seconds: 600 });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.true(res.body.url.startsWith(`${sys.url}/drop/`));
  t.is(res.body.collection_id, dc);
  const ttl = new Date(res.body.expires_at).getTime() - Date.now();
  t.true(ttl > 500_000 && ttl <= 600_000);
  t.is(new Date((await sys.call(u.token, { op: "media.drop_link", collection_id: dc })).body.expires_at).getTime() - Date.now() > 3500_000, true, "one hour by default");
  const page = await fetch(res.body.url);
  t.is(page.status, 200);
  t.regex(page.headers.get("content-type") ?? "", /^text\/html/);
  t.is(page.headers.get("referrer-policy"), "no-referrer");
  const html = await page.text();
  t.regex(html, /<input[^>]+type="file"/);
  t.regex(html, /enctype="multipart\/form-data"/);

  const form = new FormData();
  form.append("file", new Blob([png], { type: "image/png" }), "dropped photo.png");
  form.append("file", new Blob([Buffer.from("dropped words")], { type: "text/plain" }), "words.txt");
  const post = await fetch(res.body.url, { method: "POST", body: form, headers: { accept: "application/json" } });
  t.is(post.status, 200);
  const out = await post.json();
  t.is(out.added, 2);
  t.is(out.files[0].filename, "dropped photo.png");
  const items = (await sys.call(u.token, { op: "media.list", collection_id: dc })).body.media;
  t.is(items.length, 2);
  const photo = items.find((m: any) => m.name === "dropped photo.png");
  t.is(photo.mime_type, "image/png");
  t.is(photo.viewer, "image");
  t.is(photo.size_bytes, png.length);
  t.is(photo.sha256, sha(png));
  t.regex(photo.thumbnail_url, /_thumb\.webp$/);
  t.regex(photo.main_url, new RegExp(`^store://${u.userId}/${dc}/`));
  const words = items.find((m: any) => m.name === "words.txt");
  t.is(words.viewer, "text");
  // A browser form without JavaScript gets an HTML answer.
  const form2 = new FormData();
  form2.append("file", new Blob([Buffer.from("more")], { type: "text/plain" }), "more.txt");
  const htmlPost = await fetch(res.body.url, { method: "POST", body: form2 });
  t.is(htmlPost.status, 200);
  t.regex(await htmlPost.text(), /1 of 1 file\(s\) added/);
  t.is((await sys.call(u.token, { op: "media.list", collection_id: other })).body.pagination.total, 0);
  const empty = await fetch(res.body.url, { method: "POST", body: new FormData(), headers: { accept: "application/json" } });
  t.is(empty.status, 400);
});

test("a drop upload cut mid-file (the browser closed) adds nothing, and the server goes on", async (t) => {
  const u = await sys.user();
  const dc = (await sys.call(u.token, { op: "collections.create", name: "Cut drop" })).body.collection.id;
  const link = (await sys.call(u.token, { op: "media.drop_link", collection_id: dc })).body.url as string;
  const boundary = "----cut";
  const part = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="half.bin"\r\nContent-Type: application/octet-stream\r\n\r\n${"x".repeat(20_000)}`;
  const head = `POST ${new URL(link).pathname} HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${part.length + 100_000}\r\n\r\n`;
  const { hostname, port } = new URL(sys.url);
  // Before, the cut part's error went unheard: an uncaught exception that ended the process
  // (here, the test's own worker).
  await new Promise<void>((resolve) => {
    const socket = net.connect(Number(port), hostname, () => { socket.write(head + part, () => setTimeout(() => socket.destroy(), 200)); });
    socket.on("error", () => {});
    socket.on("close", () => resolve());
  });
  await new Promise((r) => setTimeout(r, 300));
  t.is((await sys.call(u.token, { op: "media.list", collection_id: dc })).body.pagination.total, 0);
  const form = new FormData();
  form.append("file", new Blob([Buffer.from("whole")], { type: "text/plain" }), "whole.txt");
  const again = await fetch(link, { method: "POST", body: form, headers: { accept: "application/json" } });
  t.is(again.status, 200);
  t.is((await again.json()).added, 1);
});

test("drop links are scoped, short-lived and single-purpose; a revoked uploader's link stops working", async (t) => {
  const u = await sys.user();
  const dc = (await sys.call(u.token, { op: "collections.create", name: "Scoped", share_access_level: "restricted" })).body.collection.id;
  const secret = sys.system.config.grantSecret!;
  const form = () => { const f = new FormData(); f.append("file", new Blob([Buffer.from("x")], { type: "text/plain" }), "x.txt"); return f; };
  const expired = signGrant(secret, { purpose: "drop", exp: Date.now() - 1, collection_id: dc, user_id: u.userId });
  const exp = await fetch(`${sys.url}/drop/${expired}`);
  t.is(exp.status, 403);
  t.regex(await exp.text(), /expired/);
  t.is((await fetch(`${sys.url}/drop/${expired}`, { method: "POST", body: form(), headers: { accept: "application/json" } })).status, 403);
  const link = (await sys.call(u.token, { op: "media.drop_link", collection_id: dc })).body.url as string;
  const token = link.slice(link.indexOf("/drop/") + 6);
  // The same grant cannot be used to upload bytes elsewhere or to read anything.
  t.is((await fetch(`${sys.url}/storage/v1/upload/${token}`, { method: "PUT", headers: { "content-type": "text/plain" }, body: "x" })).status, 403);
  t.is((await fetch(`${sys.url}/storage/v1/download/${token}`)).status, 403);
  // Pointing the grant at another collection breaks its signature.
  const [payload, sig] = token.split(".");
  const altered = JSON.parse(Buffer.from(payload!, "base64url").toString("utf8"));
  altered.collection_id = dc + 1;
  t.is((await fetch(`${sys.url}/drop/${Buffer.from(JSON.stringify(altered)).toString("base64url")}.${sig}`)).status, 403);
  // A drop link minted by a collaborator stops working once can_upload is revoked.
  const collab = await sys.user();
  await sys.call(u.token, { op: "collaborators.invite", collection_id: dc, username: collab.username });
  await sys.call(collab.token, { op: "collaborators.invite.accept", collection_id: dc, inviter_user_id: u.userId });
  const cl = await sys.call(collab.token, { op: "media.drop_link", collection_id: dc });
  t.is(cl.status, 200, JSON.stringify(cl.body));
  t.is((await fetch(cl.body.url, { method: "POST", body: form(), headers: { accept: "application/json" } })).status, 200);
  await sys.call(u.token, { op: "collaborators.update_permissions", collection_id: dc, user_id: collab.userId, can_upload: false });
  const revoked = await fetch(cl.body.url, { method: "POST", body: form(), headers: { accept: "application/json" } });
  t.is(revoked.status, 403);
  t.is((await revoked.json()).permission, "can_upload");
  t.is((await sys.call(u.token, { op: "media.list", collection_id: dc })).body.pagination.total, 1);
  const stranger = await sys.user();
  t.true([403, 404].includes((await sys.call(stranger.token, { op: "media.drop_link", collection_id: dc })).status));
});
