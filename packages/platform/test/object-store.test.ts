/**
 * The object store contract, run against the filesystem store always and against the S3 store
 * when S3_ENDPOINT is set (test/with-backends.ts starts s3rver). Plus the pure key helpers.
 */
import test, { type ExecutionContext } from "ava";
import { execFile } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { PassThrough, Readable } from "node:stream";
import {
  ObjectChecksumMismatchError,
  ObjectLengthMismatchError,
  ObjectTooLargeError,
  createFsObjectStore,
  createS3ObjectStore,
  decodeTrailer,
  encodeTrailer,
  freshCoverKeys,
  isStoreKey,
  mayBeCoverKey,
  readObject,
  objectKeyOf,
  removeStaleTemporaries,
  STALE_TEMPORARY_MS,
  writeAll,
  type ObjectStore,
  type PositionalWriter,
  type PutOptions,
  type S3Timeouts,
} from "../src/object-store.ts";
import { isTransientFailure } from "../src/errors.ts";
import { loadConfig, type S3Config } from "../src/config.ts";
import { besideModule, nodeArgsOf } from "../../../test/helpers/paths.ts";

async function readAll(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** A stream that yields the buffer in small pieces (several transform calls). */
function chunked(buf: Buffer, size = 7): Readable {
  const parts: Buffer[] = [];
  for (let i = 0; i < buf.length; i += size) parts.push(buf.subarray(i, i + size));
  return Readable.from(parts);
}

type PutOutcome = { outcome: "resolved" | "rejected" | "uncaught" | "hang"; name?: string; message?: string };
/** How a put that is expected to fail is made: its body length, stream shape and options. */
interface PutSpec { len: number; chunk?: number; failAfter?: number; opts: PutOptions }

function bodyOf(s: PutSpec): Buffer | Readable {
  const data = randomBytes(s.len);
  if (s.failAfter !== undefined) {
    let sent = false;
    return new Readable({
      read() {
        if (!sent) { sent = true; this.push(data.subarray(0, s.failAfter)); return; }
        this.destroy(new Error("client connection reset"));
      },
    });
  }
  return s.chunk === undefined ? data : chunked(data, s.chunk);
}

/** The store's temporaries, once their count is back to `n` (or after 5 s): a removal may still be under way. */
async function temporariesBackTo(b: { temporaries(): Promise<string[]> }, n: number): Promise<number> {
  const deadline = Date.now() + 5000;
  let now = (await b.temporaries()).length;
  while (now > n && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    now = (await b.temporaries()).length;
  }
  return now;
}

interface Backend {
  store: ObjectStore;
  /** Every stored object (or leftover file) whose key starts with prefix. */
  list(prefix: string): Promise<string[]>;
  /** The store's temporary objects (a put in progress, or a leftover). */
  temporaries(): Promise<string[]>;
  /** A put expected to fail, made so that a crash or hang is reported rather than fatal. */
  attemptPut(key: string, spec: PutSpec): Promise<PutOutcome>;
  cleanup(): Promise<void>;
}

/**
 * The shared contract. `knownBroken` names tests that fail on this implementation because of a
 * known source bug: they run as test.failing, so fixing the bug turns them red as a reminder.
 */
function registerSuite(kind: string, make: () => Promise<Backend>, enabled: boolean, knownBroken: string[] = []): void {
  const reg = (id: string, title: string, fn: (t: ExecutionContext) => Promise<void>) => {
    const full = `[${kind}] ${title}`;
    if (!enabled) test.skip(full, fn);
    else if (knownBroken.includes(id)) test.serial.failing(`${full} (known bug)`, fn);
    else test.serial(full, fn);
  };
  let b: Backend;
  const prefix = () => `${randomUUID()}/`;

  if (enabled) {
    test.before(async () => { b = await make(); });
    test.after.always(async () => { await b?.cleanup(); });
  }

  reg("roundtrip", "put/get/head/delete round trip with content type and size", async (t) => {
    const p = prefix();
    const key = `${p}c1/1700000000_photo.png`;
    const data = randomBytes(1500);
    const put = await b.store.put(key, data, { contentType: "image/png" });
    t.is(put.size, data.length);
    t.is(put.contentType, "image/png");
    t.is(put.sha256, sha256(data));
    t.truthy(put.etag);

    const head = await b.store.head(key);
    t.truthy(head);
    t.is(head!.size, data.length);
    t.is(head!.contentType, "image/png");
    t.is(head!.etag, put.etag);

    const got = await b.store.get(key);
    t.truthy(got);
    t.is(got!.info.size, data.length);
    t.is(got!.info.contentType, "image/png");
    t.deepEqual(await readAll(got!.body), data);

    // The store:// form of the key names the same object.
    const viaStoreKey = await b.store.head(`store://${key}`);
    t.is(viaStoreKey?.size, data.length);

    await b.store.delete([key]);
    t.is(await b.store.head(key), undefined);
    t.is(await b.store.get(key), undefined);
    t.deepEqual(await b.list(p), []);
  });

  reg("stream", "put from a stream, with and without a matching contentLength", async (t) => {
    const p = prefix();
    const data = randomBytes(100);
    const put = await b.store.put(`${p}a.bin`, chunked(data), { contentType: "application/octet-stream", contentLength: data.length });
    t.is(put.size, 100);
    t.is(put.sha256, sha256(data));
    t.deepEqual(await readAll((await b.store.get(`${p}a.bin`))!.body), data);
    const put2 = await b.store.put(`${p}b.bin`, chunked(data), { contentType: "application/octet-stream", maxBytes: 1000 });
    t.is(put2.size, 100);
    t.deepEqual(await readAll((await b.store.get(`${p}b.bin`))!.body), data);
    await b.store.delete([`${p}a.bin`, `${p}b.bin`]);
  });

  reg("gate", "visibleAfter: the object appears only once the gate resolves; a rejected gate stores nothing and is put's error", async (t) => {
    const p = prefix();
    const temporariesBefore = (await b.temporaries()).length;
    for (const [name, body] of [["buffer", () => randomBytes(200_000)], ["stream", () => chunked(randomBytes(200_000), 65_536)]] as const) {
      let open!: () => void;
      const gate = new Promise<void>((resolve) => { open = resolve; });
      const put = b.store.put(`${p}${name}-open.bin`, body(), { contentType: "application/octet-stream", contentLength: 200_000, visibleAfter: gate });
      await new Promise((r) => setTimeout(r, 100)); // the bytes are written meanwhile
      t.is(await b.store.head(`${p}${name}-open.bin`), undefined, `${name}: not visible before the gate`);
      open();
      t.is((await put).size, 200_000);
      t.is((await b.store.head(`${p}${name}-open.bin`))?.size, 200_000, `${name}: visible after the gate`);

      const refused = new Error("the reservation was refused");
      const closed = Promise.reject(refused);
      closed.catch(() => {});
      const err = await t.throwsAsync(b.store.put(`${p}${name}-closed.bin`, body(), { contentType: "application/octet-stream", contentLength: 200_000, visibleAfter: closed }));
      t.is(err, refused, `${name}: put rejects with the gate's reason`);
      t.is(await b.store.head(`${p}${name}-closed.bin`), undefined, `${name}: nothing stored`);
    }
    t.is((await b.list(p)).length, 2, "the two objects, nothing else under the prefix");
    t.is(await temporariesBackTo(b, temporariesBefore), temporariesBefore, "no temporary left behind");
    await b.store.delete([`${p}buffer-open.bin`, `${p}stream-open.bin`]);
  });

  reg("sha256", "sha256: the expected bytes are stored; other bytes are refused with their sha256 and nothing is stored", async (t) => {
    const p = prefix();
    const data = randomBytes(300_000);
    const temporariesBefore = (await b.temporaries()).length;
    for (const [name, body] of [["buffer", () => data], ["stream", () => chunked(data, 65_536)]] as const) {
      const ok = await b.store.put(`${p}${name}-ok.bin`, body(), { contentType: "application/octet-stream", sha256: sha256(data) });
      t.is(ok.sha256, sha256(data));
      const err = await t.throwsAsync(b.store.put(`${p}${name}-bad.bin`, body(), { contentType: "application/octet-stream", sha256: "0".repeat(64) }), { instanceOf: ObjectChecksumMismatchError });
      t.is(err.actual, sha256(data), `${name}: the error names the actual sha256`);
      t.is(await b.store.head(`${p}${name}-bad.bin`), undefined, `${name}: nothing stored`);
    }
    t.is((await b.list(p)).length, 2);
    t.is(await temporariesBackTo(b, temporariesBefore), temporariesBefore, "no temporary left behind");
    await b.store.delete([`${p}buffer-ok.bin`, `${p}stream-ok.bin`]);
  });

  reg("early-failure", "a body that fails before its first byte leaves no temporary", async (t) => {
    const p = prefix();
    const before = (await b.temporaries()).length;
    for (let i = 0; i < 5; i++) {
      const body = new Readable({ read() { this.destroy(new Error("client connection reset")); } });
      await t.throwsAsync(b.store.put(`${p}early-${i}.bin`, body, { contentType: "application/octet-stream" }), { message: /reset/ });
    }
    t.is(await temporariesBackTo(b, before), before);
    t.deepEqual(await b.list(p), []);
  });

  reg("failed-before-read", "a stream that fails before the put reads it (its folder still being made) is put's rejection, not an uncaught exception", async (t) => {
    const p = prefix();
    const before = (await b.temporaries()).length;
    for (let i = 0; i < 3; i++) {
      const body = new PassThrough();
      // A folder of its own: the filesystem store makes it before it reads the body.
      const put = b.store.put(`${p}folder-${i}/cut.bin`, body, { contentType: "application/octet-stream" });
      body.destroy(new Error("client connection reset"));
      await t.throwsAsync(put, { message: /reset/ });
    }
    t.is(await temporariesBackTo(b, before), before);
    t.deepEqual(await b.list(p), []);
  });

  reg("overwrite", "put overwrites an existing object", async (t) => {
    const key = `${prefix()}over.txt`;
    await b.store.put(key, Buffer.from("first version"), { contentType: "text/plain" });
    await b.store.put(key, Buffer.from("2nd"), { contentType: "text/markdown" });
    const got = await b.store.get(key);
    t.is((await readAll(got!.body)).toString(), "2nd");
    t.is(got!.info.contentType, "text/markdown");
    t.is(got!.info.size, 3);
    await b.store.delete([key]);
  });

  reg("removed-after-get", "a body get answered is the object whole though the object is removed before it is read; one dropped unread fails nothing", async (t) => {
    const key = `${prefix()}removed.bin`;
    const data = randomBytes(3 * 1024 * 1024);
    await b.store.put(key, data, { contentType: "application/octet-stream" });
    const read = await b.store.get(key);
    const dropped = await b.store.get(key);
    await b.store.delete([key]);
    t.is(await b.store.head(key), undefined);
    // A reader that stops at the headers (a HEAD) destroys the body unread: nothing may fail late.
    dropped!.body.destroy();
    t.true((await readAll(read!.body)).equals(data));
    t.is(await b.store.get(key), undefined);
  });

  reg("range", "range get returns the inclusive byte range", async (t) => {
    const key = `${prefix()}range.txt`;
    const data = Buffer.from("0123456789abcdef");
    await b.store.put(key, data, { contentType: "text/plain" });
    const mid = await b.store.get(key, { start: 2, end: 5 });
    t.is((await readAll(mid!.body)).toString(), "2345");
    t.is(mid!.info.size, data.length, "size is the whole object's");
    const tail = await b.store.get(key, { start: 10, end: 15 });
    t.is((await readAll(tail!.body)).toString(), "abcdef");
    // (bytes=0-0 is not checked here: s3rver answers it with the whole object.)
    const head2 = await b.store.get(key, { start: 0, end: 1 });
    t.is((await readAll(head2!.body)).toString(), "01");
    await b.store.delete([key]);
  });

  reg("missing", "missing objects: get/head undefined, delete is a no-op", async (t) => {
    const key = `${prefix()}missing.bin`;
    t.is(await b.store.head(key), undefined);
    t.is(await b.store.get(key), undefined);
    await t.notThrowsAsync(b.store.delete([key]));
  });

  reg("read-object", "readObject: whole, a range, a missing key, and over maxBytes refused", async (t) => {
    const key = `${prefix()}read.bin`;
    const data = randomBytes(100);
    await b.store.put(key, data, { contentType: "application/octet-stream" });
    t.deepEqual(await readObject(b.store, key), data);
    t.deepEqual(await readObject(b.store, key, { range: { start: 10, end: 19 } }), data.subarray(10, 20));
    t.is(await readObject(b.store, `${key}.missing`), undefined);
    await t.throwsAsync(readObject(b.store, key, { maxBytes: 50 }), { instanceOf: ObjectTooLargeError });
    await b.store.delete([key]);
  });

  reg("delete-many", "delete removes several keys at once (more than one batch, some already gone)", async (t) => {
    const p = prefix();
    const keys = [`${p}a`, `${p}b`, `${p}sub/c`, ...Array.from({ length: 18 }, (_, i) => `${p}many/${i}`)];
    for (const k of keys) await b.store.put(k, Buffer.from(k), { contentType: "text/plain" });
    t.is((await b.list(p)).length >= keys.length, true);
    await b.store.delete([keys[5]!]);
    keys.push(`${p}never-written`);
    await b.store.delete(keys);
    for (const k of keys) t.is(await b.store.head(k), undefined);
    t.deepEqual(await b.list(p), []);
  });

  const mismatch: Array<[id: string, title: string, spec: PutSpec]> = [
    ["short-buffer", "a shorter body than contentLength (buffer)", { len: 10, opts: { contentType: "application/octet-stream", contentLength: 20 } }],
    ["short-stream", "a shorter body than contentLength (stream)", { len: 10, chunk: 4, opts: { contentType: "application/octet-stream", contentLength: 20 } }],
    ["long-buffer", "a longer body than contentLength (buffer)", { len: 30, opts: { contentType: "application/octet-stream", contentLength: 20 } }],
    ["long-stream", "a longer body than contentLength (stream)", { len: 30, chunk: 4, opts: { contentType: "application/octet-stream", contentLength: 20 } }],
  ];
  for (const [id, title, spec] of mismatch) {
    reg(id, `${title} rejects with ObjectLengthMismatchError and stores nothing`, async (t) => {
      const p = prefix();
      const key = `${p}mismatch.bin`;
      const res = await b.attemptPut(key, spec);
      t.like(res, { outcome: "rejected", name: "ObjectLengthMismatchError" });
      t.is(await b.store.head(key), undefined);
      t.is(await b.store.get(key), undefined);
      t.deepEqual(await b.list(p), []);
    });
  }

  reg("too-large", "maxBytes exceeded rejects with ObjectTooLargeError and stores nothing", async (t) => {
    const p = prefix();
    const key = `${p}big.bin`;
    t.like(await b.attemptPut(key, { len: 64, chunk: 8, opts: { contentType: "application/octet-stream", maxBytes: 40 } }), { outcome: "rejected", name: "ObjectTooLargeError" });
    t.like(await b.attemptPut(key, { len: 41, opts: { contentType: "application/octet-stream", maxBytes: 40 } }), { outcome: "rejected", name: "ObjectTooLargeError" });
    t.is(await b.store.head(key), undefined);
    t.deepEqual(await b.list(p), []);
    // Exactly maxBytes is fine.
    const ok = await b.store.put(key, randomBytes(40), { contentType: "application/octet-stream", maxBytes: 40 });
    t.is(ok.size, 40);
    await b.store.delete([key]);
  });

  reg("body-error", "a body stream that fails makes put reject and stores nothing", async (t) => {
    const p = prefix();
    for (const opts of [{ contentType: "text/plain", contentLength: 20 }, { contentType: "text/plain" }]) {
      const res = await b.attemptPut(`${p}broken.txt`, { len: 20, failAfter: 5, opts });
      t.is(res.outcome, "rejected", JSON.stringify({ opts, res }));
    }
    t.is(await b.store.head(`${p}broken.txt`), undefined);
    t.deepEqual(await b.list(p), []);
  });

  reg("overwrite-too-large", "a too-large overwrite keeps the previous object", async (t) => {
    const key = `${prefix()}keep.txt`;
    await b.store.put(key, Buffer.from("original"), { contentType: "text/plain" });
    t.like(await b.attemptPut(key, { len: 50, opts: { contentType: "text/html", maxBytes: 10 } }), { outcome: "rejected", name: "ObjectTooLargeError" });
    const got = await b.store.get(key);
    t.is((await readAll(got!.body)).toString(), "original");
    t.is(got!.info.contentType, "text/plain");
    await b.store.delete([key]);
  });

  reg("overwrite-mismatch", "a length-mismatched overwrite keeps the previous object", async (t) => {
    const key = `${prefix()}keep.txt`;
    await b.store.put(key, Buffer.from("original"), { contentType: "text/plain" });
    t.like(await b.attemptPut(key, { len: 5, opts: { contentType: "text/html", contentLength: 50 } }), { outcome: "rejected", name: "ObjectLengthMismatchError" });
    const got = await b.store.get(key);
    t.truthy(got, "the previous object is still there");
    t.is((await readAll(got!.body)).toString(), "original");
    await b.store.delete([key]);
  });

  reg("meta-collision", "an object whose key ends in .meta.json does not disturb another object", async (t) => {
    const p = prefix();
    await b.store.put(`${p}a`, Buffer.from("payload"), { contentType: "image/gif" });
    await b.store.put(`${p}a.meta.json`, Buffer.from("not metadata"), { contentType: "text/plain" });
    const head = await b.store.head(`${p}a`);
    t.is(head?.contentType, "image/gif");
    t.is(head?.size, 7);
    const other = await b.store.get(`${p}a.meta.json`);
    t.is(other && (await readAll(other.body)).toString(), "not metadata");
    await b.store.delete([`${p}a`, `${p}a.meta.json`]);
  });

  reg("folder", "a key naming a folder of keys (a user's, a collection's) is no object", async (t) => {
    const p = prefix();
    await b.store.put(`${p}c1/a.bin`, Buffer.from("x"), { contentType: "text/plain" });
    t.is(await b.store.head(`${p}c1`), undefined);
    t.is(await b.store.get(`${p}c1`), undefined);
    await b.store.delete([`${p}c1/a.bin`]);
  });

  reg("escape", "keys that escape the key space are refused", async (t) => {
    for (const key of ["../escape.txt", "/abs/file", "a//b", "store://../x", ""]) {
      await t.throwsAsync(b.store.put(key, Buffer.from("x"), { contentType: "text/plain" }), undefined, JSON.stringify(key));
    }
  });
}

// ---- filesystem ----------------------------------------------------------------------------
function walk(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p));
    else out.push(p);
  }
  return out;
}

