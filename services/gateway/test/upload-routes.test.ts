/**
 * The PUT target's answer when the object store fails: a store that loses its connection, or
 * whose disk is full, is the contract's retryable 503 unavailable, after the whole body arrived
 * or before it, not the client's 400; a client that goes away mid-body is the 400 (nobody reads
 * it, and it is not logged as a failure of ours; that nothing is stored then is the e2e uploads
 * test's "a body cut short leaves nothing").
 */
import test from "ava";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Writable, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { signGrant, type Logger, type ObjectStore } from "@cms/platform";
import { createUploadHandler } from "../src/http/upload-routes.ts";

const SECRET = "upload-routes-test-secret";
const quiet = { debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } } as unknown as Logger;
/** A logger that keeps the `err` of each error it is given in `logged`. */
const capturingLog = (logged: unknown[]) => ({ ...quiet, error(fields: { err?: unknown }) { logged.push(fields.err); } }) as unknown as Logger;
/** A write on a full disk, as node:fs fails it. */
const enospc = () => Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC", errno: -28, syscall: "write" });

/** A store that only takes puts, by `put` (reads find nothing). */
function storeWith(kind: ObjectStore["kind"], put: (key: string, body: Buffer | Readable) => Promise<never>): ObjectStore {
  return {
    kind,
    put,
    async get() { return undefined; },
    async head() { return undefined; },
    async delete() {},
    async presignPut() { return undefined; },
    close() {},
  } as unknown as ObjectStore;
}

/** A store whose put reads the body to its end (or until it fails), then fails with ECONNRESET. */
function resettingStore(seen: { bytes: number; bodyError?: string }): ObjectStore {
  return failingStore(seen, () => Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }));
}

/** A store whose put reads the body to its end (or until it fails), then fails with `failure()`. */
function failingStore(seen: { bytes: number; bodyError?: string }, failure: () => Error): ObjectStore {
  return storeWith("s3", async (_key, body) => {
    try {
      for await (const chunk of body as Readable) seen.bytes += (chunk as Buffer).length;
    } catch (err) {
      seen.bodyError = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw err;
    }
    throw failure();
  });
}

/** A store whose writes fail with ENOSPC once `room` bytes of the body were read. */
function fillingStore(room: number, seen: { bytes: number }): ObjectStore {
  return storeWith("fs", async (_key, body) => {
    await pipeline(body as Readable, new Writable({
      write(chunk: Buffer, _enc, cb) {
        seen.bytes += chunk.length;
        cb(seen.bytes > room ? enospc() : null);
      },
    }));
    throw new Error("the body fitted; the test wants it not to");
  });
}

/** Whether the server's connections all closed within `ms` (polled), the client having gone. */
async function connectionsClosed(server: http.Server, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
    const open = await new Promise<number>((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
    if (open === 0) return true;
  }
  return false;
}

/** The handler on a port; `answered` gets each answer's status, whether or not the client was there to read it. */
async function serve(t: import("ava").ExecutionContext, store: ObjectStore, log: Logger = quiet, answered: number[] = [], bodyIdleMs = 60_000) {
  const handle = createUploadHandler({ store, grantSecret: SECRET, log, bodyIdleMs });
  // Keep-alive as long as the gateway's own server keeps it (http/server.ts): a connection left
  // open is not ended by Node's default 5 s.
  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const writeHead = res.writeHead.bind(res);
    res.writeHead = ((status: number, ...rest: unknown[]) => { answered.push(status); return (writeHead as (...a: unknown[]) => typeof res)(status, ...rest); }) as typeof res.writeHead;
    void handle(req, res, req.url!.slice(1));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => server.close());
  return { port: (server.address() as AddressInfo).port, server };
}

const grant = (length: number) => signGrant(SECRET, { purpose: "upload", exp: Date.now() + 60_000, key: "u/1/file.bin", content_type: "application/octet-stream", content_length: length, user_id: "u" });

test("the store losing its connection after the whole body arrived is 503 unavailable, retryable", async (t) => {
  const seen = { bytes: 0 };
  const { port } = await serve(t, resettingStore(seen));
  const body = Buffer.alloc(5000, 1);
  const res = await fetch(`http://127.0.0.1:${port}/${encodeURIComponent(grant(body.length))}`, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body });
  t.is(res.status, 503);
  const answer = await res.json() as { error: string };
  t.is(answer.error, "unavailable");
  t.truthy(res.headers.get("retry-after"));
  t.is(seen.bytes, body.length);
});

test("a full disk under the store is 503 unavailable, retryable, with the store's error logged and not answered", async (t) => {
  const seen = { bytes: 0 };
  const logged: unknown[] = [];
  const log = capturingLog(logged);
  const { port } = await serve(t, failingStore(seen, enospc), log);
  const body = Buffer.alloc(5000, 1);
  const res = await fetch(`http://127.0.0.1:${port}/${encodeURIComponent(grant(body.length))}`, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body });
  t.is(res.status, 503);
  const answer = await res.json() as { error: string; detail: string };
  t.is(answer.error, "unavailable");
  t.notRegex(answer.detail, /ENOSPC|no space/);
  t.truthy(res.headers.get("retry-after"));
  t.is((logged[0] as NodeJS.ErrnoException | undefined)?.code, "ENOSPC", "the operator sees the cause");
});

