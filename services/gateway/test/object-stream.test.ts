/**
 * The object streamer over an in-memory object store, through a real node:http server: full
 * answers, Range (206/416), If-None-Match (304), If-Range, HEAD, an empty object, a missing one,
 * Content-Disposition, and a client that stops reading.
 */
import test from "ava";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { createLogger, type ObjectInfo, type ObjectStore } from "@cms/platform";
import { sendError } from "../src/http/answers.ts";
import { createObjectStreamer, type ObjectRef, type StreamOptions } from "../src/http/object-stream.ts";

const log = createLogger("silent");
const objects = new Map<string, { bytes: Buffer; info: ObjectInfo }>([
  ["store://u/1/letters.txt", { bytes: Buffer.from("abcdefghijklmnopqrstuvwxyz"), info: { contentType: "text/plain", size: 26, etag: "e26" } }],
  ["store://u/1/empty.bin", { bytes: Buffer.alloc(0), info: { contentType: "application/octet-stream", size: 0, etag: "" } }],
]);
const store = {
  async head(key: string) { return objects.get(key)?.info; },
  async get(key: string, range?: { start: number; end: number }) {
    const o = objects.get(key);
    if (!o) return undefined;
    return { body: Readable.from([range ? o.bytes.subarray(range.start, range.end + 1) : o.bytes]), info: o.info };
  },
} as unknown as ObjectStore;