/** The filesystem store on a fresh root (trailer layout), or on one with a `.meta` folder (sidecar). */
const fsBackend = (layout: "trailer" | "sidecar") => async (): Promise<Backend> => {
  const root = mkdtempSync(join(tmpdir(), "cms-objstore-"));
  if (layout === "sidecar") mkdirSync(join(root, ".meta"));
  const store = createFsObjectStore(root);
  if (store.layout !== layout) throw new Error(`expected the ${layout} layout, got ${store.layout}`);
  return {
    store,
    async list(prefix) { return walk(join(root, prefix)); },
    async temporaries() { return walk(join(root, ".tmp")); },
    async attemptPut(key, spec) {
      try {
        await store.put(key, bodyOf(spec), spec.opts);
        return { outcome: "resolved" };
      } catch (err) {
        return { outcome: "rejected", name: (err as Error).name, message: (err as Error).message };
      }
    },
    async cleanup() { store.close(); rmSync(root, { recursive: true, force: true }); },
  };
};
registerSuite("fs", fsBackend("trailer"), true);
// Stores created before the trailer keep their metadata files: the whole contract holds there too.
registerSuite("fs-sidecar", fsBackend("sidecar"), true);

test("[fs] trailer layout: one file per object, its bytes then the trailer; get and head give the bytes and their size alone", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "cms-objstore-trailer-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const store = createFsObjectStore(root);
  t.is(store.layout, "trailer");
  const data = randomBytes(1000);
  const fromBuffer = await store.put("u/1/a.bin", data, { contentType: "image/png" });
  const fromStream = await store.put("u/1/b.bin", chunked(data, 300), { contentType: "image/png" });
  t.is(fromStream.etag, fromBuffer.etag);
  t.false(existsSync(join(root, ".meta")), "no metadata folder");
  t.deepEqual(readdirSync(join(root, "u/1")).sort(), ["a.bin", "b.bin"]);
  for (const name of ["a.bin", "b.bin"]) {
    const file = readFileSync(join(root, "u/1", name));
    t.deepEqual(file, Buffer.concat([data, encodeTrailer({ contentType: "image/png", etag: fromBuffer.etag })]), `${name}: bytes, then the trailer`);
    t.deepEqual(decodeTrailer(file.length, file, name), { meta: { contentType: "image/png", etag: fromBuffer.etag }, size: data.length });
  }
  t.deepEqual(await store.head("u/1/a.bin"), { size: 1000, contentType: "image/png", etag: fromBuffer.etag });
  t.deepEqual(await readObject(store, "u/1/b.bin"), data);
  await store.delete(["u/1/a.bin", "u/1/b.bin"]);
  t.deepEqual(readdirSync(join(root, "u/1")), []);
});

