/**
 * A local https webhook receiver for tests: serves test/fixtures/tls/cert.pem (trusted through
 * NODE_EXTRA_CA_CERTS), records every request with its raw body, and answers as the test scripts
 * it: a status, a delay, a redirect, a Retry-After, or never.
 */
import https from "node:https";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";

const tls = (name: string) => readFileSync(fileURLToPath(new URL(`../fixtures/tls/${name}`, import.meta.url)));

export interface Received {
  headers: Record<string, string>;
  /** The raw body, as signed. */
  body: string;
  json: Record<string, any>;
  at: number;
}

/** How to answer one request; the default answers 200. */
export interface Answer {
  status?: number;
  delayMs?: number;
  headers?: Record<string, string>;
  /** Never answer (the sender's deadline must end the attempt). */
  hang?: boolean;
}

export interface Receiver {
  /** https://localhost:<port>/hook */
  url: string;
  received: Received[];
  /** Answers for the next requests, in order; after them, `fallback`. */
  script(...answers: Answer[]): void;
  fallback: Answer;
  /** Resolves once `n` requests arrived (polls; the test's timeout bounds it). */
  waitFor(n: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const queue: Answer[] = [];
  const hanging = new Set<import("node:http").ServerResponse>();
  const r = { fallback: { status: 200 } as Answer } as Receiver;
  const server = https.createServer({ cert: tls("cert.pem"), key: tls("key.pem") }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers[k] = v;
      let json: Record<string, any> = {};
      try { json = JSON.parse(body); } catch { /* recorded as is */ }
      received.push({ headers, body, json, at: Date.now() });
      const answer = queue.shift() ?? r.fallback;
      if (answer.hang) { hanging.add(res); return; }
      setTimeout(() => {
        res.writeHead(answer.status ?? 200, answer.headers ?? {});
        res.end("ok");
      }, answer.delayMs ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.address() as AddressInfo).port;
  Object.assign(r, {
    url: `https://localhost:${port}/hook`,
    received,
    script: (...answers: Answer[]) => { queue.push(...answers); },
    async waitFor(n: number, timeoutMs = 20_000) {
      const end = Date.now() + timeoutMs;
      while (received.length < n) {
        if (Date.now() > end) throw new Error(`the receiver got ${received.length} requests, not ${n}, within ${timeoutMs} ms`);
        await new Promise((res) => setTimeout(res, 20));
      }
      return received.slice(0, n);
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
  return r;
}
