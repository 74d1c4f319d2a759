/**
 * Unary Connect calls between the processes of a split system, both ends, without connect-node's
 * per-call machinery. connect-node runs every unary call through its generic streaming plumbing:
 * four abort controllers and two deadline timers per call on the client, an AbortError (a
 * DOMException) and a ConnectError built when every call ends on either side, async iterables
 * for a single message each way, web Headers converted twice. On this machine that cost 0.5 ms of
 * a 0.75 ms call with an empty handler (bench/notes/split.md): more than a Connect hop may add.
 *
 * What is here speaks the same Connect protocol for the one case services use between
 * themselves, a unary call with a binary message (POST /<service>/<method>, application/proto,
 * connect-timeout-ms, errors as the protocol's JSON with their details, trailers as "trailer-"
 * headers), reusing connect's own protocol functions for the encoding of headers and errors. The
 * interceptors (tracing, caller assertions, error mapping, validation) and the handlers are the
 * ones connect-node runs. Everything else goes to connect-node: streaming calls of the client,
 * and on the server every request that is not a plain binary unary Connect call (gRPC, gRPC-web,
 * JSON, GET, compressed bodies, an unknown path, a malformed deadline): internal callers and
 * tools such as grpcurl reach the same services through the library's own handler.
 */
import http2 from "node:http2";
import { create, fromBinary, isMessage, toBinary, type DescMessage } from "@bufbuild/protobuf";
import {
  appendHeaders, Code, ConnectError, createContextValues,
  type ConnectRouter, type Interceptor, type MethodImplSpec, type Transport, type UnaryRequest, type UnaryResponse,
} from "@connectrpc/connect";
import { invokeUnaryImplementation } from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus, contentTypeUnaryJson, contentTypeUnaryProto, errorFromJsonBytes, errorToJsonBytes, headerTimeout, parseTimeout,
  requestHeader, trailerDemux, trailerMux, validateResponse,
} from "@connectrpc/connect/protocol-connect";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { chainInterceptors, collectImplementations, NEVER_ABORTED, unaryHandlerContext } from "./direct-transport.js";

const { NGHTTP2_CANCEL } = http2.constants;
/** Node gives header names in lower case; connect's constant is capitalised. */
const TIMEOUT_HEADER = headerTimeout.toLowerCase();

/** Node's request headers to web Headers, without the pseudo-headers. */
function webHeaders(node: http2.IncomingHttpHeaders): Headers {
  const header = new Headers();
  for (const key in node) {
    if (key.charCodeAt(0) === 58 /* ":" */) continue;
    const value = node[key];
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) header.append(key, v);
    else header.set(key, value);
  }
  return header;
}

/** Web Headers to node's outgoing headers (repeated names joined, as Headers iterates them). */
function nodeHeaders(header: Headers, into: http2.OutgoingHttpHeaders): http2.OutgoingHttpHeaders {
  header.forEach((value, key) => { into[key] = value; });
  return into;
}

const concat = (chunks: Buffer[], length: number): Buffer => (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length));

/**
 * The Connect code of a failed stream or connection, as connect-node gives it (its mapping is not
 * exported): a reset or destroyed stream is Aborted (the peer went away mid-call), a refused or
 * unreachable peer Unavailable, anything else Internal; the node error stays the cause.
 */
function connectErrorFromStreamFailure(reason: unknown): ConnectError {
  if (reason instanceof ConnectError) return reason;
  const codes = new Set<string>();
  for (let e: unknown = reason, depth = 0; e instanceof Error && depth < 8; e = (e as Error & { cause?: unknown }).cause, depth++) {
    const code = (e as Error & { code?: unknown }).code;
    if (typeof code === "string") codes.add(code);
  }
  const has = (...names: string[]) => names.some((n) => codes.has(n));
  const code = has("ERR_STREAM_WRITE_AFTER_END", "ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM", "ECONNRESET") ? Code.Aborted
    : has("ETIMEDOUT", "ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED") ? Code.Unavailable
    : Code.Internal;
  const ce = ConnectError.from(reason, code);
  if (ce !== reason) ce.cause = reason;
  return ce;
}

