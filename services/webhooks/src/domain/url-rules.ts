/**
 * The rules a webhook URL must pass, at collections.webhook_set and again before every delivery
 * (DNS can change in between): https only, no credentials, no host of this service itself, at
 * most 2000 characters, and no private, loopback, link-local, CGNAT, multicast, reserved or
 * cloud-metadata address in any spelling. The WHATWG URL parser already turns decimal, hex,
 * octal and shortened IPv4 into dotted quads and IPv6 into canonical form; IPv4-mapped IPv6 is
 * judged by its IPv4 address, and the other IPv6 forms that carry an IPv4 address (NAT64,
 * 6to4, Teredo) are not public unicast and refused. A name is judged by every address it
 * resolves to. OUTBOUND_ALLOWED_HOSTS lifts the address rule for named hosts (tests), never the
 * service-host rule.
 */
import ipaddr from "ipaddr.js";
import { AppError } from "@cms/platform";

export const MAX_URL_LENGTH = 2000;
export const ALLOWED_EVENTS = ["collection.updated"] as const;

/** Names that are never a receiver, whatever they resolve to. */
const BLOCKED_NAMES = [/^localhost$/, /\.localhost$/, /^metadata\.google\.internal$/, /^metadata$/, /\.internal$/, /\.local$/];

export interface UrlPolicy {
  /** BASE_URL, APP_URL and MCP_URL: their host and port are this service's own. */
  serviceOrigins: string[];
  /** OUTBOUND_ALLOWED_HOSTS: "host" or "host:port", lower case. */
  allowedHosts: string[];
}

/** Host and port, lower case, with the scheme's default port made explicit. */
function hostPort(url: URL): string {
  const port = url.port || (url.protocol === "https:" ? "443" : url.protocol === "http:" ? "80" : "");
  return `${url.hostname.toLowerCase()}:${port}`;
}

/** True unless the address is ordinary public unicast (IPv4-mapped IPv6 judged as IPv4). */
export function isBlockedIp(address: string): boolean {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(address.replace(/^\[|\]$/g, ""));
  } catch {
    return true;
  }
  if (addr.kind() === "ipv6") {
    const v6 = addr as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) return isBlockedIp(v6.toIPv4Address().toString());
    return v6.range() !== "unicast";
  }
  return addr.range() !== "unicast";
}

/** The parsed URL once the rules that need no DNS pass; throws the contract's error otherwise. */
export function checkWebhookUrl(raw: string, policy: UrlPolicy): URL {
  if (raw.length > MAX_URL_LENGTH) throw new AppError("invalid_request", `url must be at most ${MAX_URL_LENGTH} characters.`, { field: "url" });
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError("invalid_request", "url is not an absolute URL.", { field: "url" });
  }
  if (url.protocol !== "https:") throw new AppError("webhook_url_not_https", `Webhook URLs must use https, not ${url.protocol.replace(/:$/, "")}.`, { field: "url" });
  if (url.username || url.password) throw new AppError("webhook_url_has_credentials", "Webhook URLs must not carry credentials (user:password@); authenticate deliveries with the signature instead.", { field: "url" });
  const own = new Set(policy.serviceOrigins.map((o) => { try { return hostPort(new URL(o)); } catch { return ""; } }));
  if (own.has(hostPort(url))) throw new AppError("webhook_url_service_host", "Webhook URLs must not point at this service itself.", { field: "url" });
  if (isAllowedHost(url, policy)) return url;
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (ipaddr.isValid(host)) {
    if (isBlockedIp(host)) throw blockedHost(host);
  } else if (BLOCKED_NAMES.some((re) => re.test(host))) {
    throw blockedHost(host);
  }
  return url;
}

export function isAllowedHost(url: URL, policy: Pick<UrlPolicy, "allowedHosts">): boolean {
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return policy.allowedHosts.includes(host) || policy.allowedHosts.includes(hostPort(url).replace(/^\[|\]/g, ""));
}

export function blockedHost(host: string): AppError {
  return new AppError("webhook_url_blocked_host", `The webhook host ${host} is private, loopback, link-local, multicast or a metadata address (or resolves to one); deliveries go only to public hosts.`, { field: "url" });
}

/** The addresses a name resolved to, judged: every one must be public. */
export function checkResolved(url: URL, addresses: string[], policy: Pick<UrlPolicy, "allowedHosts">): void {
  if (isAllowedHost(url, policy)) return;
  if (!addresses.length || addresses.some(isBlockedIp)) throw blockedHost(url.hostname);
}

/** events omitted, or exactly the events v1 emits. */
export function checkEvents(events: readonly string[]): string[] {
  const unknown = events.filter((e) => !(ALLOWED_EVENTS as readonly string[]).includes(e));
  if (unknown.length) {
    throw new AppError("invalid_request", `Unknown event${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")}; v1 emits only collection.updated, so omit events.`, { field: "events", allowed_events: [...ALLOWED_EVENTS] });
  }
  return [...ALLOWED_EVENTS];
}