test("[fs] trailer layout: sizes around the one-read threshold, a long content type, ranges past the end, empty objects", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "cms-objstore-trailer-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const store = createFsObjectStore(root);
  const shortType = "application/octet-stream";
  const longType = `application/x-${"a".repeat(6000)}`; // a trailer longer than the 4 KiB tail read
  const trailerBytes = encodeTrailer({ contentType: shortType, etag: "0".repeat(32) }).length;
  const sizes = [0, 1, 65_536 - trailerBytes - 1, 65_536 - trailerBytes, 65_536, 300_000];
  for (const contentType of [shortType, longType]) {
    for (const size of sizes) {
      const data = randomBytes(size);
      const key = `u/2/${size}-${contentType.length}.bin`;
      await store.put(key, size % 2 ? chunked(data, 65_536) : data, { contentType });
      const what = `${size} bytes, type of ${contentType.length}`;
      t.deepEqual(await store.head(key), { size, contentType, etag: sha256(data).slice(0, 32) }, what);
      const got = (await store.get(key))!;
      t.is(got.info.size, size, what);
      t.deepEqual(await readAll(got.body), data, `${what}: whole`);
      if (size > 0) {
        const from = Math.max(0, size - 5);
        t.deepEqual(await readObject(store, key, { range: { start: from, end: size + 100 } }), data.subarray(from), `${what}: a range past the end stops at the bytes`);
        t.deepEqual(await readObject(store, key, { range: { start: 0, end: 0 } }), data.subarray(0, 1), `${what}: the first byte`);
      }
      t.is((await readObject(store, key, { range: { start: size, end: size + 10 } }))!.length, 0, `${what}: a range after the bytes is empty`);
    }
  }
});

