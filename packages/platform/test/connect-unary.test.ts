/**
 * The split system's unary calls between processes: createUnaryTransport (client) and
 * createUnaryFastPath (server) speak the Connect protocol's binary unary calls with each other and
 * with connect-node's own client and handler; every other request reaches connect-node's handler
 * and every streaming call connect-node's transport.
 */
import test from "ava";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient, type ConnectRouter, type HandlerContext, type Interceptor, type Transport } from "@connectrpc/connect";
import { compressionGzip, connectNodeAdapter, createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus as Status } from "@cms/contracts/grpc/health/v1/health_pb";
import { ErrorDetailSchema } from "@cms/contracts/common/v1/common_pb";
import { createUnaryFastPath, createUnaryTransport } from "../src/connect-unary.ts";
import { callDeadlineKey, deadlineValues } from "../src/call-scope.ts";
import { AppError, fromConnectError, toConnectError } from "../src/errors.ts";

/** What the test service saw of its last call. */
interface Seen { header?: Headers; timeoutMs?: number; deadline?: number; aborted?: unknown; protocol?: string }

/**
 * Health.Check answers by the service name it is asked about: "ok" SERVING, "gone" a contract
 * error, "crash" a plain Error, "slow" waits for its signal (or 5 s), "headers" echoes x-test
 * and sets a response header and trailer. Health.Watch streams two answers.
 */
function healthRoutes(seen: Seen) {
  return (r: ConnectRouter) => r.service(Health, {
    async check(req, ctx: HandlerContext) {
      seen.header = ctx.requestHeader;
      seen.timeoutMs = ctx.timeoutMs();
      seen.deadline = ctx.values.get(callDeadlineKey);
      seen.protocol = ctx.protocolName;
      switch (req.service) {
        case "gone": throw toConnectError(new AppError("not_found", "No such service here.", { service: "gone" }));
        case "crash": throw new Error("secret internals");
        case "slow":
          await new Promise<void>((resolve) => {
            const done = () => { seen.aborted = ctx.signal.reason; resolve(); };
            if (ctx.signal.aborted) done(); else ctx.signal.addEventListener("abort", done);
            setTimeout(resolve, 5000).unref();
          });
          return { status: Status.NOT_SERVING };
        case "headers":
          ctx.responseHeader.set("x-answer", `saw ${ctx.requestHeader.get("x-test")}`);
          ctx.responseTrailer.set("x-trail", "t1");
          return { status: Status.SERVING };
        default: return { status: Status.SERVING };
      }
    },
    async *watch() {
      yield { status: Status.SERVING };
      yield { status: Status.NOT_SERVING };
    },
  });
}

/** An HTTP/2 server on a free port; its URL, and how many requests its fallback took. */
async function serve(t: import("ava").ExecutionContext, opts: { fastPath: boolean; interceptors?: Interceptor[]; seen: Seen; readMaxBytes?: number }) {
  const routes = healthRoutes(opts.seen);
  const readMaxBytes = opts.readMaxBytes ?? 1024 * 1024;
  const adapter = connectNodeAdapter({ routes, interceptors: opts.interceptors ?? [], readMaxBytes, contextValues: deadlineValues });
  const counts = { fallback: 0 };
  const fallback = (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => { counts.fallback++; adapter(req, res); };
  const server = http2.createServer(opts.fastPath ? createUnaryFastPath({ routes, interceptors: opts.interceptors ?? [], fallback, readMaxBytes }) : fallback);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => { sessions.add(s); s.once("close", () => sessions.delete(s)); });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => { for (const s of sessions) s.destroy(); server.close(); });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, counts };
}

function unaryTransport(t: import("ava").ExecutionContext, baseUrl: string, interceptors: Interceptor[] = []): Transport {
  const sessionManager = new Http2SessionManager(baseUrl);
  t.teardown(() => sessionManager.abort());
  return createUnaryTransport({
    baseUrl, sessionManager, interceptors,
    streams: createConnectTransport({ baseUrl, httpVersion: "2", sessionManager, useBinaryFormat: true, interceptors }),
  });
}

test("a unary call crosses on the fast path: message, interceptors' headers, response headers and trailers", async (t) => {
  const seen: Seen = {};
  const serverSaw: string[] = [];
  const serverSide: Interceptor = (next) => async (req) => { serverSaw.push(`${req.method.name} ${req.header.get("x-caller")}`); return next(req); };
  const { url, counts } = await serve(t, { fastPath: true, interceptors: [serverSide], seen });
  const clientSide: Interceptor = (next) => async (req) => { req.header.set("x-caller", "gateway"); return next(req); };
  const client = createClient(Health, unaryTransport(t, url, [clientSide]));
  let header: Headers | undefined;
  let trailer: Headers | undefined;
  const res = await client.check({ service: "headers" }, { headers: { "x-test": "hello" }, onHeader: (h) => { header = h; }, onTrailer: (tr) => { trailer = tr; } });
  t.is(res.status, Status.SERVING);
  t.is(header?.get("x-answer"), "saw hello");
  t.is(trailer?.get("x-trail"), "t1");
  t.deepEqual(serverSaw, ["Check gateway"]);
  t.is(seen.header?.get("connect-protocol-version"), "1");
  t.is(seen.protocol, "connect");
  t.is(counts.fallback, 0, "the fast path answered");
  // Nothing asks the peer to compress: gzip between services costs more than it saves.
  t.is(seen.header?.get("accept-encoding"), null);
  t.is(seen.header?.get("connect-accept-encoding"), null);
});

