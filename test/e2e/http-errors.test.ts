/**
 * Malformed HTTP that Node's parser refuses before any route: answered with the contract's JSON
 * error shape (where the socket still takes an answer), bodies shorter than their
 * Content-Length, and bodies that stop arriving (CLIENT_IDLE_MS, shortened here).
 */
import test from "ava";
import net from "node:net";
import { startTestSystem, API_KEY, type TestSystem } from "../helpers/system.js";

let sys: TestSystem;
const BODY_IDLE_MS = 500;
test.before(async () => { sys = await startTestSystem({ CLIENT_IDLE_MS: String(BODY_IDLE_MS) }); });
test.after.always(async () => { await sys?.stop(); });

/** Sends raw bytes, half-closes when asked, and reads the whole answer. */
function raw(request: string | Buffer, opts: { end?: boolean } = {}): Promise<{ status: number; headers: string; body: string }> {
  const { hostname, port } = new URL(sys.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      if (opts.end === false) socket.write(request);
      else socket.end(request);
    });
    let data = "";
    socket.setEncoding("utf8");
    socket.on("data", (d) => { data += d; });
    socket.on("end", () => {
      const [head, ...rest] = data.split("\r\n\r\n");
      resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(head ?? "")?.[1] ?? 0), headers: head ?? "", body: rest.join("\r\n\r\n") });
    });
    socket.on("error", reject);
    setTimeout(() => socket.destroy(new Error(`no answer to ${JSON.stringify(String(request).slice(0, 60))}`)), 10_000).unref();
  });
}

const cases: Array<[string, string, number]> = [
  ["a NUL in a header", `POST /functions/v1/thirdparty-v1 HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0000b\r\nContent-Length: 2\r\n\r\n{}`, 400],
  ["a bare LF", `POST /functions/v1/thirdparty-v1 HTTP/1.1\nHost: x\r\nContent-Length: 2\r\n\r\n{}`, 400],
  ["an obsolete line fold", `POST /functions/v1/thirdparty-v1 HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n  b\r\nContent-Length: 2\r\n\r\n{}`, 400],
  ["a 20 KB header", `POST /functions/v1/thirdparty-v1 HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\nContent-Length: 2\r\n\r\n{}`, 431],
  ["bad chunked encoding", `POST /functions/v1/thirdparty-v1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`, 400],
  ["a garbage request line", `GARBAGE\r\n\r\n`, 400],
];

for (const [name, request, status] of cases) {
  test(`${name}: ${status} with the contract's error body`, async (t) => {
    const res = await raw(request);
    t.is(res.status, status, res.headers);
    t.regex(res.headers, /content-type: application\/json/i);
    const body = JSON.parse(res.body);
    t.is(body.error, "invalid_request");
    t.true(typeof body.detail === "string" && body.detail.length > 0);
  });
}

test("a body shorter than its Content-Length: 400 with the contract's body when the client waits for it", async (t) => {
  const body = JSON.stringify({ op: "ping" });
  const res = await raw(`POST /functions/v1/thirdparty-v1 HTTP/1.1\r\nHost: x\r\napikey: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length + 50}\r\n\r\n${body}`);
  // Half-closed after the short body: the server sees the end of the request early.
  t.is(res.status, 400, res.headers);
  t.is(JSON.parse(res.body).error, "invalid_request");
  t.regex(JSON.parse(res.body).detail, /ended before its body was complete|ended after/);
  // The server stays up and answers the next request.
  const ok = await sys.call(undefined, { op: "operations.list" });
  t.is(ok.status, 200);
});

test("a JSON body that stops arriving: 408 with the contract's body once CLIENT_IDLE_MS passes, and the connection closes", async (t) => {
  const body = JSON.stringify({ op: "ping" });
  const started = Date.now();
  // The socket stays open after part of the body, as a stalled client's does; raw() resolves
  // only once the server ends the connection.
  const res = await raw(`POST /functions/v1/thirdparty-v1 HTTP/1.1\r\nHost: x\r\napikey: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length + 50}\r\n\r\n${body}`, { end: false });
  t.true(Date.now() - started >= BODY_IDLE_MS - 50);
  t.is(res.status, 408, res.headers);
  t.regex(res.headers, /connection: close/i);
  t.is(JSON.parse(res.body).error, "invalid_request");
  t.regex(JSON.parse(res.body).detail, new RegExp(`stopped arriving: nothing for 0.5 s after ${body.length} bytes \\(Content-Length ${body.length + 50}\\)`));
});