test("[fs] a store on a root with a .meta folder keeps the sidecar layout, and what it wrote reads back after a restart", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "cms-objstore-sidecar-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, ".meta"));
  const first = createFsObjectStore(root);
  t.is(first.layout, "sidecar");
  const data = randomBytes(70_000);
  await first.put("u/3/a.bin", data, { contentType: "image/jpeg" });
  t.deepEqual(readFileSync(join(root, "u/3/a.bin")), data, "the file is the bytes alone");
  t.true(existsSync(join(root, ".meta/u/3/a.bin.json")));
  const again = createFsObjectStore(root);
  t.is(again.layout, "sidecar");
  t.deepEqual(await readObject(again, "u/3/a.bin"), data);
  t.is((await again.head("u/3/a.bin"))?.contentType, "image/jpeg");
  await again.delete(["u/3/a.bin"]);
  t.false(existsSync(join(root, ".meta/u/3/a.bin.json")), "its metadata file goes with it");
});

test("[fs] the layout is recorded when a store first opens: a .meta folder made later (an older version after a downgrade) does not change it", async (t) => {
  const root = join(mkdtempSync(join(tmpdir(), "cms-objstore-layout-")), "objects");
  t.teardown(() => rmSync(join(root, ".."), { recursive: true, force: true }));
  const first = createFsObjectStore(root);
  t.is(readFileSync(join(root, ".layout"), "utf8"), "trailer\n");
  const data = randomBytes(100);
  await first.put("u/5/new.bin", data, { contentType: "text/plain" });
  // What an older version would leave: the bytes alone, and their metadata file.
  mkdirSync(join(root, ".meta/u/5"), { recursive: true });
  writeFileSync(join(root, ".meta/u/5/old.bin.json"), JSON.stringify({ contentType: "text/plain", etag: "e" }));
  writeFileSync(join(root, "u/5/old.bin"), "old bytes");
  const reopened = createFsObjectStore(root);
  t.is(reopened.layout, "trailer");
  t.deepEqual(await readObject(reopened, "u/5/new.bin"), data, "the trailer store's objects read as they were written");
  await t.throwsAsync(readObject(reopened, "u/5/old.bin"), { message: /no valid metadata trailer/ }, "refused, not served with wrong bytes");
  // Two processes opening one new store at once agree.
  const shared = join(root, "..", "shared");
  const layouts = [createFsObjectStore(shared), createFsObjectStore(shared)].map((st) => st.layout);
  t.deepEqual(layouts, ["trailer", "trailer"]);
  // A root that cannot be made (here: under a file) still opens, as before the layout was
  // recorded: a process that never stores an object must start.
  writeFileSync(join(root, "..", "a-file"), "x");
  const unwritable = createFsObjectStore(join(root, "..", "a-file", "objects"));
  t.is(unwritable.layout, "trailer");
  t.is(await unwritable.head("u/1/x.bin"), undefined);
  // A store made before the trailer is recorded as sidecar on its first open under this version.
  const legacy = join(root, "..", "legacy");
  mkdirSync(join(legacy, ".meta"), { recursive: true });
  t.is(createFsObjectStore(legacy).layout, "sidecar");
  t.is(readFileSync(join(legacy, ".layout"), "utf8"), "sidecar\n");
});

