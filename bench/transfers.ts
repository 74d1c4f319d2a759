/**
 * Moving bytes on the all-in-one embedded system, each figure against a bare node:http server of
 * the same run: a 25MB byte_upload_url PUT against a bare server streaming the PUT into a file
 * and fsyncing it; media.download of the same size against the bare server streaming the file
 * back (both with node's default stream settings); a chunked upload with 1 MiB chunks (one at a
 * time) against the PUT rate of the same round. Rounds alternate bare PUT and PUT (three of
 * each, alternated; each side's median), bare GET and download (five of each, alternated in one
 * client; each side's median), bare chunked, chunked (BENCH_ROUNDS, default 3).
 * Also, once: chunked with 16KB chunks and with 1 MiB chunks four in flight, the direct store
 * write and read, and the server's peak RSS growth during a 100 MiB PUT. The chunked figure has
 * its floor beside it: the same client against a bare server of the chunk's shape alone
 * (bareChunkedOp). The client runs in a child process (bench/transfer-client.ts), so the
 * system's event loop and RSS are its own; RSS is sampled in this process every 5 ms.
 * Goals: PUT and download >= 0.8 of bare, chunked 1 MiB >= 0.25 of the PUT, in every round;
 * peak RSS growth < 64 MiB for the 100 MiB PUT.
 */