for (const fastPath of [true, false]) {
  const where = fastPath ? "fast path" : "connect-node's handler";
  test(`errors cross with their code, message and contract details (${where})`, async (t) => {
    const { url } = await serve(t, { fastPath, seen: {} });
    const client = createClient(Health, unaryTransport(t, url));
    const err = await t.throwsAsync(client.check({ service: "gone" }));
    t.true(err instanceof ConnectError);
    const ce = err as ConnectError;
    t.is(ce.code, Code.NotFound);
    t.is(ce.rawMessage, "No such service here.");
    const [detail] = ce.findDetails(ErrorDetailSchema);
    t.is(detail?.code, "not_found");
    const app = fromConnectError(err);
    t.is(app.code, "not_found");
    t.deepEqual(app.extra, { service: "gone" });
    const crash = await t.throwsAsync(client.check({ service: "crash" })) as ConnectError;
    t.is(crash.code, Code.Internal);
    t.notRegex(crash.message, /secret internals/, "a plain error's text stays on the server");
  });

  test(`the deadline reaches the handler, and a call past it is deadline_exceeded on both sides (${where})`, async (t) => {
    const seen: Seen = {};
    const { url } = await serve(t, { fastPath, seen });
    const client = createClient(Health, unaryTransport(t, url));
    const asked = Date.now();
    await client.check({ service: "ok" }, { timeoutMs: 5000 });
    t.true(seen.timeoutMs !== undefined && seen.timeoutMs > 3000 && seen.timeoutMs <= 5000, String(seen.timeoutMs));
    // In the context values too, where the authentication interceptor takes it into the call's scope.
    t.true(seen.deadline !== undefined && seen.deadline >= asked + 4000 && seen.deadline <= Date.now() + 5000, String(seen.deadline));
    await client.check({ service: "ok" });
    t.is(seen.timeoutMs, undefined, "no deadline without a timeout");
    t.is(seen.deadline, undefined);
    const started = Date.now();
    const err = await t.throwsAsync(client.check({ service: "slow" }, { timeoutMs: 150 })) as ConnectError;
    t.is(err.code, Code.DeadlineExceeded);
    t.true(Date.now() - started < 3000);
    for (let i = 0; i < 100 && seen.aborted === undefined; i++) await sleep(20);
    t.true(seen.aborted instanceof ConnectError, "the handler's signal aborted");
  });
}

test("a caller that aborts gets canceled, and the handler's signal aborts", async (t) => {
  const seen: Seen = {};
  const { url } = await serve(t, { fastPath: true, seen });
  const client = createClient(Health, unaryTransport(t, url));
  const abort = new AbortController();
  const call = client.check({ service: "slow" }, { signal: abort.signal });
  await sleep(100);
  abort.abort();
  const err = await t.throwsAsync(call) as ConnectError;
  t.is(err.code, Code.Canceled);
  for (let i = 0; i < 100 && seen.aborted === undefined; i++) await sleep(20);
  t.is((seen.aborted as ConnectError).code, Code.Canceled);
  const already = await t.throwsAsync(client.check({ service: "ok" }, { signal: abort.signal })) as ConnectError;
  t.is(already.code, Code.Canceled, "an aborted signal fails the call before it is sent");
});

test("every other request reaches connect-node's handler: JSON, gRPC, compressed bodies, streams, unknown methods", async (t) => {
  const seen: Seen = {};
  const { url, counts } = await serve(t, { fastPath: true, seen });
  const json = createClient(Health, createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: false }));
  t.is((await json.check({ service: "ok" })).status, Status.SERVING);
  t.is(counts.fallback, 1);
  const grpc = createClient(Health, createGrpcTransport({ baseUrl: url }));
  const asked = Date.now();
  t.is((await grpc.check({ service: "ok" }, { timeoutMs: 7000 })).status, Status.SERVING);
  t.is(seen.protocol, "grpc");
  t.true(seen.deadline !== undefined && seen.deadline >= asked + 6000 && seen.deadline <= Date.now() + 7000, `a gRPC caller's deadline is the call's too: ${seen.deadline}`);
  t.is(counts.fallback, 2);
  const gzip = createClient(Health, createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: true, sendCompression: compressionGzip, compressMinBytes: 0 }));
  t.is((await gzip.check({ service: "ok" })).status, Status.SERVING);
  t.is(counts.fallback, 3);
  // connect-node's binary client is answered by the fast path, as the service's peers are.
  const plain = createClient(Health, createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: true }));
  t.is((await plain.check({ service: "ok" })).status, Status.SERVING);
  t.is(counts.fallback, 3);
  // A streaming call through the unary transport goes to its streams transport.
  const ours = createClient(Health, unaryTransport(t, url));
  const statuses: Status[] = [];
  for await (const r of ours.watch({ service: "ok" })) statuses.push(r.status);
  t.deepEqual(statuses, [Status.SERVING, Status.NOT_SERVING]);
  t.is(counts.fallback, 4);
  // A path the fast path does not know: connect-node answers it (404, unimplemented).
  const session = http2.connect(url);
  t.teardown(() => session.close());
  const status = await new Promise<number>((resolve, reject) => {
    const s = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Nope", "content-type": "application/proto" });
    s.on("response", (h) => resolve(Number(h[":status"])));
    s.on("error", reject);
    s.end(Buffer.alloc(0));
  });
  t.is(status, 404);
  t.is(counts.fallback, 5);
});