/**
 * A PUT of `length` bytes written 64 KiB at a time until the answer comes; the answer read
 * whole, the client stops sending and closes its side cleanly (as curl does), leaving the
 * connection's end to the server.
 */
function putUntilAnswered(url: string, length: number): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string; sent: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "PUT", headers: { "content-type": "application/octet-stream", "content-length": length } });
    let sent = 0;
    let answered = false;
    const chunk = Buffer.alloc(64 * 1024, 1);
    const writeMore = () => {
      while (!answered && sent < length) {
        const part = chunk.subarray(0, Math.min(chunk.length, length - sent));
        sent += part.length;
        if (!req.write(part)) { req.once("drain", writeMore); return; }
      }
    };
    req.on("response", (res) => {
      answered = true;
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => { body += d; });
      res.on("end", () => { req.socket?.end(); resolve({ status: res.statusCode!, headers: res.headers, body, sent }); });
    });
    req.on("error", (err) => { if (!answered) reject(err); });
    writeMore();
  });
}

test("a disk filling up mid-body is 503 unavailable too, answered to the client still sending, not its 400; the connection closes", async (t) => {
  const seen = { bytes: 0 };
  const { port, server } = await serve(t, fillingStore(1_000_000, seen));
  const length = 20_000_000;
  const res = await putUntilAnswered(`http://127.0.0.1:${port}/${encodeURIComponent(grant(length))}`, length);
  t.is(res.status, 503);
  t.is(res.headers.connection, "close", "the rest of the body is not waited for");
  t.is((JSON.parse(res.body) as { error: string }).error, "unavailable");
  t.truthy(res.headers["retry-after"]);
  t.true(res.sent < length, "answered while the client was still sending");
  // Nothing reads a body the store gave up on: a connection left open (its unread bytes ahead of
  // the client's end) would hold the server's close, a SIGTERM's shutdown, until the request
  // timed out minutes later.
  t.true(await connectionsClosed(server, 10_000), "the connection closed");
});

for (const [how, leave] of [
  ["closing its connection", (req: http.ClientRequest) => req.destroy()],
  ["half-closing it (its end sent, its answer awaited)", (req: http.ClientRequest) => req.socket?.end()],
] as const) {
  test(`a client cutting its body short, ${how}, is the client's 400, not logged as a failure of ours`, async (t) => {
    const seen: { bytes: number; bodyError?: string } = { bytes: 0 };
    const answered: number[] = [];
    const logged: unknown[] = [];
    const log = capturingLog(logged);
    const { port } = await serve(t, resettingStore(seen), log, answered);
    const length = 200_000;
    await new Promise<void>((resolve) => {
      const req = http.request(`http://127.0.0.1:${port}/${encodeURIComponent(grant(length))}`, { method: "PUT", headers: { "content-type": "application/octet-stream", "content-length": length } });
      req.on("error", () => resolve());
      req.on("close", () => resolve());
      req.write(Buffer.alloc(50_000, 1), () => setTimeout(() => leave(req), 50));
    });
    for (let i = 0; i < 100 && !answered.length; i++) await new Promise((r) => setTimeout(r, 20));
    t.deepEqual(answered, [400]);
    t.deepEqual(logged, []);
    t.is(seen.bytes, 50_000);
    t.is(seen.bodyError, "ECONNRESET", "the store saw the body fail, the client's leaving");
  });
}

test("a client that stops sending its body half-way is answered 408 once the idle bound passes, the connection closed, nothing stored", async (t) => {
  const seen: { bytes: number; bodyError?: string } = { bytes: 0 };
  const answered: number[] = [];
  const { port, server } = await serve(t, resettingStore(seen), quiet, answered, 300);
  const length = 200_000;
  const answer = await new Promise<{ status: number; connection?: string; body: string }>((resolve, reject) => {
    const req = http.request(`http://127.0.0.1:${port}/${encodeURIComponent(grant(length))}`, { method: "PUT", headers: { "content-type": "application/octet-stream", "content-length": length } });
    req.on("response", (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => { body += d; });
      res.on("end", () => resolve({ status: res.statusCode!, connection: res.headers.connection, body }));
    });
    req.on("error", reject);
    // Part of the body, then nothing: the connection stays open, as a stalled client's does.
    req.write(Buffer.alloc(50_000, 1));
  });
  t.is(answer.status, 408);
  t.is(answer.connection, "close");
  t.regex((JSON.parse(answer.body) as { detail: string }).detail, /stopped arriving: nothing for 0.3 s/);
  t.is(seen.bytes, 50_000);
  t.is(seen.bodyError, "invalid_request", "the store saw the body fail with the 408 itself");
  t.true(await connectionsClosed(server, 5_000), "the connection closed");
});