test("[fs] in the trailer layout a file without a valid trailer is an error, never served as an object", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "cms-objstore-trailer-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const store = createFsObjectStore(root);
  mkdirSync(join(root, "u/4"), { recursive: true });
  writeFileSync(join(root, "u/4/small.bin"), "bytes without a trailer");
  writeFileSync(join(root, "u/4/large.bin"), randomBytes(100_000));
  for (const key of ["u/4/small.bin", "u/4/large.bin"]) {
    await t.throwsAsync(store.get(key), { message: /no valid metadata trailer/ }, key);
    await t.throwsAsync(store.head(key), { message: /no valid metadata trailer/ }, key);
  }
  const trailer = encodeTrailer({ contentType: "text/plain", etag: "e" });
  t.throws(() => decodeTrailer(5, trailer, "x"), { message: /length beyond the file/ }, "a trailer longer than the file");
  const broken = Buffer.from(trailer);
  broken[0] = 0x7b + 1; // the JSON's first byte
  t.throws(() => decodeTrailer(broken.length, broken, "x"), { message: /unreadable JSON/ });
  t.deepEqual(decodeTrailer(100 + trailer.length, trailer.subarray(trailer.length - 12), "x"), { need: trailer.length }, "a tail too short asks for the trailer's length");
});

test("[fs] temporaries a dead writer left are removed when a store opens; recent ones (a write in progress) stay", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "cms-objstore-stale-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  t.deepEqual(await removeStaleTemporaries(root), [], "no .tmp folder yet");
  mkdirSync(join(root, ".tmp"));
  const old = (Date.now() - STALE_TEMPORARY_MS - 60_000) / 1000;
  for (const name of ["dead-1.tmp", "dead-2.tmp", "live.tmp"]) writeFileSync(join(root, ".tmp", name), "partial");
  utimesSync(join(root, ".tmp", "dead-1.tmp"), old, old);
  t.deepEqual(await removeStaleTemporaries(root), ["dead-1.tmp"]);
  utimesSync(join(root, ".tmp", "dead-2.tmp"), old, old);
  const store = createFsObjectStore(root);
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline && readdirSync(join(root, ".tmp")).includes("dead-2.tmp")) await new Promise((r) => setTimeout(r, 20));
  t.deepEqual(readdirSync(join(root, ".tmp")), ["live.tmp"], "opening the store removed the stale one");
  store.close();
});

