/**
 * Server-side fetches that cannot be turned against the service's own network (SSRF guard).
 * Only http(s); the host is resolved once and every address must be public unicast (private,
 * loopback, link-local, metadata, unique-local, CGNAT, mapped and translated forms refused),
 * and the connection goes to exactly the address that was checked, so DNS rebinding cannot
 * swap it. Redirects are followed by hand and re-checked at every hop. OUTBOUND_ALLOWED_HOSTS
 * lifts the address rule for named hosts only (test environments).
 */
import http from "node:http";
import https from "node:https";
import { lookup } from "node:dns/promises";
import type { LookupFunction } from "node:net";
import type { Readable } from "node:stream";
import ipaddr from "ipaddr.js";
import { traceOutbound } from "./telemetry.js";

export type OutboundFailure = "bad_url" | "blocked_host" | "timeout" | "too_large" | "http_status" | "too_many_redirects" | "network";

export class OutboundError extends Error {
  override name = "OutboundError";
  constructor(readonly reason: OutboundFailure, message: string, readonly status?: number) {
    super(message);
  }
}

export interface OutboundPolicy {
  /** Hosts ("host" or "host:port", lower case) exempt from the address rule. */
  allowedHosts: string[];
}

/** True unless the address is ordinary public unicast. */
export function isBlockedAddress(address: string): boolean {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(address);
  } catch {
    return true;
  }
  if (addr.kind() === "ipv6") {
    const v6 = addr as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) return isBlockedAddress(v6.toIPv4Address().toString());
    return v6.range() !== "unicast";
  }
  return addr.range() !== "unicast";
}

function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
}

function defaultPort(url: URL): string {
  return url.port || (url.protocol === "https:" ? "443" : "80");
}

export function isAllowedHost(url: URL, policy: OutboundPolicy): boolean {
  const host = hostOf(url);
  return policy.allowedHosts.includes(host) || policy.allowedHosts.includes(`${host}:${defaultPort(url)}`);
}

/** Parses and checks a URL; resolves to the vetted address to connect to. */
export async function vetUrl(raw: string | URL, policy: OutboundPolicy): Promise<{ url: URL; address: string; family: 4 | 6 }> {
  let url: URL;
  try {
    url = typeof raw === "string" ? new URL(raw) : raw;
  } catch {
    throw new OutboundError("bad_url", `"${String(raw)}" is not an absolute URL.`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new OutboundError("bad_url", "Only http and https URLs can be fetched.");
  if (url.username || url.password) throw new OutboundError("bad_url", "URLs with credentials are not fetched.");
  const host = hostOf(url);
  let addresses: Array<{ address: string; family: number }>;
  if (ipaddr.isValid(host)) {
    addresses = [{ address: ipaddr.process(host).toString(), family: ipaddr.parse(host).kind() === "ipv6" ? 6 : 4 }];
  } else {
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch {
      throw new OutboundError("network", `The host ${host} could not be resolved.`);
    }
  }
  if (!addresses.length) throw new OutboundError("network", `The host ${host} has no address.`);
  if (!isAllowedHost(url, policy)) {
    const bad = addresses.find((a) => isBlockedAddress(a.address));
    if (bad) throw new OutboundError("blocked_host", `The host ${host} resolves to a private, loopback, link-local or otherwise non-public address; it is not fetched.`);
  }
  const first = addresses[0]!;
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}

export interface FetchOptions {
  policy: OutboundPolicy;
  timeoutMs?: number;
  maxBytes?: number;
  maxRedirects?: number;
  method?: string;
  headers?: Record<string, string>;
  body?: Buffer | string;
  /** false: a 3xx is returned as is (webhooks count it as a failure). */
  followRedirects?: boolean;
  /** Ends the fetch, its answer or its body, once aborted: the call it serves has ended. */
  signal?: AbortSignal;
}

export interface FetchStreamResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  url: URL;
  body: Readable;
}

/**
 * Opens a vetted request and returns the response stream (caller must consume or destroy it).
 * One CLIENT span and one counted outbound call ("fetch" peer) cover the redirects followed.
 */
export async function fetchStream(raw: string, opts: FetchOptions): Promise<FetchStreamResult> {
  const method = opts.method ?? "GET";
  let origin = "invalid";
  try { origin = new URL(raw).origin; } catch { /* vetUrl reports it */ }
  return traceOutbound("fetch", method, {
    attributes: { "http.request.method": method, "server.address": origin },
    outcomeOf: (r) => ({ status: r.status }),
    failureOf: (err) => (err instanceof OutboundError ? err.reason : "network"),
  }, () => fetchHops(raw, opts));
}

async function fetchHops(raw: string, opts: FetchOptions): Promise<FetchStreamResult> {
  const maxRedirects = opts.followRedirects === false ? 0 : opts.maxRedirects ?? 5;
  const timeoutMs = opts.timeoutMs ?? 15_000;
  let current: string | URL = raw;
  for (let hop = 0; ; hop++) {
    const { url, address, family } = await vetUrl(current, opts.policy);
    const pinned: LookupFunction = (_host, options, cb) => {
      if ((options as { all?: boolean }).all) (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [{ address, family }]);
      else cb(null, address, family);
    };
    const mod = url.protocol === "https:" ? https : http;
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = mod.request(url, {
        method: opts.method ?? "GET",
        headers: { "user-agent": "cms-fetch/1.0", ...opts.headers },
        lookup: pinned,
        // The socket's idle timeout: it also bounds each pause of the body after the answer.
        timeout: timeoutMs,
        signal: opts.signal,
      }, (answer) => { clearTimeout(answerDeadline); resolve(answer); });
      const giveUp = () => req.destroy(new OutboundError("timeout", `No response from ${url.host} within ${timeoutMs} ms.`));
      // The idle timeout restarts with every byte: a server sending its headers a byte every few
      // seconds held the fetch (and the call waiting on it) for ever. The answer comes within
      // timeoutMs of the request, all told.
      const answerDeadline = setTimeout(giveUp, timeoutMs);
      req.on("timeout", giveUp);
      req.on("error", (err) => {
        clearTimeout(answerDeadline);
        reject(err instanceof OutboundError ? err : new OutboundError("network", `Fetching ${url.host} failed: ${err.message}`));
      });
      req.end(opts.body);
    });
    const status = res.statusCode ?? 0;
    if (status >= 300 && status < 400 && res.headers.location && opts.followRedirects !== false) {
      res.resume();
      if (hop >= maxRedirects) throw new OutboundError("too_many_redirects", `More than ${maxRedirects} redirects from ${raw}.`);
      current = new URL(res.headers.location, url);
      continue;
    }
    return { status, headers: res.headers, url, body: res };
  }
}

