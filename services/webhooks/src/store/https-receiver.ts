/**
 * Sending one attempt to a receiver over https: the URL rules checked again and the host resolved
 * now (DNS can change after webhook_set), the connection made to exactly the address that was
 * checked (no second lookup), one deadline covering connect, TLS, the answer and its body, no
 * redirects followed, at most 64 KiB of the answer read.
 */
import https from "node:https";
import { lookup } from "node:dns/promises";
import type { LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";
import type { Link } from "@opentelemetry/api";
import { AppError, traceOutbound } from "@cms/platform";
import { MAX_RESPONSE_BYTES } from "../domain/deliveries.js";
import { checkResolved, checkWebhookUrl, type UrlPolicy } from "../domain/url-rules.js";

export interface SendResult {
  /** The receiver's status; undefined when no answer came. */
  status?: number;
  /** The Retry-After header of the answer. */
  retryAfter?: string;
  error?: string;
  durationMs: number;
}

/** Where attempts go (a port: the tests and the bench use the real one against local receivers). */
export interface Receiver {
  /** One attempt; `links` are the traces of the changes the delivery carries (its span links to them). */
  send(url: string, headers: Record<string, string>, body: string, links?: Link[]): Promise<SendResult>;
  /** The URL rules with DNS, as webhook_set checks them. */
  vet(url: string): Promise<{ url: URL; address: string; family: 4 | 6 }>;
}

export function createHttpsReceiver(opts: { policy: UrlPolicy; timeoutMs: number }): Receiver {
  async function vet(raw: string) {
    const url = checkWebhookUrl(raw, opts.policy);
    const host = url.hostname.replace(/^\[|\]$/g, "");
    let addresses: Array<{ address: string; family: number }>;
    if (ipaddr.isValid(host)) {
      addresses = [{ address: host, family: ipaddr.parse(host).kind() === "ipv6" ? 6 : 4 }];
    } else {
      try {
        addresses = await lookup(host, { all: true, verbatim: true });
      } catch {
        throw new AppError("invalid_request", `The webhook host ${host} does not resolve.`, { field: "url" });
      }
    }
    checkResolved(url, addresses.map((a) => a.address), opts.policy);
    const first = addresses[0]!;
    return { url, address: first.address, family: (first.family === 6 ? 6 : 4) as 4 | 6 };
  }

  return {
    vet,
    send(raw, headers, body, links) {
      let host = "invalid";
      try { host = new URL(raw).host; } catch { /* vet() reports it */ }
      return traceOutbound("webhook", "POST", {
        attributes: { "http.request.method": "POST", "server.address": host, "cms.webhook.delivery_id": headers["webhook-id"] ?? "" },
        links,
        outcomeOf: (r: SendResult) => (r.status !== undefined ? { status: r.status } : { failure: r.error?.startsWith("no complete answer") ? "timeout" : "network" }),
      }, () => attempt(raw, headers, body));
    },
  };

  /** One attempt: vet, connect to the vetted address, one deadline for all of it. */
  async function attempt(raw: string, headers: Record<string, string>, body: string): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    let target;
    try {
      target = await vet(raw);
    } catch (err) {
      return { error: err instanceof AppError ? err.detail : (err as Error).message, durationMs: elapsed() };
    }
    const { url, address, family } = target;
    const pinned: LookupFunction = (_host, options, cb) => {
      if ((options as { all?: boolean }).all) (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [{ address, family }]);
      else cb(null, address, family);
    };
    return new Promise<SendResult>((resolve) => {
      let settled = false;
      const finish = (r: Omit<SendResult, "durationMs">) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        resolve({ ...r, durationMs: elapsed() });
      };
      const req = https.request(url, {
        method: "POST",
        headers: { ...headers, "content-length": Buffer.byteLength(body), "user-agent": "cms-webhooks/1.0" },
        lookup: pinned,
        agent: false,
      }, (res) => {
        const status = res.statusCode ?? 0;
        const retryAfter = typeof res.headers["retry-after"] === "string" ? res.headers["retry-after"] : undefined;
        let read = 0;
        res.on("data", (chunk: Buffer) => {
          read += chunk.length;
          // The answer is not needed: read at most 64 KiB of it, then hang up.
          if (read >= MAX_RESPONSE_BYTES) { res.destroy(); finish({ status, retryAfter }); }
        });
        res.on("end", () => finish({ status, retryAfter }));
        res.on("error", () => finish({ status, retryAfter }));
        res.on("close", () => finish({ status, retryAfter }));
      });
      // One deadline for the whole attempt: connecting, TLS, the answer and its body.
      const deadline = setTimeout(() => {
        req.destroy();
        finish({ error: `no complete answer within ${opts.timeoutMs} ms` });
      }, opts.timeoutMs);
      req.on("error", (err) => finish({ error: err.message }));
      req.end(body);
    });
  }
}