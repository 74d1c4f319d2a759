/**
 * The PUT target's answer when the object store fails: a store that loses its connection after
 * the whole body arrived is the contract's retryable 503 unavailable, not the client's 400 (a
 * client that goes away mid-body is the e2e uploads test's "a body cut short leaves nothing").
 */
import test from "ava";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Readable } from "node:stream";
import { signGrant, type Logger, type ObjectStore } from "@cms/platform";
import { createUploadHandler } from "../src/http/upload-routes.ts";

const SECRET = "upload-routes-test-secret";
const quiet = { debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } } as unknown as Logger;

/** A store whose put reads the body to its end (or until it fails), then fails with ECONNRESET. */
function resettingStore(seen: { bytes: number; bodyError?: string }): ObjectStore {
  return {
    kind: "s3",
    async put(_key: string, body: Buffer | Readable) {
      try {
        for await (const chunk of body as Readable) seen.bytes += (chunk as Buffer).length;
      } catch (err) {
        seen.bodyError = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
        throw err;
      }
      throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    },
    async get() { return undefined; },
    async head() { return undefined; },
    async delete() {},
    async presignPut() { return undefined; },
    close() {},
  } as ObjectStore;
}

async function serve(t: import("ava").ExecutionContext, store: ObjectStore) {
  const handle = createUploadHandler({ store, grantSecret: SECRET, log: quiet });
  const server = http.createServer((req, res) => { void handle(req, res, req.url!.slice(1)); });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => server.close());
  return (server.address() as AddressInfo).port;
}

const grant = (length: number) => signGrant(SECRET, { purpose: "upload", exp: Date.now() + 60_000, key: "u/1/file.bin", content_type: "application/octet-stream", content_length: length, user_id: "u" });

test("the store losing its connection after the whole body arrived is 503 unavailable, retryable", async (t) => {
  const seen = { bytes: 0 };
  const port = await serve(t, resettingStore(seen));
  const body = Buffer.alloc(5000, 1);
  const res = await fetch(`http://127.0.0.1:${port}/${encodeURIComponent(grant(body.length))}`, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body });
  t.is(res.status, 503);
  const answer = await res.json() as { error: string };
  t.is(answer.error, "unavailable");
  t.truthy(res.headers.get("retry-after"));
  t.is(seen.bytes, body.length);
});