test("[fs] a whole object is read with its end known: one read of its size, not 1 MiB buffers; an empty one reads empty", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "cms-objstore-read-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const store = createFsObjectStore(root);
  const bytes = Buffer.alloc(200_000, 7);
  await store.put("u/1/image.jpg", bytes, { contentType: "image/jpeg" });
  const got = (await store.get("u/1/image.jpg"))!;
  t.is((got.body as unknown as { end: number }).end, bytes.length - 1, "the stream knows where the file ends");
  const parts: Buffer[] = [];
  for await (const part of got.body) parts.push(part as Buffer);
  t.is(parts.length, 1);
  t.is(parts[0]!.buffer.byteLength, bytes.length, "no larger buffer behind the chunk");
  t.true(Buffer.concat(parts).equals(bytes));
  await store.put("u/1/empty.bin", Buffer.alloc(0), { contentType: "application/octet-stream" });
  t.is((await readObject(store, "u/1/empty.bin"))!.length, 0);
  t.deepEqual(await readObject(store, "u/1/image.jpg", { range: { start: 10, end: 19 } }), bytes.subarray(10, 20));
});

test("[fs] nothing is written outside the root for an escaping key", async (t) => {
  const parent = mkdtempSync(join(tmpdir(), "cms-objstore-parent-"));
  chmodSync(parent, 0o700);
  try {
    const root = join(parent, "root");
    const store = createFsObjectStore(root);
    await t.throwsAsync(store.put("../outside.txt", Buffer.from("x"), { contentType: "text/plain" }));
    t.false(existsSync(join(parent, "outside.txt")));
    t.false(existsSync(join(parent, "outside.txt.meta.json")));
    t.is(await store.presignPut("a/b", { contentType: "text/plain", contentLength: 1, expiresInSeconds: 60 }), undefined);
    t.is(store.kind, "fs");
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});

// ---- S3 ------------------------------------------------------------------------------------
const S3_ON = Boolean(process.env.S3_ENDPOINT);
const bucket = `cms-objstore-${randomBytes(5).toString("hex")}`;
const s3Config = () => loadConfig({ ...process.env, S3_BUCKET: bucket }, []).s3!;

async function s3Admin() {
  const s3 = await import("@aws-sdk/client-s3");
  const cfg = s3Config();
  const client = new s3.S3Client({
    endpoint: cfg.endpoint,
    region: cfg.region,
    forcePathStyle: cfg.forcePathStyle,
    credentials: { accessKeyId: cfg.accessKeyId, secretAccessKey: cfg.secretAccessKey },
  });
  return {
    async list(prefix: string): Promise<string[]> {
      const res = await client.send(new s3.ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
      return (res.Contents ?? []).map((o) => o.Key!);
    },
    async dropBucket(): Promise<void> {
      for (;;) {
        const res = await client.send(new s3.ListObjectsV2Command({ Bucket: bucket }));
        const keys = (res.Contents ?? []).map((o) => o.Key!);
        if (!keys.length) break;
        for (const Key of keys) await client.send(new s3.DeleteObjectCommand({ Bucket: bucket, Key }));
      }
      await client.send(new s3.DeleteBucketCommand({ Bucket: bucket }));
      client.destroy();
    },
  };
}

registerSuite("s3", async () => {
  const store = await createS3ObjectStore(s3Config());
  const admin = await s3Admin();
  return {
    store,
    list: (prefix) => admin.list(prefix),
    temporaries: () => admin.list(".tmp-"),
    // In a child process: on S3 some of these failures escape as uncaught exceptions.
    attemptPut: (key, spec) => putInChild({ store: "s3", bucket, key, ...spec }),
    async cleanup() { store.close(); await admin.dropBucket(); },
  };
}, S3_ON);

const FIXTURE = besideModule(import.meta.url, "./fixtures/put-attempt.ts");
function putInChild(spec: Record<string, unknown>): Promise<PutOutcome> {
  return new Promise((resolvePut, reject) => {
    execFile(process.execPath, [...nodeArgsOf(FIXTURE), JSON.stringify({ hangMs: 8000, ...spec })], { env: process.env, timeout: 60_000 }, (err, stdout, stderr) => {
      const line = stdout.split("\n").find((l) => l.startsWith("{"));
      if (!line) { reject(new Error(`put-attempt printed nothing (${err?.message ?? ""}): ${stderr}`)); return; }
      resolvePut(JSON.parse(line) as PutOutcome);
    });
  });
}

(S3_ON ? test.serial : test.skip)("[s3] presignPut gives a URL a plain fetch PUT can use; the object is then readable", async (t) => {
  const store = await createS3ObjectStore(s3Config());
  try {
    t.is(store.kind, "s3");
    const key = `store://${randomUUID()}/cover.jpg`;
    const data = randomBytes(2048);
    const url = await store.presignPut(key, { contentType: "image/jpeg", contentLength: data.length, expiresInSeconds: 300 });
    t.truthy(url);
    t.regex(url!, /^https?:\/\//);
    t.true(url!.includes(bucket));
    const res = await fetch(url!, { method: "PUT", headers: { "content-type": "image/jpeg" }, body: data });
    t.true(res.ok, `PUT answered ${res.status}: ${await res.text()}`);
    const got = await store.get(key);
    t.truthy(got);
    t.is(got!.info.contentType, "image/jpeg");
    t.is(got!.info.size, data.length);
    t.deepEqual(await readAll(got!.body), data);
    await store.delete([key]);
  } finally {
    store.close();
  }
});

// ---- key helpers -----------------------------------------------------------------------------
// ---- the S3 client's sockets and timeouts, against an endpoint of the test's own -------------

/**
 * An S3 endpoint that answers a store's start (HeadBucket) and a HEAD of any key, answers a GET
 * with its headers and the first 64 KiB of a 100 MiB object and then sends nothing more (as a
 * download whose client reads slowly looks to the store's socket, the gateway streaming it to that
 * client; and a store that stopped sending mid-object, to a reader that reads), answers a GET of
 * a key under `slow/` at once with a body that takes two seconds to send, answers a PUT once its
 * body is in (a copy at once), and takes requests for keys under `silent/` without ever answering
 * them.
 */
async function stallingS3(): Promise<{ config: S3Config; gets(): number; silentRequests(): number; putBytes: number[]; close(): Promise<void> }> {
  let gets = 0;
  let silentRequests = 0;
  const putBytes: number[] = [];
  const server = http.createServer((req, res) => {
    const path = new URL(req.url!, "http://s3").pathname;
    if (path.includes("/silent/")) { silentRequests++; return; }
    if (path.includes("/slow/")) {
      // Answered at once, its body sent in five parts 400 ms apart.
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(5 * 1024), etag: '"e"' }).flushHeaders();
      let parts = 0;
      const timer = setInterval(() => { res.write(Buffer.alloc(1024, 7)); if (++parts === 5) { clearInterval(timer); res.end(); } }, 400);
      res.on("close", () => clearInterval(timer));
      return;
    }
    if (req.method === "PUT" && req.headers["x-amz-copy-source"]) {
      const xml = '<?xml version="1.0" encoding="UTF-8"?><CopyObjectResult><ETag>"e"</ETag><LastModified>2026-01-01T00:00:00.000Z</LastModified></CopyObjectResult>';
      res.writeHead(200, { "content-type": "application/xml", "content-length": String(Buffer.byteLength(xml)) }).end(xml);
      return;
    }
    if (req.method === "PUT" && path.split("/").length > 2) {
      // Answered once the whole body is in, as S3 does.
      let received = 0;
      req.on("data", (d: Buffer) => { received += d.length; });
      req.on("end", () => { putBytes.push(received); res.writeHead(200, { etag: '"e"', "content-length": "0" }).end(); });
      return;
    }
    if (req.method === "DELETE") { res.writeHead(204).end(); return; }
    if (req.method === "GET" && path.split("/").length > 2) {
      gets++;
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(100 * 1024 * 1024), etag: '"e"' });
      res.write(Buffer.alloc(64 * 1024));
      return;
    }
    res.writeHead(200, { "content-type": "text/plain", "content-length": "5", etag: '"e"' }).end();
  });
  await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    config: { endpoint, publicEndpoint: endpoint, bucket: "stalling", region: "us-east-1", accessKeyId: "k", secretAccessKey: "s", forcePathStyle: true },
    gets: () => gets,
    silentRequests: () => silentRequests,
    putBytes,
    async close() {
      server.closeAllConnections();
      await new Promise((closed) => server.close(closed));
    },
  };
}