import http from "node:http";
import { createReadStream, createWriteStream, mkdirSync } from "node:fs";
import { open, readFile, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import type { AddressInfo } from "node:net";
import { pipeline } from "node:stream/promises";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { median, ratioRange, startBenchSystem, round, transferClient, type BenchOptions, type Scenario, type ScenarioReport } from "./lib.js";

const FILE_BYTES = 25 * 1024 * 1024;
const BIG_PUT_BYTES = 100 * 1024 * 1024;
const MB = 1024 * 1024;
const PUTS_PER_ROUND = 3;

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

/**
 * The floor of the chunked upload's shape, for POST /chunked: the same JSON ops (upload_begin,
 * upload_chunk, upload_finish) with nothing but what the shape itself costs: the body read and
 * parsed, the chunk's base64 decoded and written to its own file with fsync, and at the finish
 * the files concatenated into one, fsynced, hashed for the answer. No database, no checks.
 */
async function bareChunkedOp(dir: string, op: Record<string, any>): Promise<Record<string, unknown>> {
  const chunkFile = (index: number) => join(dir, `${String(op.upload_id)}_${index}`);
  if (op.op === "media.upload_begin") return { upload_id: randomUUID() };
  if (op.op === "media.upload_chunk") {
    const fh = await open(chunkFile(Number(op.index)), "w");
    try {
      await fh.write(Buffer.from(String(op.content_base64), "base64"));
      await fh.sync();
    } finally {
      await fh.close();
    }
    return { upload_id: op.upload_id, index: op.index };
  }
  const hash = createHash("sha256");
  const out = await open(join(dir, `${String(op.upload_id)}.bin`), "w");
  try {
    for (let i = 0; ; i++) {
      let bytes: Buffer;
      try { bytes = await readFile(chunkFile(i)); } catch { break; }
      hash.update(bytes);
      await out.write(bytes);
    }
    await out.sync();
  } finally {
    await out.close();
  }
  return { media: { id: 0, sha256: hash.digest("hex") } };
}

/**
 * The bare baseline: PUT /<name> streams the body into a file and fsyncs it, GET /<name>
 * streams the file back; node's defaults, no checks. POST /chunked: bareChunkedOp.
 */
async function startBareFiles(dir: string): Promise<{ url: string; close(): Promise<void> }> {
  mkdirSync(dir, { recursive: true });
  const server = http.createServer((req, res) => {
    const file = join(dir, basename(req.url!));
    const fail = () => { if (!res.headersSent) res.writeHead(500); res.end(); };
    if (req.method === "POST") {
      const parts: Buffer[] = [];
      req.on("data", (c: Buffer) => parts.push(c));
      req.on("end", () => {
        bareChunkedOp(dir, JSON.parse(Buffer.concat(parts).toString("latin1")) as Record<string, any>).then((answer) => {
          const body = JSON.stringify(answer);
          res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
          res.end(body);
        }, fail);
      });
      return;
    }
    if (req.method === "PUT") {
      const out = createWriteStream(file);
      pipeline(req, out).then(() => open(file, "r")).then(async (fh) => { await fh.sync(); await fh.close(); })
        .then(() => { res.writeHead(200, { "content-length": 0 }); res.end(); }, fail);
      return;
    }
    req.resume();
    stat(file).then((st) => {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": st.size });
      return pipeline(createReadStream(file), res);
    }).catch(fail);
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
      const r = await transferClient<{ seconds: number; status: number }>({ kind: "put", url: u.byte_upload_url, contentType: "application/octet-stream", size });
      if (r.status !== 200) throw new Error(`PUT answered ${r.status}`);
      return { mbps: rate(size, r.seconds), seconds: r.seconds };
    };
    // First, while the process is small: the server's RSS during a 100 MiB PUT.
    const big = await rssGrowth(() => putOnce(BIG_PUT_BYTES));
    const growthMiB = (big.peak - big.baseline) / MB;

    // Direct store (for reference only): the same 25MB written (durably, as uploads are) and read back, the better of 3.
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

    const chunked = async (chunkBytes: number, inFlight = 1, url = endpoint) => {
      const r = await transferClient<{ seconds: number; calls: number; media_id: number }>({ kind: "chunked", endpoint: url, headers, collectionId, size: FILE_BYTES, chunkBytes, inFlight });
      return { mbps: rate(FILE_BYTES, r.seconds), seconds: r.seconds, calls: r.calls, mediaId: r.media_id };
    };
    /** MB/s of the bare GET of `file` and of media.download of `mediaId`, read in turns. */
    const downloads = async (file: string, mediaId: number) => {
      const [bareRun, serviceRun] = await transferClient<Array<{ seconds: number; bytes: number }>>({
        kind: "download", repeat: 5,
        targets: [{ endpoint: file, headers: {}, method: "GET" }, { endpoint, headers, mediaId, method: "POST" }],
      });
      for (const r of [bareRun!, serviceRun!]) if (r.bytes !== FILE_BYTES) throw new Error(`download returned ${r.bytes} bytes`);
      return { bareGet: rate(FILE_BYTES, bareRun!.seconds), download: rate(FILE_BYTES, serviceRun!.seconds) };
    };

    const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
    const bare = await startBareFiles(join(bench.dataDir, "bare-files"));
    const perRound: Array<{ barePut: number; put: number; bareGet: number; download: number; bareChunk1m: number; chunk1m: number }> = [];
    try {
      // The item the downloads read, made before the rounds: made inside the first one, between
      // its bare GET and its download, its chunked upload left the download alone to run in
      // its wake (the first round's download was the low one in three runs of four).
      const mediaId = (await chunked(MB)).mediaId;
      for (let r = 0; r < rounds; r++) {
        // The PUTs of a round alternate bare and service, PUTS_PER_ROUND each, and each side's
        // figure is its median: one 25MB PUT is ~80 ms, half of it the fsync, which the disk's
        // own writeback (the round before, PostgreSQL's checkpoints) can double.
        const barePuts: number[] = [];
        const puts: number[] = [];
        for (let i = 0; i < PUTS_PER_ROUND; i++) {
          const bp = await transferClient<{ seconds: number; status: number }>({ kind: "put", url: `${bare.url}/f${r}.bin`, contentType: "application/octet-stream", size: FILE_BYTES });
          if (bp.status !== 200) throw new Error(`bare PUT answered ${bp.status}`);
          barePuts.push(rate(FILE_BYTES, bp.seconds));
          puts.push((await putOnce(FILE_BYTES)).mbps);
        }
        const barePut = median(barePuts);
        const put = median(puts);
        const { bareGet, download: dl } = await downloads(`${bare.url}/f${r}.bin`, mediaId);
        const bareChunk1m = (await chunked(MB, 1, `${bare.url}/chunked`)).mbps;
        const chunk1m = (await chunked(MB)).mbps;
        perRound.push({ barePut, put, bareGet, download: dl, bareChunk1m, chunk1m });
      }
    } finally {
      await bare.close();
    }
    const chunk16k = await chunked(16 * 1024);
    const chunk1mParallel = await chunked(MB, 4);

    const putRatios = perRound.map((x) => round(x.put / x.barePut, 4));
    const downloadRatios = perRound.map((x) => round(x.download / x.bareGet, 4));
    const chunkRatios = perRound.map((x) => round(x.chunk1m / x.put, 4));
    // What the chunk's shape alone allows: the bare chunked server against the same round's PUT.
    const bareChunkRatios = perRound.map((x) => round(x.bareChunk1m / x.put, 4));
    const goals = {
      put_at_least_80pct_of_bare: Math.min(...putRatios) >= 0.8,
      download_at_least_80pct_of_bare: Math.min(...downloadRatios) >= 0.8,
      chunked_1mib_at_least_25pct_of_put: Math.min(...chunkRatios) >= 0.25,
      put_100mib_rss_growth_under_64mib: growthMiB < 64,
    };
    const f1 = (x: number) => x.toFixed(1);
    return {
      scenario: "transfers",
      results: [],
      summary: {
        file_bytes: FILE_BYTES, rounds, per_round_mbps: perRound.map((x) => Object.fromEntries(Object.entries(x).map(([k, v]) => [k, round(v, 1)]))),
        put_vs_bare: putRatios, download_vs_bare: downloadRatios, chunked_1mib_vs_put: chunkRatios, bare_chunked_1mib_vs_put: bareChunkRatios,
        store_write_mbps: round(directWrite, 1), store_read_mbps: round(directRead, 1),
        chunked_16kb_mbps: round(chunk16k.mbps, 2), chunked_1mib_4_in_flight_mbps: round(chunk1mParallel.mbps, 1),
        put_100mib_rss_baseline_mib: round(big.baseline / MB, 1), put_100mib_rss_peak_mib: round(big.peak / MB, 1), put_100mib_rss_growth_mib: round(growthMiB, 1),
        put_100mib_mbps: round(big.value.mbps, 1),
        goals,
      },
      lines: [
        `25MB file (${FILE_BYTES} bytes), embedded store, client in a child process; MB = MiB; ${rounds} rounds`,
        "round  bare PUT  byte_upload_url PUT  ratio   bare GET  media.download  ratio   bare chunked 1MiB  / PUT   chunked 1MiB  / PUT",
        ...perRound.map((x, i) => `${String(i + 1).padStart(5)}  ${f1(x.barePut).padStart(8)}  ${f1(x.put).padStart(19)}  ${putRatios[i]!.toFixed(2).padStart(5)}   ${f1(x.bareGet).padStart(8)}  ${f1(x.download).padStart(14)}  ${downloadRatios[i]!.toFixed(2).padStart(5)}   ${f1(x.bareChunk1m).padStart(17)}  ${bareChunkRatios[i]!.toFixed(2).padStart(5)}   ${f1(x.chunk1m).padStart(12)}  ${chunkRatios[i]!.toFixed(2).padStart(5)}`),
        "",
        `once: direct store write (fsync) ${f1(directWrite)} MB/s, read ${f1(directRead)} MB/s; chunked 16KB chunks ${chunk16k.mbps.toFixed(2)} MB/s (${chunk16k.calls} calls); chunked 1MiB, 4 in flight ${f1(chunk1mParallel.mbps)} MB/s`,
        `byte_upload_url PUT / bare PUT+fsync: ${ratioRange(putRatios)} (goal >= 0.8): ${goals.put_at_least_80pct_of_bare ? "PASS" : "FAIL"}`,
        `media.download / bare GET: ${ratioRange(downloadRatios)} (goal >= 0.8): ${goals.download_at_least_80pct_of_bare ? "PASS" : "FAIL"}`,
        `chunked 1MiB / PUT: ${ratioRange(chunkRatios)} (goal >= 0.25): ${goals.chunked_1mib_at_least_25pct_of_put ? "PASS" : "FAIL"}; the bare chunked server (JSON, base64, a synced file a chunk, no database) / PUT: ${ratioRange(bareChunkRatios)}`,
        `100 MiB byte_upload_url PUT at ${big.value.mbps.toFixed(1)} MB/s: server RSS ${(big.baseline / MB).toFixed(1)} -> peak ${(big.peak / MB).toFixed(1)} MiB, growth ${growthMiB.toFixed(1)} MiB (goal < 64): ${goals.put_100mib_rss_growth_under_64mib ? "PASS" : "FAIL"}`,
      ],
    };
  } finally {
    await bench.stop();
  }
}

export const transfersScenario: Scenario = {
  name: "transfers",
  description: "25MB PUT and download vs a bare node:http file server, chunked 1MiB vs the PUT, alternated; RSS of a 100 MiB PUT",
  run,
};
