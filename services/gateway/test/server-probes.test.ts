/**
 * The gateway's probes and route names: /healthz says the process answers, /readyz turns 503 once
 * the gateway stops taking work (so Kubernetes drops the pod from its endpoints before the
 * listener closes), and every path maps to one of a bounded set of route names (span names and
 * the `route` label of the bytes metric).
 */
import test from "ava";
import type { AddressInfo } from "node:net";
import { createLogger } from "@cms/platform";
import { close, createGatewayServer, routeOf, type ByteRoute } from "../src/http/server.js";

const noop = async () => {};
const byteRoutes: ByteRoute[] = [["/storage/v1/download/", noop, "x"], ["/media/v1/", noop, "x"]];

test("/readyz follows readiness, /healthz does not", async (t) => {
  let ready = true;
  const server = createGatewayServer({ log: createLogger("silent"), handleOp: noop, handleAsset: noop, handleUpload: noop, byteRoutes, ready: () => ready });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    t.is((await fetch(`${base}/readyz`)).status, 200);
    ready = false;
    const res = await fetch(`${base}/readyz`);
    t.is(res.status, 503);
    t.is((await res.json()).error, "unavailable");
    t.is((await fetch(`${base}/healthz`)).status, 200);
  } finally {
    await close(server, 1000);
  }
});

test("routes are named from a bounded set", (t) => {
  t.is(routeOf("/functions/v1/thirdparty-v1", byteRoutes), "op");
  t.is(routeOf("/assets/player/x.webp", byteRoutes), "assets");
  t.is(routeOf("/storage/v1/download/abc", byteRoutes), "storage/v1/download");
  t.is(routeOf("/media/v1/123/file", byteRoutes), "media/v1");
  t.is(routeOf("/anything/else", byteRoutes), "other");
});