/** `promise`, or a failure saying `what` once `ms` have passed (a hang detector: what it bounds takes milliseconds). */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} (nothing within ${ms} ms)`)), ms); })]);
  } finally {
    clearTimeout(timer);
  }
}

/** `work` with an S3 store (the given timeouts, else the production ones) on a stallingS3 endpoint, both closed after it. */
async function onStallingS3(timeouts: S3Timeouts | undefined, work: (store: ObjectStore, s3: Awaited<ReturnType<typeof stallingS3>>) => Promise<void>): Promise<void> {
  const s3 = await stallingS3();
  const store = await createS3ObjectStore(s3.config, timeouts);
  try {
    await work(store, s3);
  } finally {
    store.close();
    await s3.close();
  }
}

test("[s3] sixty downloads whose clients read slowly hold up nothing: each has its socket, and a HEAD beside them answers", async (t) => {
  await onStallingS3(undefined, async (store, s3) => {
    // The SDK's own agent allowed 50 sockets: the 51st GET and the HEAD waited for one of them,
    // that is, for a slow client to finish its download.
    const downloads = Array.from({ length: 60 }, (_, i) => store.get(`store://u/1/big-${i}.bin`));
    await within(10_000, (async () => { while (s3.gets() < 50) await new Promise((r) => setTimeout(r, 10)); })(), "fifty downloads did not start");
    const info = await within(10_000, store.head("store://u/1/small.txt"), "the HEAD waited behind the downloads");
    t.is(info?.size, 5);
    const opened = await within(10_000, Promise.all(downloads), "downloads waited for a socket");
    t.is(opened.length, 60);
    t.is(s3.gets(), 60);
    for (const o of opened) o!.body.destroy();
  });
});

test("[s3] an endpoint that takes a request and never answers: each attempt ends at the answer's timeout, and the call fails as transient (503)", async (t) => {
  await onStallingS3({ connectMs: 1_000, answerMs: 300, bodyIdleMs: 2_000 }, async (store, s3) => {
    for (const call of [
      () => store.head("store://u/1/silent/a.txt"),
      () => store.get("store://u/1/silent/a.txt"),
      () => store.delete(["store://u/1/silent/a.txt"]),
      () => store.put("store://u/1/silent/b.txt", Buffer.from("hello"), { contentType: "text/plain" }),
    ]) {
      const before = s3.silentRequests();
      const failure = await within(10_000, call().then(() => undefined, (err: unknown) => err), "a call to the silent endpoint hung");
      t.truthy(failure, "the call failed");
      t.true(isTransientFailure(failure), String(failure));
      t.true(s3.silentRequests() > before, "the request reached the endpoint");
    }
  });
});

test("[s3] the answer's timeout bounds the wait for an answer, not the body: a download whose bytes come slower than it, with pauses longer than it, is read whole", async (t) => {
  await onStallingS3({ connectMs: 1_000, answerMs: 300, bodyIdleMs: 2_000 }, async (store) => {
    const got = await store.get("store://u/1/slow/a.bin");
    t.is((await readAll(got!.body)).length, 5 * 1024);
  });
});

