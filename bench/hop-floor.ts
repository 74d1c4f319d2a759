/**
 * The floor of one hop between two processes on this machine, for the split scenario to be read
 * against: sequential unary calls (one at a time, as a one-connection client makes them) from
 * this process to a child process over one HTTP/2 connection, first with node:http2 alone (a
 * 100-byte request, a 300-byte answer), then with Connect (connect-node's adapter and client,
 * binary protobuf, CollectionsService.GetCollection answered with an empty message and no
 * interceptors), then with the transport and server path the services use between themselves
 * (packages/platform/src/connect-unary.ts, same call, no interceptors). What a Connect hop of the
 * service costs beyond the third figure is the service's own work per hop (interceptors, caller
 * assertions, validation, tracing).
 *
 * The child is this same module run with `--hop-server <kind>`.
 */
import http2 from "node:http2";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { createClient, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter, createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { createUnaryFastPath, createUnaryTransport, SERVICE_READ_MAX_BYTES } from "@cms/platform";
import { CollectionRefRequestSchema, CollectionsService, GetCollectionResponseSchema } from "@cms/contracts/collections/v1/collections_pb";
import { percentile, processCpuUs, round } from "./lib.js";

type Kind = "http2" | "connect" | "unary";

/** A hop's floor: p50 latency and CPU of both processes per call. */
export interface HopFloor { kind: Kind; calls: number; p50Ms: number; cpuUsPerCall: number }

function serve(kind: Kind): void {
  const routes = (r: ConnectRouter) => r.service(CollectionsService, { getCollection: async () => create(GetCollectionResponseSchema, {}) });
  const handler = kind === "connect" ? connectNodeAdapter({ routes })
    : kind === "unary" ? createUnaryFastPath({ routes, interceptors: [], readMaxBytes: SERVICE_READ_MAX_BYTES, fallback: connectNodeAdapter({ routes }) })
    : (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
      req.resume();
      req.on("end", () => { res.writeHead(200, { "content-type": "application/proto" }); res.end(Buffer.alloc(300, 1)); });
    };
  const server = http2.createServer(handler);
  server.listen(0, "127.0.0.1", () => process.send!((server.address() as { port: number }).port));
}

/** Measures `calls` sequential calls of one kind after a warm-up of 500. */
export async function measureHopFloor(kind: Kind, calls = 3000): Promise<HopFloor> {
  const child = fork(fileURLToPath(import.meta.url), ["--hop-server", kind], { execArgv: process.execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.once("message", (m) => resolve(Number(m)));
      child.once("exit", (code) => reject(new Error(`hop-floor server (${kind}) exited with ${code}`)));
    });
    const url = `http://127.0.0.1:${port}`;
    let call: () => Promise<unknown>;
    let close = () => {};
    if (kind === "connect" || kind === "unary") {
      const connect = createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: true });
      const sessionManager = new Http2SessionManager(url);
      close = () => sessionManager.abort();
      const transport = kind === "connect" ? connect : createUnaryTransport({ baseUrl: url, sessionManager, interceptors: [], streams: connect });
      const client = createClient(CollectionsService, transport);
      const req = create(CollectionRefRequestSchema, { collectionId: 5n });
      call = () => client.getCollection(req);
    } else {
      const session = http2.connect(url);
      close = () => session.close();
      const body = Buffer.alloc(100, 2);
      call = () => new Promise((resolve, reject) => {
        const stream = session.request({ ":method": "POST", ":path": "/hop", "content-type": "application/proto" });
        stream.on("data", () => {});
        stream.on("end", resolve);
        stream.on("error", reject);
        stream.end(body);
      });
    }
    for (let i = 0; i < 500; i++) await call();
    const latencies = new Float64Array(calls);
    const pids = [process.pid, child.pid!];
    const cpu0 = processCpuUs(pids);
    for (let i = 0; i < calls; i++) {
      const started = performance.now();
      await call();
      latencies[i] = performance.now() - started;
    }
    const cpuUsPerCall = (processCpuUs(pids) - cpu0) / calls;
    close();
    latencies.sort();
    return { kind, calls, p50Ms: round(percentile(latencies, 50), 3), cpuUsPerCall: round(cpuUsPerCall, 0) };
  } finally {
    child.kill();
  }
}

const at = process.argv.indexOf("--hop-server");
if (at > 0) serve(process.argv[at + 1] as Kind);
