/**
 * A stream whose bytes can stop coming while its reader waits for them: an S3 download whose
 * store stopped sending mid-object, a client that stopped sending its PUT's body half-way. The
 * reader would wait for ever (or for the server's hour-long request timeout). A socket idle timeout
 * cannot tell that from a reader that is behind (a client reading a download slowly, a store
 * writing an upload slowly: the socket then waits on the reader), so the bytes are watched
 * instead: the stream fails once `idleMs` pass with nothing arriving while every buffer between
 * the source and its reader is empty. While bytes wait unread, the reader is behind and the watch
 * starts again.
 */
import { Transform, pipeline as pipelineCallback, type Readable } from "node:stream";

export interface IdleBoundOptions {
  /** The stream's failure once it stalled. */
  stalled: () => Error;
  /**
   * Leave the source whole when the stream fails or its reader destroys it (a server's request,
   * whose socket still carries the answer); by default the source is destroyed with it (a
   * download's body, which lets go of its socket).
   */
  keepSource?: boolean;
}

/**
 * Calls `onIdle` once, after `idleMs` in which every look (four a bound) found `progressed()`
 * false; the one watch of this file's stream and of the gateway's downloads. Returns its stop.
 */
export function watchIdle(idleMs: number, progressed: () => boolean, onIdle: () => void): () => void {
  let progressAt = Date.now();
  const watch = setInterval(() => {
    if (progressed()) progressAt = Date.now();
    else if (Date.now() - progressAt >= idleMs) { clearInterval(watch); onIdle(); }
  }, Math.max(10, Math.floor(idleMs / 4))).unref();
  return () => clearInterval(watch);
}

/** `source`, passed through a stream that fails with `opts.stalled()` after `idleMs` without a byte while its reader waits. */
export function idleBounded(source: Readable, idleMs: number, opts: IdleBoundOptions): Readable {
  let arrived = 0;
  let seen = 0;
  const watched = new Transform({
    transform(chunk, _encoding, done) { arrived++; done(null, chunk); },
  });
  // Progress: a chunk arrived since the last look, or bytes wait unread (the reader is behind).
  const progressed = () => {
    const fresh = arrived !== seen;
    seen = arrived;
    return fresh || watched.readableLength > 0 || watched.writableLength > 0 || source.readableLength > 0;
  };
  const stopWatch = watchIdle(idleMs, progressed, () => {
    if (opts.keepSource) { source.unpipe(watched); source.pause(); }
    watched.destroy(opts.stalled());
  });
  if (!opts.keepSource) {
    // Either side's end or failure ends both.
    pipelineCallback(source, watched, stopWatch);
    return watched;
  }
  // The source's failure (a client gone mid-body) fails the stream; the stream's end or failure
  // lets go of the source without destroying it. As a server's request does, the stream fails
  // its readers only: a failure while none reads it (before the store began, after it gave up)
  // is not an uncaught exception; a reader that comes later still sees it.
  watched.on("error", () => {});
  const onSourceClosed = () => { if (!source.readableEnded) watched.destroy(Object.assign(new Error("The body ended before its end: its sender went away."), { code: "ECONNRESET" })); };
  source.once("error", onSourceClosed);
  source.once("close", onSourceClosed);
  watched.once("close", () => {
    stopWatch();
    source.off("error", onSourceClosed);
    source.off("close", onSourceClosed);
    source.unpipe(watched);
  });
  source.pipe(watched);
  return watched;
}