test("an upload PUT whose body stops arriving: 408, the connection closes, nothing is stored, and the same URL then takes the whole body", async (t) => {
  const u = await sys.user();
  const c = (await sys.must(u.token, { op: "collections.create", name: "stalled uploads" })).collection.id;
  const r = await sys.must(u.token, { op: "media.get_upload_url", collection_id: c, filename: "data.bin", content_type: "application/octet-stream" });
  const body = Buffer.alloc(300_000, 7);
  const path = new URL(r.byte_upload_url).pathname;
  const head = `PUT ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: ${body.length}\r\n\r\n`;
  const res = await raw(Buffer.concat([Buffer.from(head), body.subarray(0, 100_000)]), { end: false });
  t.is(res.status, 408, res.headers);
  t.regex(res.headers, /connection: close/i);
  t.regex(JSON.parse(res.body).detail, /stopped arriving/);
  t.is(await sys.system.store.head(r.store_key), undefined, "nothing stored");
  const put = await fetch(r.byte_upload_url, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body });
  t.is(put.status, 200);
  t.is((await put.json()).size_bytes, body.length);
});

test("a drop link's form whose body stops arriving: 408, the connection closes, and no item is added", async (t) => {
  const u = await sys.user();
  const c = (await sys.must(u.token, { op: "collections.create", name: "stalled drops" })).collection.id;
  const link = await sys.must(u.token, { op: "media.drop_link", collection_id: c });
  const boundary = "----stalled";
  const part = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="half.bin"\r\nContent-Type: application/octet-stream\r\n\r\n${"x".repeat(20_000)}`;
  const head = `POST ${new URL(link.url).pathname} HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${part.length + 100_000}\r\n\r\n`;
  const res = await raw(head + part, { end: false });
  t.is(res.status, 408, res.headers);
  t.regex(res.headers, /connection: close/i);
  t.regex(JSON.parse(res.body).detail, /stopped arriving/);
  t.deepEqual((await sys.must(u.token, { op: "media.list", collection_id: c })).media, []);
});

test("a media.download whose client stops reading is let go once CLIENT_IDLE_MS passes; a whole download still works", async (t) => {
  const u = await sys.user();
  const c = (await sys.must(u.token, { op: "collections.create", name: "stalled downloads" })).collection.id;
  const r = await sys.must(u.token, { op: "media.get_upload_url", collection_id: c, filename: "big.bin", content_type: "application/octet-stream" });
  const file = Buffer.alloc(24 * 1024 * 1024, 3);
  t.is((await fetch(r.byte_upload_url, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body: file })).status, 200);
  const id = (await sys.must(u.token, { op: "media.create", collection_id: c, source_url: r.store_key })).media.id;
  const op = JSON.stringify({ op: "media.download", media_id: id });
  const request = `POST /functions/v1/thirdparty-v1 HTTP/1.1\r\nHost: x\r\napikey: ${API_KEY}\r\nAuthorization: Bearer ${u.token}\r\nContent-Type: application/json\r\nContent-Length: ${op.length}\r\n\r\n${op}`;
  const { hostname, port } = new URL(sys.url);
  const started = Date.now();
  // Reads the answer's first bytes, then nothing for 3 s (its window closed), then what the
  // kernel still held: the connection ends short of the file once the server let it go.
  const received = await new Promise<number>((resolve) => {
    let bytes = 0;
    const socket = net.connect(Number(port), hostname, () => socket.write(request));
    socket.on("data", (d) => { bytes += d.length; });
    socket.once("data", () => { socket.pause(); setTimeout(() => socket.resume(), 3_000); });
    socket.on("error", () => {});
    socket.on("close", () => resolve(bytes));
  });
  t.true(received < file.length, `${received} bytes of ${file.length} before the close`);
  t.true(Date.now() - started < 15_000, "let go within seconds, not never");
  const whole = await fetch(`${sys.url}/functions/v1/thirdparty-v1`, { method: "POST", headers: { apikey: API_KEY, authorization: `Bearer ${u.token}`, "content-type": "application/json" }, body: op });
  t.is(whole.status, 200);
  t.is(Buffer.from(await whole.arrayBuffer()).length, file.length);
});