for (const fastPath of [true, false]) {
  test(`a request over the read limit is refused as resource_exhausted before any handler runs (${fastPath ? "fast path" : "connect-node's handler"})`, async (t) => {
    const seen: Seen = {};
    const { url } = await serve(t, { fastPath, seen, readMaxBytes: 1000 });
    const client = createClient(Health, unaryTransport(t, url));
    const err = await t.throwsAsync(client.check({ service: "x".repeat(5000) })) as ConnectError;
    t.is((await t.throwsAsync(client.check({ service: "x".repeat(5_000_000) })) as ConnectError).code, Code.ResourceExhausted, "also when the body is still being sent");
    t.is(err.code, Code.ResourceExhausted);
    t.is(seen.header, undefined, "the handler never ran");
    t.is((await client.check({ service: "ok" })).status, Status.SERVING, "the connection still serves");
  });
}

test("a body that is not the request message is invalid_argument", async (t) => {
  const { url } = await serve(t, { fastPath: true, seen: {} });
  const session = http2.connect(url);
  t.teardown(() => session.close());
  const answer = await new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
    const s = session.request({ ":method": "POST", ":path": "/grpc.health.v1.Health/Check", "content-type": "application/proto", "connect-protocol-version": "1" });
    let status = 0;
    let type = "";
    const chunks: Buffer[] = [];
    s.on("response", (h) => { status = Number(h[":status"]); type = String(h["content-type"]); });
    s.on("data", (c: Buffer) => chunks.push(c));
    s.on("end", () => resolve({ status, type, body: Buffer.concat(chunks).toString("utf8") }));
    s.on("error", reject);
    s.end(Buffer.from([0x0a, 0xff, 0xff]));
  });
  t.is(answer.status, 400);
  t.is(answer.type, "application/json");
  t.is(JSON.parse(answer.body).code, "invalid_argument");
});

test("a service nobody listens on is unavailable; a stream the peer resets fails with the reset's code", async (t) => {
  const probe = http2.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const closedPort = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const down = createClient(Health, unaryTransport(t, `http://127.0.0.1:${closedPort}`));
  const err = await t.throwsAsync(down.check({ service: "ok" })) as ConnectError;
  t.is(err.code, Code.Unavailable);
  t.is(fromConnectError(err).code, "unavailable");

  // A peer that resets every stream: refused (the peer is going away) and an internal error.
  const resetting = http2.createServer();
  let rst = http2.constants.NGHTTP2_REFUSED_STREAM;
  resetting.on("stream", (s) => { s.on("error", () => {}); s.close(rst); });
  await new Promise<void>((resolve) => resetting.listen(0, "127.0.0.1", resolve));
  t.teardown(() => resetting.close());
  const client = createClient(Health, unaryTransport(t, `http://127.0.0.1:${(resetting.address() as AddressInfo).port}`));
  t.is((await t.throwsAsync(client.check({ service: "ok" })) as ConnectError).code, Code.Unavailable);
  rst = http2.constants.NGHTTP2_INTERNAL_ERROR;
  t.is((await t.throwsAsync(client.check({ service: "ok" })) as ConnectError).code, Code.Internal);
});

test("a service whose connection dies mid-call (killed, its network gone) fails the call as aborted: unavailable at the gateway", async (t) => {
  const dying = http2.createServer();
  dying.on("stream", (s) => { s.on("error", () => {}); setTimeout(() => s.session?.destroy(), 50); });
  await new Promise<void>((resolve) => dying.listen(0, "127.0.0.1", resolve));
  t.teardown(() => dying.close());
  const client = createClient(Health, unaryTransport(t, `http://127.0.0.1:${(dying.address() as AddressInfo).port}`));
  const err = await t.throwsAsync(client.check({ service: "ok" })) as ConnectError;
  t.is(err.code, Code.Aborted, err.message);
  t.is(fromConnectError(err).code, "unavailable");
});