test("[s3] a download whose store stops sending while its reader waits fails as transient after bodyIdleMs; a reader that is behind is never cut", async (t) => {
  await onStallingS3({ connectMs: 1_000, answerMs: 300, bodyIdleMs: 500 }, async (store) => {
    // The endpoint sends 64 KiB of the object and then nothing more.
    const got = await store.get("store://u/1/stalled.bin");
    // Unread bytes wait in the body's buffers: its reader is behind, not the store.
    await new Promise((r) => setTimeout(r, 1_500));
    t.false(got!.body.destroyed, "a reader that is behind is not cut");
    let bytes = 0;
    const failure = await within(5_000, (async () => { for await (const chunk of got!.body) bytes += (chunk as Buffer).length; })().then(() => undefined, (err: unknown) => err), "the stalled download hung");
    t.is(bytes, 64 * 1024, "everything the store sent was read first");
    t.truthy(failure, "the download failed");
    t.true(isTransientFailure(failure), String(failure));
  });
});

test("[s3] a streamed PUT has no answer's timeout: an uploader sending slower than it, with pauses longer than it, stores its object", async (t) => {
  await onStallingS3({ connectMs: 1_000, answerMs: 300, bodyIdleMs: 2_000 }, async (store, s3) => {
    // The PUT target's body: five parts 400 ms apart, as a slow client sends them.
    const uploader = Readable.from((async function* () {
      for (let i = 0; i < 5; i++) { await new Promise((r) => setTimeout(r, 400)); yield Buffer.alloc(1024, i); }
    })());
    const stored = await store.put("store://u/1/upload.bin", uploader, { contentType: "application/octet-stream", contentLength: 5 * 1024 });
    t.is(stored.size, 5 * 1024);
    t.deepEqual(s3.putBytes, [5 * 1024]);
  });
});

test("objectKeyOf strips store:// and keeps normal keys", (t) => {
  t.is(objectKeyOf("store://u1/c2/170_name.png"), "u1/c2/170_name.png");
  t.is(objectKeyOf("u1/c2/file"), "u1/c2/file");
  t.is(objectKeyOf("a/b../c..d"), "a/b../c..d");
});

test("objectKeyOf refuses segments starting with a dot (store metadata lives there)", (t) => {
  for (const bad of ["a/..b/c", ".meta/x", "a/.tmp/y", "u/c/.hidden"]) t.throws(() => objectKeyOf(bad), undefined, bad);
});

test("objectKeyOf refuses '..', '.', absolute, empty segments, backslashes and NUL", (t) => {
  for (const bad of [
    "..", "../x", "a/../b", "a/..", "store://../x", "store://a/../../etc/passwd",
    "./a", "a/./b",
    "/abs", "store:///abs",
    "", "store://", "a//b", "a/", "store://a/b/",
    "a\\b", "..\\x", "a\0b",
  ]) {
    t.throws(() => objectKeyOf(bad), { message: /invalid object key/ }, JSON.stringify(bad));
  }
});

test("cover keys: freshCoverKeys names both images so that mayBeCoverKey knows them; other names are not covers", (t) => {
  const { main, thumbnail } = freshCoverKeys("u1", 7);
  t.regex(main, /^store:\/\/u1\/7\/\d+_cover\.webp$/);
  t.regex(thumbnail, /^store:\/\/u1\/7\/\d+_cover_thumb\.webp$/);
  t.true(mayBeCoverKey(main));
  t.true(mayBeCoverKey(thumbnail));
  t.false(mayBeCoverKey("store://u1/7/123_photo.jpg"));
  t.false(mayBeCoverKey("store://u1/7/123_thumb.webp"));
});

test("isStoreKey", (t) => {
  t.true(isStoreKey("store://a/b"));
  t.true(isStoreKey("store://"));
  t.false(isStoreKey("https://example.com/a"));
  t.false(isStoreKey("a/b"));
  t.false(isStoreKey("STORE://a"));
  t.false(isStoreKey(" store://a"));
});

/** A file of `room` bytes at most, taking at most `perCall` bytes a write: what it holds, the positions asked. */
function smallFile(perCall: number, room = Infinity): PositionalWriter & { bytes: Buffer; positions: number[] } {
  const file = {
    bytes: Buffer.alloc(0),
    positions: [] as number[],
    async writev(buffers: Buffer[], position: number) {
      file.positions.push(position);
      if (position !== file.bytes.length) throw new Error(`asked to write at ${position}, the file holds ${file.bytes.length}`);
      const fits = Math.min(perCall, room - position);
      if (fits <= 0) throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC", errno: -28, syscall: "write" });
      const taken = Buffer.concat(buffers).subarray(0, fits);
      file.bytes = Buffer.concat([file.bytes, taken]);
      return { bytesWritten: taken.length };
    },
  };
  return file;
}

test("writeAll: a write taking fewer bytes than given goes on from where it stopped, across the parts, until all is written", async (t) => {
  const body = randomBytes(20);
  const trailer = Buffer.from("trail");
  const file = smallFile(7);
  await writeAll(file, [body, trailer]);
  t.deepEqual(file.bytes, Buffer.concat([body, trailer]));
  t.deepEqual(file.positions, [0, 7, 14, 21]);
  // One call when the whole fits, as before.
  const whole = smallFile(Infinity);
  await writeAll(whole, [body, trailer]);
  t.deepEqual(whole.positions, [0]);
});

test("writeAll: a disk filling up mid-write ends in the file system's ENOSPC (a full disk, answered 503), not a short count", async (t) => {
  const file = smallFile(1 << 20, 1000);
  const err = await t.throwsAsync(writeAll(file, [randomBytes(4000), Buffer.from("trailer")]));
  t.is((err as NodeJS.ErrnoException).code, "ENOSPC");
  t.true(isTransientFailure(err));
  t.deepEqual(file.positions, [0, 1000], "the part that fitted, then the rest refused");
  // A write that takes nothing and says nothing is an error too, not a loop.
  const stuck: PositionalWriter = { async writev() { return { bytesWritten: 0 }; } };
  await t.throwsAsync(writeAll(stuck, [Buffer.from("x")]), { message: /took no bytes at 0 of 1/ });
});