export interface FetchResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  url: URL;
  body: Buffer;
}

/** A vetted fetch whose body is read into memory, up to maxBytes, the whole within timeoutMs. */
export async function safeFetch(raw: string, opts: FetchOptions): Promise<FetchResult> {
  const started = Date.now();
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const res = await fetchStream(raw, { ...opts, timeoutMs });
  const body = await readFetchedBody(res, { maxBytes: opts.maxBytes ?? 20 * 1024 * 1024, timeoutMs: Math.max(1, timeoutMs - (Date.now() - started)) });
  return { status: res.status, headers: res.headers, url: res.url, body };
}

/**
 * A fetched body read into memory within `timeoutMs` from now, all told (the socket's idle timeout
 * restarts with every byte: a server sending one every few seconds would hold the reader for
 * ever): at most `maxBytes`, beyond which the fetch fails as "too_large", or with `truncate`
 * ends there, the first maxBytes read.
 */
export async function readFetchedBody(res: FetchStreamResult, opts: { maxBytes: number; timeoutMs: number; truncate?: boolean }): Promise<Buffer> {
  const { maxBytes } = opts;
  const tooLarge = () => new OutboundError("too_large", `The response from ${res.url.host} is larger than ${maxBytes} bytes.`);
  if (!opts.truncate && Number(res.headers["content-length"]) > maxBytes) {
    res.body.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const deadline = setTimeout(() => res.body.destroy(new OutboundError("timeout", `Reading from ${res.url.host} took longer than ${opts.timeoutMs} ms.`)), opts.timeoutMs);
  try {
    for await (const c of res.body) {
      const chunk = c as Buffer;
      if (size + chunk.length > maxBytes) {
        res.body.destroy();
        if (!opts.truncate) throw tooLarge();
        chunks.push(chunk.subarray(0, maxBytes - size));
        size = maxBytes;
        break;
      }
      chunks.push(chunk);
      size += chunk.length;
    }
  } catch (err) {
    throw err instanceof OutboundError ? err : new OutboundError("network", `Reading from ${res.url.host} failed: ${(err as Error).message}`);
  } finally {
    clearTimeout(deadline);
  }
  return Buffer.concat(chunks, size);
}
