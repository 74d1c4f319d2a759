/**
 * Gateway overhead: the all-in-one system (embedded defaults, temp DATA_DIR) against a bare
 * node:http server answering the same JSON as ping. Measures (a) the bare server, (b) gateway
 * ping (API key, token, rate limit, meta op), (c) gateway operations.list (a large cached body).
 * Goal: gateway ping throughput >= 35% of the bare server's.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "@cms/platform";
import { startSystem } from "@cms/server";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { drive, formatTable, round, telemetryEnv, type BenchOptions, type LoadResult, type Scenario, type ScenarioReport } from "./lib.js";

const API_KEY = "bench-key";
const OP_PATH = "/functions/v1/thirdparty-v1";
const GOAL = 0.35;

/** A plain node:http server answering every request with the ping body. */
async function startBare(template: Record<string, unknown>): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    req.resume();
    req.on("end", () => {
      const body = JSON.stringify({ ...template, time: new Date().toISOString() });
      res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}${OP_PATH}`,
    close: () => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections(); }),
  };
}

async function run(opts: BenchOptions): Promise<ScenarioReport> {
  const dataDir = mkdtempSync(join(tmpdir(), "cms-bench-"));
  // As root the embedded PostgreSQL runs as the postgres OS user, which must enter DATA_DIR.
  chmodSync(dataDir, 0o755);
  const env = {
    DATA_DIR: dataDir,
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "warn",
    ...telemetryEnv(),
    RATE_LIMIT_PER_MINUTE: "100000000",
    GATEWAY_API_KEYS: API_KEY,
  };
  const system = await startSystem(loadConfig(env, ["--target=all"]));
  let bare: Awaited<ReturnType<typeof startBare>> | undefined;
  try {
    const auth = system.clients.get(AuthService);
    const username = `bench_${Date.now().toString(36)}`;
    await auth.createUser({ username, plan: "paid", isAdmin: false });
    const { accessToken } = await auth.mintToken({ username, scopes: [] });
    const headers = { "content-type": "application/json", apikey: API_KEY, authorization: `Bearer ${accessToken}` };
    const endpoint = `${system.url}${OP_PATH}`;

    // The bare server answers with what the gateway's ping answers.
    const probe = await fetch(endpoint, { method: "POST", headers, body: '{"op":"ping"}' });
    if (probe.status !== 200) throw new Error(`gateway ping answered ${probe.status}: ${await probe.text()}`);
    bare = await startBare((await probe.json()) as Record<string, unknown>);

    const common = { headers, connections: opts.connections, warmupMs: opts.warmupSeconds * 1000, durationMs: opts.seconds * 1000 };
    const results: LoadResult[] = [];
    results.push(await drive({ ...common, name: "bare node:http", url: bare.url, body: '{"op":"ping"}' }));
    results.push(await drive({ ...common, name: "gateway ping", url: endpoint, body: '{"op":"ping"}' }));
    results.push(await drive({ ...common, name: "gateway operations.list", url: endpoint, body: '{"op":"operations.list"}' }));

    const [a, b, c] = results as [LoadResult, LoadResult, LoadResult];
    const pingRatio = b.throughput / a.throughput;
    const listRatio = c.throughput / a.throughput;
    const pass = pingRatio >= GOAL && b.errors === 0;
    return {
      scenario: "gateway",
      results,
      summary: {
        ping_vs_bare: round(pingRatio, 4),
        operations_list_vs_bare: round(listRatio, 4),
        goal: `gateway ping throughput >= ${GOAL * 100}% of bare`,
        goal_pass: pass,
      },
      lines: [
        formatTable(results, a),
        "",
        `gateway ping / bare: ${(pingRatio * 100).toFixed(1)}%   gateway operations.list / bare: ${(listRatio * 100).toFixed(1)}%`,
        `gateway ping throughput >= ${GOAL * 100}% of bare: ${pass ? "PASS" : "FAIL"} (${(pingRatio * 100).toFixed(1)}%)`,
      ],
    };
  } finally {
    await bare?.close();
    await system.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export const gatewayScenario: Scenario = {
  name: "gateway",
  description: "gateway ping and operations.list against a bare node:http server (all-in-one, embedded defaults)",
  run,
};
