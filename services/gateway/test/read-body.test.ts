/** The bounded body reader every gateway route that takes a body uses. */
import test from "ava";
import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { AppError } from "@cms/platform";
import { readBody } from "../src/http/read-body.js";

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
  t.is((await readBody(request(["ab", "cd"]), 4)).toString(), "abcd");
});

test("a declared Content-Length beyond the bound is refused before reading, with the route's detail", async (t) => {
  const err = await t.throwsAsync(readBody(request([], { "content-length": "100" }), 10, "This form is too large."), { instanceOf: AppError });
  t.is(err!.code, "payload_too_large");
  t.is(err!.detail, "This form is too large.");
});

test("a body that grows beyond the bound while read is refused 413", async (t) => {
  const err = await t.throwsAsync(readBody(request(["12345", "67890", "x"]), 10), { instanceOf: AppError });
  t.is(err!.code, "payload_too_large");
  t.is(err!.status, 413);
});

test("a body cut short by the client is the client's error (400 invalid_request), not a server failure", async (t) => {
  const err = await t.throwsAsync(readBody(request(["abc"], { "content-length": "50" }, true), 100), { instanceOf: AppError });
  t.is(err!.code, "invalid_request");
  t.is(err!.status, 400);
  t.regex(err!.detail, /ended after 3 bytes.*Content-Length 50/);
});