/** What the test server streams: the ref and options of the next request. */
let next: { ref: ObjectRef; opts: StreamOptions } = { ref: { store_key: "store://u/1/letters.txt" }, opts: { disposition: "attachment" } };
let base = "";
let server: http.Server;
test.before(async () => {
  const stream = createObjectStreamer(store, log, 60_000);
  server = http.createServer((req, res) => { stream(req, res, next.ref, next.opts).catch((err) => sendError(res, err, log)); });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
test.after.always(() => { server?.close(); });

async function get(ref: ObjectRef, opts: StreamOptions, headers: Record<string, string> = {}, method = "GET") {
  next = { ref, opts };
  const res = await fetch(base, { method, headers });
  return { res, text: await res.text() };
}

const letters: ObjectRef = { store_key: "store://u/1/letters.txt", content_type: "text/plain", filename: "letters.txt" };

test.serial("a whole object: 200 with type, length, ETag, ranges, no-sniff and the disposition", async (t) => {
  const { res, text } = await get(letters, { disposition: "attachment", headers: { "x-extra": "1" } });
  t.is(res.status, 200);
  t.is(text, "abcdefghijklmnopqrstuvwxyz");
  t.is(res.headers.get("content-type"), "text/plain");
  t.is(res.headers.get("content-length"), "26");
  t.is(res.headers.get("etag"), '"e26"');
  t.is(res.headers.get("accept-ranges"), "bytes");
  t.is(res.headers.get("x-content-type-options"), "nosniff");
  t.is(res.headers.get("content-security-policy"), "sandbox; default-src 'none'");
  t.is(res.headers.get("content-disposition"), "attachment; filename=\"letters.txt\"; filename*=UTF-8''letters.txt");
  t.is(res.headers.get("x-extra"), "1");
});

test.serial("Range: 206 with Content-Range; past the end 416 in the contract's error shape", async (t) => {
  const part = await get(letters, { disposition: "inline" }, { range: "bytes=2-5" });
  t.is(part.res.status, 206);
  t.is(part.text, "cdef");
  t.is(part.res.headers.get("content-range"), "bytes 2-5/26");
  t.is(part.res.headers.get("content-length"), "4");
  t.regex(part.res.headers.get("content-disposition") ?? "", /^inline; /);
  const past = await get(letters, { disposition: "inline" }, { range: "bytes=40-" });
  t.is(past.res.status, 416);
  t.is(past.res.headers.get("content-range"), "bytes */26");
  t.deepEqual(JSON.parse(past.text), { error: "invalid_request", detail: "The requested range is outside the 26-byte file.", size_bytes: 26 });
});

test.serial("If-None-Match with the ETag: 304; If-Range with another ETag: the whole object", async (t) => {
  const same = await get(letters, { disposition: "inline" }, { "if-none-match": '"e26"' });
  t.is(same.res.status, 304);
  t.is(same.text, "");
  const stale = await get(letters, { disposition: "inline" }, { range: "bytes=0-1", "if-range": '"old"' });
  t.is(stale.res.status, 200);
  t.is(stale.text.length, 26);
});

test.serial("HEAD: the headers without the body; an empty object: 200 with length 0 and a size-based ETag", async (t) => {
  const head = await get(letters, { disposition: "inline" }, {}, "HEAD");
  t.is(head.res.status, 200);
  t.is(head.res.headers.get("content-length"), "26");
  t.is(head.text, "");
  const empty = await get({ store_key: "store://u/1/empty.bin" }, { disposition: "attachment" });
  t.is(empty.res.status, 200);
  t.is(empty.res.headers.get("content-length"), "0");
  t.is(empty.res.headers.get("etag"), '"0"');
  t.regex(empty.res.headers.get("content-disposition") ?? "", /filename="empty\.bin"/, "the key's last segment names it");
});

test.serial("a missing object is 404 not_found before any byte; a UTF-8 name keeps an ASCII fallback", async (t) => {
  const missing = await get({ store_key: "store://u/1/gone" }, { disposition: "attachment" });
  t.is(missing.res.status, 404);
  t.deepEqual(JSON.parse(missing.text), { error: "not_found", detail: "The stored file is missing." });
  const named = await get({ ...letters, filename: "résumé.txt" }, { disposition: "attachment" });
  t.is(named.res.headers.get("content-disposition"), "attachment; filename=\"re_sume_.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9.txt");
});

/**
 * A server streaming one large object, 1 MiB a read as a file is; `cutShort` says, for each
 * answer, whether its object's stream was let go before its end. The reader idle bound is `idleMs`.
 */
async function largeObjectServer(t: import("ava").ExecutionContext, size: number, idleMs: number) {
  const slice = Buffer.alloc(1024 * 1024, 7);
  const cutShort: boolean[] = [];
  const big = {
    async head() { return { contentType: "application/octet-stream", size, etag: "big" }; },
    async get() {
      const i = cutShort.push(false) - 1;
      let sent = 0;
      const body = new Readable({
        read() {
          if (sent >= size) { this.push(null); return; }
          sent += slice.length;
          this.push(slice);
        },
        destroy(err, cb) { cutShort[i] = !body.readableEnded; cb(err); },
      });
      return { body, info: { contentType: "application/octet-stream", size, etag: "big" } };
    },
  } as unknown as ObjectStore;
  const stream = createObjectStreamer(big, log, idleMs);
  const srv = http.createServer((req, res) => { stream(req, res, { store_key: "store://u/1/big.bin" }, { disposition: "attachment" }).catch((err) => sendError(res, err, log)); });
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  t.teardown(() => srv.close());
  return { port: (srv.address() as AddressInfo).port, cutShort };
}

/** A raw GET; `reader` drives its reading. Resolves with the bytes read (the head included) once the connection closes. */
function rawGet(port: number, reader: (socket: net.Socket) => void): Promise<number> {
  return new Promise((resolve) => {
    let bytes = 0;
    const socket = net.connect(port, "127.0.0.1", () => socket.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    socket.on("data", (d) => { bytes += d.length; });
    socket.on("error", () => {});
    socket.on("close", () => resolve(bytes));
    reader(socket);
  });
}

test("a client that stops reading a download is let go after the idle bound, and the object's stream with it", async (t) => {
  const size = 64 * 1024 * 1024;
  const { port, cutShort } = await largeObjectServer(t, size, 300);
  // Reads the first bytes, then nothing for 2 s (its window closed), then what the kernel still held.
  const read = await rawGet(port, (socket) => socket.once("data", () => {
    socket.pause();
    setTimeout(() => socket.resume(), 2_000);
  }));
  t.true(read < size, `${read} of ${size} bytes: the answer was cut`);
  t.deepEqual(cutShort, [true], "the object's stream was let go before its end");
});

test("a client that reads slowly, pausing under the idle bound, gets the whole download", async (t) => {
  const size = 24 * 1024 * 1024;
  const { port } = await largeObjectServer(t, size, 400);
  // Paused 300 ms, then reading for 100 ms, over and over (far under the bound between two
  // reads, though the kernel's buffers hide most of them from the server).
  const read = await rawGet(port, (socket) => {
    const cycle = () => { if (socket.destroyed) return; socket.pause(); setTimeout(() => { socket.resume(); setTimeout(cycle, 100); }, 300); };
    cycle();
  });
  t.true(read > size, `the whole answer (${read} bytes with its head) arrived`);
});
