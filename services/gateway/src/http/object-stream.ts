/**
 * Bytes out of the object store, streamed (never buffered) with Content-Type, Content-Length,
 * ETag, Range (206/416), If-None-Match (304) and Content-Disposition: the one streamer behind
 * media.download at the op endpoint (streams_object operations), media.download_url links and
 * describe's media proxy URLs. A client that stops reading is let go after `readerIdleMs`
 * (CLIENT_IDLE_MS), with the file or store connection its download held.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { StoredObject } from "@cms/contracts/common/v1/common_pb";
import { AppError, watchIdle, type Logger, type ObjectStore } from "@cms/platform";
import { contentDisposition, etagMatches, ifRangeHolds, parseRange } from "../domain/http-range.js";

/** The object an operation or a link names (the `object` of a streams_object result). */
export interface ObjectRef { store_key: string; content_type?: string | null; filename?: string; sha256?: string | null }

/** The ObjectRef of a common.v1.StoredObject that a service answered with. */
export function objectRefOf(o: StoredObject): ObjectRef {
  return { store_key: o.storeKey, content_type: o.contentType ?? null, filename: o.filename, sha256: o.sha256 ?? null };
}

/** How an object is offered: shown in place or saved, with any extra headers of the route. */
export interface StreamOptions { disposition: "inline" | "attachment"; headers?: Record<string, string> }

/** Answers a request with a stored object; throws not_found before any byte when it is missing. */
export type ObjectStreamer = (req: IncomingMessage, res: ServerResponse, ref: ObjectRef, opts: StreamOptions) => Promise<void>;

/**
 * The largest write of an answer watched for a stalled reader: progress shows at the socket one
 * whole write at a time, so a file's 1 MiB reads are written in four. (The kernel reports room in
 * the socket only once a third of its send buffer drained, which can be more than this.)
 */
const WRITE_SLICE_BYTES = 256 * 1024;

/** Passes buffers on in slices of at most `max` bytes (no copy). */
function slicedTo(max: number): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      for (let at = 0; at < chunk.length; at += max) this.push(chunk.subarray(at, at + max));
      done();
    },
  });
}

/**
 * Ends an answer whose client stopped reading it: nothing of it taken by the network for
 * `idleMs` while bytes wait to go. TCP keeps a peer's closed window open for ever, and the answer
 * holds what it streams from (a file, a connection to the object store) all that time: enough
 * such clients, and the process runs out of file descriptors. A store that is slow to send is
 * never the reason (nothing waits then; its own bound is the S3 body's). Returns the watch's stop.
 */
function endWhenReaderStalls(res: ServerResponse, idleMs: number, onStall: () => void): () => void {
  const socket = res.socket;
  if (!socket || idleMs <= 0) return () => {};
  // Progress is a write handed to the socket or one the kernel finished taking (a write counts
  // only once whole, hence the answer's writes of WRITE_SLICE_BYTES at most), or nothing waiting.
  const mark = () => `${socket.bytesWritten}:${socket.writableLength}`;
  let last = mark();
  const progressed = () => {
    const now = mark();
    const moved = now !== last;
    last = now;
    return moved || res.writableLength === 0;
  };
  return watchIdle(idleMs, progressed, () => { onStall(); res.destroy(); });
}

/** The streamer over an object store; an answer whose client reads nothing of it for `readerIdleMs` is ended. */
export function createObjectStreamer(store: ObjectStore, log: Logger, readerIdleMs: number): ObjectStreamer {
  return async function streamObject(req, res, ref, opts) {
    const info = await store.head(ref.store_key);
    if (!info) throw new AppError("not_found", "The stored file is missing.");
    const etag = `"${info.etag || info.size.toString(16)}"`;
    const filename = ref.filename ?? ref.store_key.split("/").pop() ?? "file";
    const common: Record<string, string> = {
      etag,
      "accept-ranges": "bytes",
      "cache-control": "private, max-age=0, must-revalidate",
      "x-content-type-options": "nosniff",
      // Stored files are user content: never run as a page on the API origin.
      "content-security-policy": "sandbox; default-src 'none'",
      "content-disposition": contentDisposition(opts.disposition, filename),
      ...opts.headers,
    };
    if (etagMatches(header(req, "if-none-match"), etag)) {
      res.writeHead(304, common);
      res.end();
      return;
    }
    let range = parseRange(header(req, "range"), info.size);
    if (range.kind !== "full" && !ifRangeHolds(header(req, "if-range"), etag)) range = { kind: "full" };
    if (range.kind === "unsatisfiable") {
      const body = JSON.stringify({ error: "invalid_request", detail: `The requested range is outside the ${info.size}-byte file.`, size_bytes: info.size });
      res.writeHead(416, { ...common, "content-range": `bytes */${info.size}`, "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    const partial = range.kind === "partial" ? range : undefined;
    const obj = info.size === 0 && !partial ? undefined : await store.get(ref.store_key, partial ? { start: partial.start, end: partial.end } : undefined);
    if (!obj && info.size !== 0) throw new AppError("not_found", "The stored file is missing.");
    const headers: Record<string, string> = {
      ...common,
      "content-type": ref.content_type || info.contentType || "application/octet-stream",
      "content-length": String(partial ? partial.end - partial.start + 1 : info.size),
    };
    if (partial) headers["content-range"] = `bytes ${partial.start}-${partial.end}/${info.size}`;
    res.writeHead(partial ? 206 : 200, headers);
    if (!obj || req.method === "HEAD") {
      obj?.body.destroy();
      res.end();
      return;
    }
    const stopWatch = endWhenReaderStalls(res, readerIdleMs, () => log.info({ key: ref.store_key, idle_ms: readerIdleMs }, "download's client stopped reading; connection closed"));
    try {
      await (readerIdleMs > 0 ? pipeline(obj.body, slicedTo(WRITE_SLICE_BYTES), res) : pipeline(obj.body, res));
    } catch (err) {
      // The client went away, or the store failed mid-stream: the response cannot be repaired.
      log.debug({ err, key: ref.store_key }, "object stream ended early");
      obj.body.destroy();
      res.destroy();
    } finally {
      stopWatch();
    }
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}