/** The Connect code of a stream the peer reset (none for NO_ERROR and STREAM_CLOSED), as connect-node maps it. */
function connectErrorFromResetCode(rstCode: number): ConnectError | undefined {
  const c = http2.constants;
  const code =
    rstCode === c.NGHTTP2_REFUSED_STREAM ? Code.Unavailable
    : rstCode === c.NGHTTP2_CANCEL ? Code.Canceled
    : rstCode === c.NGHTTP2_ENHANCE_YOUR_CALM ? Code.ResourceExhausted
    : rstCode === c.NGHTTP2_INADEQUATE_SECURITY || rstCode === c.NGHTTP2_HTTP_1_1_REQUIRED ? Code.PermissionDenied
    : [c.NGHTTP2_PROTOCOL_ERROR, c.NGHTTP2_INTERNAL_ERROR, c.NGHTTP2_FLOW_CONTROL_ERROR, c.NGHTTP2_SETTINGS_TIMEOUT,
      c.NGHTTP2_FRAME_SIZE_ERROR, c.NGHTTP2_COMPRESSION_ERROR, c.NGHTTP2_CONNECT_ERROR].includes(rstCode) ? Code.Internal
    : undefined;
  return code === undefined ? undefined : new ConnectError(`http/2 stream closed with error code 0x${rstCode.toString(16)}`, code);
}

export interface UnaryTransportOptions {
  /** Origin of the service, e.g. http://collections:9090. */
  baseUrl: string;
  /** The HTTP/2 connection to it (connects, keeps alive with PINGs, reconnects after a GOAWAY). */
  sessionManager: Http2SessionManager;
  interceptors: Interceptor[];
  /** Carries the streaming calls (connect-node's transport to the same service). */
  streams: Transport;
}

/**
 * A client transport for unary calls over one HTTP/2 connection: the client interceptors, then
 * one HTTP/2 stream with the binary request; the answer decoded, or the protocol's error thrown as
 * a ConnectError with its code, message, details and metadata. The deadline (timeoutMs) is sent in
 * connect-timeout-ms and enforced here: past it the stream is cancelled and the call fails with
 * deadline_exceeded; an aborted signal cancels the stream and fails the call as canceled.
 */
