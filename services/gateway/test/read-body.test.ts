/** The bounded body reader every gateway route that takes a body uses, and the PUT body's idle bound. */
import test from "ava";
import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { AppError } from "@cms/platform";
import { readBody, uploadBody } from "../src/http/read-body.js";

/** A request stream with headers, fed the given chunks; `cut` ends it with the error a lost client gives. */
function request(chunks: string[], headers: Record<string, string> = {}, cut = false): IncomingMessage {
  const stream = new PassThrough();
  Object.assign(stream, { headers });
  for (const c of chunks) stream.write(c);
  if (cut) setImmediate(() => stream.destroy(Object.assign(new Error("aborted"), { code: "ECONNRESET" })));
  else stream.end();
  return stream as unknown as IncomingMessage;
}

test("a body within the bound is returned whole", async (t) => {
  t.is((await readBody(request(["ab", "cd"]), { maxBytes: 4, idleMs: 1000 })).toString(), "abcd");
});

test("a declared Content-Length beyond the bound is refused before reading, with the route's detail", async (t) => {
  const err = await t.throwsAsync(readBody(request([], { "content-length": "100" }), { maxBytes: 10, idleMs: 1000, tooLarge: "This form is too large." }), { instanceOf: AppError });
  t.is(err!.code, "payload_too_large");
  t.is(err!.detail, "This form is too large.");
});

test("a body that grows beyond the bound while read is refused 413", async (t) => {
  const err = await t.throwsAsync(readBody(request(["12345", "67890", "x"]), { maxBytes: 10, idleMs: 1000 }), { instanceOf: AppError });
  t.is(err!.code, "payload_too_large");
  t.is(err!.status, 413);
});

test("a body cut short by the client is the client's error (400 invalid_request), not a server failure", async (t) => {
  const err = await t.throwsAsync(readBody(request(["abc"], { "content-length": "50" }, true), { maxBytes: 100, idleMs: 1000 }), { instanceOf: AppError });
  t.is(err!.code, "invalid_request");
  t.is(err!.status, 400);
  t.regex(err!.detail, /ended after 3 bytes.*Content-Length 50/);
});

/** A request stream with headers that sends `chunks`, one every `everyMs`, then nothing (it never ends). */
function trickling(chunks: string[], everyMs: number, headers: Record<string, string> = { "content-length": "1000" }): IncomingMessage {
  const stream = new PassThrough();
  Object.assign(stream, { headers });
  chunks.forEach((c, i) => setTimeout(() => stream.write(c), i * everyMs));
  return stream as unknown as IncomingMessage;
}

test("a body that stops arriving is refused 408 once it sent nothing for the idle bound, saying how much came", async (t) => {
  const started = Date.now();
  const err = await t.throwsAsync(readBody(trickling(["abc"], 0), { maxBytes: 10_000, idleMs: 200 }), { instanceOf: AppError });
  t.true(Date.now() - started >= 190);
  t.is(err!.code, "invalid_request");
  t.is(err!.status, 408);
  t.regex(err!.detail, /stopped arriving: nothing for 0.2 s after 3 bytes \(Content-Length 1000\)/);
});

test("a body that keeps arriving, each part within the idle bound, is read whole however long it takes all told", async (t) => {
  const parts = ["a", "b", "c", "d", "e", "f"];
  const stream = trickling(parts, 80, { "content-length": "6" });
  setTimeout(() => (stream as unknown as PassThrough).end(), parts.length * 80);
  t.is((await readBody(stream, { maxBytes: 100, idleMs: 200 })).toString(), "abcdef");
});

test("the PUT body's stream fails 408 when the client stops sending while the store waits, and leaves the request whole", async (t) => {
  const req = trickling(["abc"], 0);
  const body = uploadBody(req, 200);
  const read: string[] = [];
  const err = await t.throwsAsync(async () => { for await (const c of body) read.push(String(c)); }, { instanceOf: AppError });
  t.is(err!.status, 408);
  t.deepEqual(read, ["abc"]);
  t.false((req as unknown as PassThrough).destroyed, "the request (and its socket) stays for the answer");
});

test("the PUT body's stream does not fail while the store is behind: bytes waiting unread restart the watch", async (t) => {
  const stream = new PassThrough();
  Object.assign(stream, { headers: { "content-length": "6" } });
  stream.end("abcdef");
  const body = uploadBody(stream as unknown as IncomingMessage, 100);
  // A store that takes three times the idle bound before it reads anything.
  await new Promise((r) => setTimeout(r, 300));
  const read: string[] = [];
  for await (const c of body) read.push(String(c));
  t.is(read.join(""), "abcdef");
});

test("the PUT body's stream fails quietly when the client goes away before the store reads: the store then sees the failure", async (t) => {
  const stream = new PassThrough();
  Object.assign(stream, { headers: { "content-length": "100" } });
  stream.write("abc");
  const body = uploadBody(stream as unknown as IncomingMessage, 1000);
  // The client leaves while the store is still getting ready (no reader yet): no uncaught exception.
  stream.destroy(Object.assign(new Error("aborted"), { code: "ECONNRESET" }));
  await new Promise((r) => setTimeout(r, 50));
  const err = await t.throwsAsync(async () => { for await (const _ of body) { /* the store */ } });
  t.is((err as NodeJS.ErrnoException).code, "ECONNRESET");
});
