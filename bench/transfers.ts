/**
 * Moving bytes (issue 5's performance section), on the all-in-one embedded system: a 25MB file
 * through the chunked upload (16KB and 1MiB chunks one at a time, and 1MiB chunks four in
 * flight, which the goal does not count), through byte_upload_url (PUT) and through
 * media.download, each as MB/s against writing and reading the same bytes directly to the
 * object store in the same run; and the server's peak RSS growth during a 100 MiB
 * byte_upload_url PUT. The client runs in a child process (bench/transfer-client.ts), so the
 * system's event loop and RSS are its own; RSS is sampled in this process every 5 ms.
 * A bare node:http server that pipes request bodies into the same store and store reads into
 * responses (no gateway, no checks) shows what HTTP itself costs on the machine.
 * Goals: PUT and download >= 50% of the direct store rate, 1MiB-chunk upload >= 25%, peak RSS
 * growth < 64 MiB for the 100 MiB PUT.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { pipeline } from "node:stream/promises";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { ObjectStore } from "@cms/platform";
import { startBenchSystem, round, type BenchOptions, type Scenario, type ScenarioReport } from "./lib.js";

const FILE_BYTES = 25 * 1024 * 1024;
const BIG_PUT_BYTES = 100 * 1024 * 1024;
const MB = 1024 * 1024;

function client<T>(job: Record<string, unknown>): Promise<T> {
  const entry = fileURLToPath(new URL("./transfer-client.ts", import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", entry], { stdio: ["pipe", "pipe", "inherit"] });
    let out = "";
    const timer = setTimeout(() => { child.kill("SIGKILL"); reject(new Error(`transfer client (${job.kind}) ran over 10 minutes`)); }, 600_000);
    child.stdout.on("data", (d: Buffer) => { out += d.toString("utf8"); });
    child.on("error", (err) => { clearTimeout(timer); reject(err); });
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (code !== 0) { reject(new Error(`transfer client (${job.kind}) exited with ${code}`)); return; }
      try { resolve(JSON.parse(out.trim().split("\n").pop()!)); } catch { reject(new Error(`transfer client printed no result: ${out}`)); }
    });
    child.stdin.end(JSON.stringify(job));
  });
}

function collectGarbage(): void {
  try {
    setFlagsFromString("--expose-gc");
    (runInNewContext("gc") as () => void)();
  } catch { /* best effort */ }
}

/** Runs fn while sampling this process's RSS; the peak growth over the RSS just before. */
async function rssGrowth<T>(fn: () => Promise<T>): Promise<{ value: T; baseline: number; peak: number }> {
  collectGarbage();
  await new Promise((r) => setTimeout(r, 200));
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  const timer = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 5);
  try {
    const value = await fn();
    peak = Math.max(peak, process.memoryUsage().rss);
    return { value, baseline, peak };
  } finally {
    clearInterval(timer);
  }
}

const rate = (bytes: number, seconds: number) => bytes / MB / seconds;

/** PUT /<name> streams the body into the store; POST answers the object stored under `readKey`. */
async function startBareHttp(store: ObjectStore, keyPrefix: string, readKey: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const done = (status: number) => { res.writeHead(status, { "content-length": 0 }); res.end(); };
    if (req.method === "PUT") {
      store.put(`${keyPrefix}${req.url!.slice(1)}`, req, { contentType: "application/octet-stream", contentLength: Number(req.headers["content-length"]) })
        .then(() => done(200), () => done(500));
      return;
    }
    req.resume();
    store.get(readKey).then(async (obj) => {
      if (!obj) { done(404); return; }
      res.writeHead(200, { "content-type": obj.info.contentType, "content-length": obj.info.size });
      await pipeline(obj.body, res);
    }).catch(() => res.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => { server.close(() => r()); server.closeAllConnections(); }),
  };
}