export function createUnaryTransport(opts: UnaryTransportOptions): Transport {
  const { sessionManager: sm } = opts;
  const base = opts.baseUrl.replace(/\/+$/, "");

  const send = (req: UnaryRequest): Promise<UnaryResponse> => {
    // The deadline travels in its header (interceptors may pass a copy of the request on).
    const timeoutHeader = req.header.get(headerTimeout);
    const timeoutMs = timeoutHeader === null ? undefined : Number(timeoutHeader);
    const body = toBinary(req.method.input, req.message);
    const path = `/${req.service.typeName}/${req.method.name}`;
    return new Promise<UnaryResponse>((resolve, reject) => {
      let stream: http2.ClientHttp2Stream | undefined;
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const signal = req.signal;
      const fail = (err: ConnectError) => {
        if (settled) return;
        settled = true;
        cleanup();
        if (stream && !stream.closed) stream.close(NGHTTP2_CANCEL);
        reject(err);
      };
      const onAbort = () => fail(ConnectError.from(signal.reason, Code.Canceled));
      const cleanup = () => {
        if (timer) clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
      };
      if (signal.aborted) { onAbort(); return; }
      signal.addEventListener("abort", onAbort);
      if (timeoutMs !== undefined) timer = setTimeout(() => fail(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeoutMs);

      const header = nodeHeaders(req.header, {});
      sm.request("POST", path, header, {}).then((s) => {
        stream = s;
        if (settled) { if (!s.closed) s.close(NGHTTP2_CANCEL); return; }
        let status = 0;
        let responseHeader: Headers | undefined;
        const chunks: Buffer[] = [];
        let length = 0;
        s.on("response", (h) => { status = Number(h[":status"] ?? 0); responseHeader = webHeaders(h); });
        s.on("data", (chunk: Buffer) => { chunks.push(chunk); length += chunk.length; sm.notifyResponseByteRead(s); });
        s.on("end", () => {
          if (settled) return;
          try {
            if (!responseHeader) throw new ConnectError("the connection to the service closed before the answer", Code.Aborted);
            const { isUnaryError, unaryError } = validateResponse("unary", true, status, responseHeader);
            const [h, t] = trailerDemux(responseHeader);
            if (isUnaryError) throw errorFromJsonBytes(concat(chunks, length), appendHeaders(h, t), unaryError!);
            const message = fromBinary(req.method.output, concat(chunks, length));
            settled = true;
            cleanup();
            resolve({ stream: false, service: req.service, method: req.method, header: h, trailer: t, message } as UnaryResponse);
          } catch (err) {
            fail(ConnectError.from(err, Code.Internal));
          }
        });
        // A stream the peer reset errors before it closes: its reset code says more than the error.
        s.on("error", (err) => fail((s.rstCode ? connectErrorFromResetCode(s.rstCode) : undefined) ?? connectErrorFromStreamFailure(err)));
        // Closed before the answer, not by us: a stream ends with CANCEL when its connection
        // dies (the service was killed or its network went away), which is Aborted, as
        // connect-node reports a reset connection (the gateway answers 503 unavailable).
        s.on("close", () => {
          if (settled) return;
          const reset = s.rstCode === NGHTTP2_CANCEL ? undefined : connectErrorFromResetCode(s.rstCode);
          fail(reset ?? new ConnectError("the connection to the service closed before the answer was complete", Code.Aborted));
        });
        s.end(body);
      }, (err) => fail(connectErrorFromStreamFailure(err)));
    });
  };

  const call = chainInterceptors(opts.interceptors, send);

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const timeout = timeoutMs === undefined || timeoutMs <= 0 ? undefined : timeoutMs;
      const req = {
        stream: false, service: method.parent, method, requestMethod: "POST", url: `${base}/${method.parent.typeName}/${method.name}`,
        header: requestHeader("unary", true, timeout, header, false),
        contextValues: contextValues ?? createContextValues(),
        message: isMessage(input, method.input) ? input : create(method.input, input as never),
        signal: signal ?? NEVER_ABORTED,
      } as UnaryRequest;
      try {
        return await call(req) as never;
      } catch (err) {
        throw ConnectError.from(err);
      }
    },
    stream: (...args) => opts.streams.stream(...args),
  };
}

