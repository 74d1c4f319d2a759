/**
 * Reading a request body under a size bound and an idle bound, for every route that takes one
 * (the op endpoint, the MCP endpoint, the OAuth endpoints, the account forms, the upload PUTs, a
 * drop link's files): a body beyond the size bound, declared or sent, is refused before more of
 * it is kept; one that ends early is the client's error; one that stops arriving (nothing for
 * `idleMs`, CLIENT_IDLE_MS) is refused 408, so that a client that stalls half-way does not hold
 * its request open for the server's hour-long request timeout. A 408 closes its connection
 * (statusHeaders in answers.ts): the rest of the body is never read.
 */
import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import { AppError, idleBounded } from "@cms/platform";

export interface BodyBounds {
  maxBytes: number;
  /** Milliseconds the body may send nothing; 0: no bound. */
  idleMs: number;
  /** The 413's detail. */
  tooLarge?: string;
}

/** The 408 of a body that stopped arriving after `size` bytes. */
function bodyStalled(req: IncomingMessage, idleMs: number, size?: number): AppError {
  const declared = req.headers["content-length"];
  return new AppError("invalid_request",
    `The request body stopped arriving: nothing for ${idleMs / 1000} s${size === undefined ? "" : ` after ${size} bytes`} (Content-Length ${declared ?? "not given"}). Send it again.`,
    {}, 408);
}

/**
 * The request body, refused (413 payload_too_large, `tooLarge` as its detail) beyond `maxBytes`,
 * 400 invalid_request when it ends before its end, 408 when nothing of it arrives for `idleMs`.
 */
export function readBody(req: IncomingMessage, bounds: BodyBounds): Promise<Buffer> {
  const { maxBytes, idleMs } = bounds;
  const tooLarge = bounds.tooLarge ?? `The request body exceeds ${maxBytes} bytes.`;
  if (Number(req.headers["content-length"]) > maxBytes) return Promise.reject(new AppError("payload_too_large", tooLarge));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const idle = idleMs > 0 ? setTimeout(() => settle(bodyStalled(req, idleMs, size)), idleMs) : undefined;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) { settle(new AppError("payload_too_large", tooLarge)); return; }
      chunks.push(chunk);
      idle?.refresh();
    };
    const onEnd = () => settle();
    // The client stopped sending before the end (a body shorter than its Content-Length).
    const onCut = () => settle(new AppError("invalid_request", `The request body ended after ${size} bytes, before its end (Content-Length ${req.headers["content-length"] ?? "not given"}).`));
    function settle(failure?: AppError): void {
      clearTimeout(idle);
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onCut);
      req.off("close", onCut);
      if (!failure) { resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)); return; }
      // The rest is not read: the answer goes out and the connection closes after it.
      req.pause();
      reject(failure);
    }
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onCut);
    req.once("close", onCut);
  });
}

/**
 * A PUT's body as a stream for the object store, failed with the 408 of `bodyStalled` when
 * nothing of it arrives for `idleMs` while the store waits for more (a store writing slowly is
 * never the reason), or when the client goes away; the request itself is left whole, so that the
 * answer still goes out on its connection.
 */
export function uploadBody(req: IncomingMessage, idleMs: number): Readable {
  if (idleMs <= 0) return req;
  return idleBounded(req, idleMs, { stalled: () => bodyStalled(req, idleMs), keepSource: true });
}