async function run(_opts: BenchOptions): Promise<ScenarioReport> {
  const bench = await startBenchSystem();
  const { system, userId, headers, endpoint, call } = bench;
  try {
    const collectionId = (await call({ op: "collections.create", name: "Transfers" })).collection.id as number;

    const putOnce = async (size: number) => {
      const u = await call({ op: "media.get_upload_url", collection_id: collectionId, filename: "put.bin", content_type: "application/octet-stream", content_length: size });
      const r = await client<{ seconds: number; status: number }>({ kind: "put", url: u.byte_upload_url, contentType: "application/octet-stream", size });
      if (r.status !== 200) throw new Error(`PUT answered ${r.status}`);
      return { mbps: rate(size, r.seconds), seconds: r.seconds };
    };
    // First, while the process is small: the server's RSS during a 100 MiB PUT.
    const big = await rssGrowth(() => putOnce(BIG_PUT_BYTES));
    const growthMiB = (big.peak - big.baseline) / MB;

    // Direct store: the same 25MB written (durably, as uploads are) and read back, best of 3.
    const file = randomBytes(FILE_BYTES);
    let directWrite = 0;
    let directRead = 0;
    for (let i = 0; i < 3; i++) {
      const key = `store://${userId}/${collectionId}/direct_${i}.bin`;
      let t0 = performance.now();
      await system.store.put(key, file, { contentType: "application/octet-stream", contentLength: file.length });
      directWrite = Math.max(directWrite, rate(FILE_BYTES, (performance.now() - t0) / 1000));
      t0 = performance.now();
      const obj = await system.store.get(key);
      let n = 0;
      for await (const c of obj!.body) n += (c as Buffer).length;
      directRead = Math.max(directRead, rate(n, (performance.now() - t0) / 1000));
      await system.store.delete([key]);
    }

    const chunked = async (chunkBytes: number, inFlight = 1) => {
      const r = await client<{ seconds: number; calls: number; media_id: number }>({ kind: "chunked", endpoint, headers, collectionId, size: FILE_BYTES, chunkBytes, inFlight });
      return { mbps: rate(FILE_BYTES, r.seconds), seconds: r.seconds, calls: r.calls, mediaId: r.media_id };
    };
    const best = async (n: number, fn: () => Promise<number>) => {
      let top = 0;
      for (let i = 0; i < n; i++) top = Math.max(top, await fn());
      return top;
    };

    const chunk1m = await chunked(MB);
    const chunk16k = await chunked(16 * 1024);
    const chunk1mParallel = await chunked(MB, 4);
    const put = { mbps: await best(3, async () => (await putOnce(FILE_BYTES)).mbps) };
    const download = await best(3, async () => {
      const r = await client<{ seconds: number; bytes: number }>({ kind: "download", endpoint, headers, mediaId: chunk1m.mediaId, repeat: 5 });
      if (r.bytes !== FILE_BYTES) throw new Error(`download returned ${r.bytes} bytes`);
      return rate(r.bytes, r.seconds);
    });
    const readKey = (await call({ op: "media.get", media_id: chunk1m.mediaId })).media.main_url as string;
    const bare = await startBareHttp(system.store, `store://${userId}/${collectionId}/bare_`, readKey);
    let barePut = 0;
    let bareDownload = 0;
    try {
      for (let i = 0; i < 3; i++) {
        const p = await client<{ seconds: number; status: number }>({ kind: "put", url: `${bare.url}/${i}.bin`, contentType: "application/octet-stream", size: FILE_BYTES });
        if (p.status !== 200) throw new Error(`bare PUT answered ${p.status}`);
        barePut = Math.max(barePut, rate(FILE_BYTES, p.seconds));
        const d = await client<{ seconds: number; bytes: number }>({ kind: "download", endpoint: bare.url, headers: {}, mediaId: 0, repeat: 5 });
        bareDownload = Math.max(bareDownload, rate(d.bytes, d.seconds));
      }
    } finally {
      await bare.close();
    }

    const pct = (x: number, base: number) => round((x / base) * 100, 1);
    const goals = {
      put_at_least_50pct_of_store_write: put.mbps / directWrite >= 0.5,
      download_at_least_50pct_of_store_read: download / directRead >= 0.5,
      chunked_1mib_at_least_25pct_of_store_write: chunk1m.mbps / directWrite >= 0.25,
      put_100mib_rss_growth_under_64mib: growthMiB < 64,
    };
    const rows: Array<[string, number, number, number | undefined]> = [
      ["direct store write (fsync)", directWrite, directWrite, undefined],
      ["direct store read", directRead, directRead, undefined],
      ["bare node:http PUT into the store", barePut, directWrite, undefined],
      ["bare node:http read from the store", bareDownload, directRead, undefined],
      ["byte_upload_url PUT", put.mbps, directWrite, barePut],
      ["media.download", download, directRead, bareDownload],
      [`chunked upload, 1MiB chunks (${chunk1m.calls} calls)`, chunk1m.mbps, directWrite, undefined],
      [`chunked upload, 16KB chunks (${chunk16k.calls} calls)`, chunk16k.mbps, directWrite, undefined],
      [`chunked upload, 1MiB chunks, 4 in flight`, chunk1mParallel.mbps, directWrite, undefined],
    ];
    const width = Math.max(...rows.map((r) => r[0].length));
    return {
      scenario: "transfers",
      results: [],
      summary: {
        file_bytes: FILE_BYTES,
        store_write_mbps: round(directWrite, 1), store_read_mbps: round(directRead, 1),
        bare_http_put_mbps: round(barePut, 1), bare_http_read_mbps: round(bareDownload, 1),
        put_mbps: round(put.mbps, 1), download_mbps: round(download, 1),
        put_vs_bare_http_pct: pct(put.mbps, barePut), download_vs_bare_http_pct: pct(download, bareDownload),
        chunked_1mib_mbps: round(chunk1m.mbps, 1), chunked_16kb_mbps: round(chunk16k.mbps, 2), chunked_1mib_4_in_flight_mbps: round(chunk1mParallel.mbps, 1),
        put_vs_store_write_pct: pct(put.mbps, directWrite), download_vs_store_read_pct: pct(download, directRead),
        chunked_1mib_vs_store_write_pct: pct(chunk1m.mbps, directWrite), chunked_16kb_vs_store_write_pct: pct(chunk16k.mbps, directWrite),
        put_100mib_rss_baseline_mib: round(big.baseline / MB, 1), put_100mib_rss_peak_mib: round(big.peak / MB, 1), put_100mib_rss_growth_mib: round(growthMiB, 1),
        put_100mib_mbps: round(big.value.mbps, 1),
        goals,
      },
      lines: [
        `25MB file (${FILE_BYTES} bytes), embedded store, client in a child process; MB = MiB`,
        `${"path".padEnd(width)}  ${"MB/s".padStart(8)}  ${"vs direct".padStart(9)}  vs bare http`,
        ...rows.map(([name, v, base, bareBase]) => `${name.padEnd(width)}  ${v.toFixed(1).padStart(8)}  ${(name.startsWith("direct") ? "" : `${pct(v, base)}%`).padStart(9)}  ${bareBase ? `${pct(v, bareBase)}%` : ""}`),
        "",
        `PUT ${put.mbps.toFixed(1)} MB/s = ${pct(put.mbps, directWrite)}% of direct write (goal >= 50%): ${goals.put_at_least_50pct_of_store_write ? "PASS" : "FAIL"}`,
        `media.download ${download.toFixed(1)} MB/s = ${pct(download, directRead)}% of direct read (goal >= 50%): ${goals.download_at_least_50pct_of_store_read ? "PASS" : "FAIL"}`,
        `chunked 1MiB ${chunk1m.mbps.toFixed(1)} MB/s = ${pct(chunk1m.mbps, directWrite)}% of direct write (goal >= 25%): ${goals.chunked_1mib_at_least_25pct_of_store_write ? "PASS" : "FAIL"}`,
        `100 MiB byte_upload_url PUT at ${big.value.mbps.toFixed(1)} MB/s: server RSS ${(big.baseline / MB).toFixed(1)} -> peak ${(big.peak / MB).toFixed(1)} MiB, growth ${growthMiB.toFixed(1)} MiB (goal < 64): ${goals.put_100mib_rss_growth_under_64mib ? "PASS" : "FAIL"}`,
      ],
    };
  } finally {
    await bench.stop();
  }
}

export const transfersScenario: Scenario = {
  name: "transfers",
  description: "25MB chunked upload (16KB, 1MiB), PUT and download vs the direct store; RSS of a 100 MiB PUT",
  run,
};