export interface UnaryFastPathOptions {
  /** Registers the services served, as for a ConnectRouter. */
  routes: (router: ConnectRouter) => void;
  /** Server interceptors, the same ones the fallback handler runs. */
  interceptors: Interceptor[];
  /** Every request the fast path does not take (connectNodeAdapter's handler). */
  fallback: (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void;
  /**
   * The largest request body read (the body is read before any interceptor authenticates the
   * caller); a larger one is refused as resource_exhausted. Give connect-node's handler the same.
   */
  readMaxBytes: number;
}

/**
 * The server side: a request handler for an HTTP/2 server that answers binary unary Connect
 * calls of the registered services itself (the handler context, the server interceptors, the
 * implementation, as connect-node runs them) and hands every other request to `fallback`.
 */
export function createUnaryFastPath(opts: UnaryFastPathOptions): (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void {
  const unary = new Map<string, MethodImplSpec<DescMessage, DescMessage> & { kind: "unary" }>();
  for (const [name, spec] of collectImplementations(opts.routes)) if (spec.kind === "unary") unary.set(`/${name}`, spec as never);

  return (req, res) => {
    const h = req.headers;
    const spec = req.method === "POST" ? unary.get(req.url) : undefined;
    const encoding = h["content-encoding"];
    const timeoutHeader = h[TIMEOUT_HEADER] as string | undefined;
    const timeout = timeoutHeader === undefined ? undefined : parseTimeout(timeoutHeader, Number.MAX_SAFE_INTEGER);
    if (!spec || h["content-type"] !== contentTypeUnaryProto || (encoding !== undefined && encoding !== "identity") || timeout?.error) {
      opts.fallback(req, res);
      return;
    }
    const chunks: Buffer[] = [];
    let length = 0;
    const onData = (chunk: Buffer) => {
      length += chunk.length;
      if (length <= opts.readMaxBytes) { chunks.push(chunk); return; }
      req.off("data", onData);
      req.off("end", onEnd);
      chunks.length = 0;
      refuse(req.stream, new ConnectError(`the request is larger than ${opts.readMaxBytes} bytes`, Code.ResourceExhausted));
    };
    const onEnd = () => { void answer(spec, req, concat(chunks, length), timeout?.timeoutMs); };
    req.on("data", onData);
    req.on("end", onEnd);
  };

  /** Answers the protocol's error and stops the rest of the request (RST_STREAM after the answer). */
  function refuse(stream: http2.ServerHttp2Stream, error: ConnectError): void {
    if (stream.destroyed || stream.closed) return;
    const out = errorToJsonBytes(error, {});
    stream.respond({ ":status": codeToHttpStatus(error.code), "content-type": contentTypeUnaryJson, "content-length": out.byteLength });
    stream.end(out, () => stream.close(http2.constants.NGHTTP2_NO_ERROR));
  }

  async function answer(spec: MethodImplSpec<DescMessage, DescMessage> & { kind: "unary" }, req: http2.Http2ServerRequest, body: Buffer, timeoutMs: number | undefined): Promise<void> {
    const stream = req.stream;
    const abort = new AbortController();
    let answered = false;
    // A peer that resets the stream before the answer cancels the call; a deadline ends it too.
    const onClose = () => { if (!answered) abort.abort(new ConnectError("the caller cancelled the call", Code.Canceled)); };
    stream.once("close", onClose);
    const timer = timeoutMs === undefined ? undefined
      : setTimeout(() => abort.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeoutMs);
    const context = unaryHandlerContext(spec.method, {
      protocolName: "connect", url: req.url, signal: abort.signal, requestHeader: webHeaders(req.headers),
      deadline: timeoutMs === undefined ? undefined : Date.now() + timeoutMs,
    });
    let status = 200;
    let out: Uint8Array;
    let contentType = contentTypeUnaryProto;
    try {
      const input = decodeRequest(spec.method.input, body);
      const message = await invokeUnaryImplementation(spec, context, input, opts.interceptors);
      out = toBinary(spec.method.output, message);
    } catch (err) {
      const error = err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal, undefined, undefined, err);
      status = codeToHttpStatus(error.code);
      contentType = contentTypeUnaryJson;
      error.metadata.forEach((value, key) => { context.responseHeader.set(key, value); });
      out = errorToJsonBytes(error, {});
    } finally {
      answered = true;
      if (timer) clearTimeout(timer);
      stream.off("close", onClose);
    }
    if (stream.destroyed || stream.closed) return;
    const headers = nodeHeaders(trailerMux(context.responseHeader, context.responseTrailer), {});
    headers[":status"] = status;
    headers["content-type"] = contentType;
    headers["content-length"] = out.byteLength;
    try {
      stream.respond(headers);
      stream.end(out);
    } catch (err) {
      // The stream went away between the check and the answer: nobody is left to tell.
      stream.destroy(err as Error);
    }
  }
}

function decodeRequest(schema: DescMessage, body: Uint8Array) {
  try {
    return fromBinary(schema, body);
  } catch (err) {
    throw new ConnectError(`the request is not a valid ${schema.typeName}: ${(err as Error).message}`, Code.InvalidArgument);
  }
}

