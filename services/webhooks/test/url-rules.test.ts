/** Every webhook URL rule, table-driven, with each spelling of the addresses it refuses. */
import test from "ava";
import { AppError } from "@cms/platform";
import { checkEvents, checkResolved, checkWebhookUrl, isBlockedIp, type UrlPolicy } from "../src/domain/url-rules.js";

const policy: UrlPolicy = {
  serviceOrigins: ["https://api.example.com", "https://app.example.com", "http://mcp.example.com:8443"],
  allowedHosts: ["receiver.test:9443"],
};
const codeOf = (url: string, p: UrlPolicy = policy) => {
  try { checkWebhookUrl(url, p); return "ok"; } catch (err) { return (err as AppError).code; }
};

const CASES: Array<[string, string]> = [
  // scheme and credentials
  ["https://hooks.example.org/x", "ok"],
  ["http://hooks.example.org/x", "webhook_url_not_https"],
  ["ftp://hooks.example.org/x", "webhook_url_not_https"],
  ["HTTPS://hooks.example.org/x", "ok"],
  ["https://user:pass@hooks.example.org/x", "webhook_url_has_credentials"],
  ["https://user@hooks.example.org/x", "webhook_url_has_credentials"],
  ["not a url", "invalid_request"],
  // the service's own hosts, by host and port
  ["https://api.example.com/hook", "webhook_url_service_host"],
  ["https://API.EXAMPLE.COM:443/hook", "webhook_url_service_host"],
  ["https://app.example.com/", "webhook_url_service_host"],
  ["https://mcp.example.com:8443/", "webhook_url_service_host"],
  ["https://mcp.example.com/", "ok"],
  ["https://api.example.com:8443/", "ok"],
  // loopback in every spelling the URL parser accepts
  ["https://127.0.0.1/", "webhook_url_blocked_host"],
  ["https://127.1/", "webhook_url_blocked_host"],
  ["https://2130706433/", "webhook_url_blocked_host"],
  ["https://0x7f000001/", "webhook_url_blocked_host"],
  ["https://0x7f.0.0.1/", "webhook_url_blocked_host"],
  ["https://017700000001/", "webhook_url_blocked_host"],
  ["https://0177.0.0.01/", "webhook_url_blocked_host"],
  ["https://[::1]/", "webhook_url_blocked_host"],
  ["https://[0:0:0:0:0:0:0:1]/", "webhook_url_blocked_host"],
  ["https://[::ffff:127.0.0.1]/", "webhook_url_blocked_host"],
  ["https://[::ffff:7f00:1]/", "webhook_url_blocked_host"],
  ["https://localhost/", "webhook_url_blocked_host"],
  ["https://a.b.localhost/", "webhook_url_blocked_host"],
  ["https://0.0.0.0/", "webhook_url_blocked_host"],
  ["https://0/", "webhook_url_blocked_host"],
  // private, link-local, CGNAT, metadata, multicast, reserved
  ["https://10.0.0.1/", "webhook_url_blocked_host"],
  ["https://167772161/", "webhook_url_blocked_host"],
  ["https://172.16.5.4/", "webhook_url_blocked_host"],
  ["https://192.168.1.1/", "webhook_url_blocked_host"],
  ["https://0xc0.0xa8.1.1/", "webhook_url_blocked_host"],
  ["https://169.254.169.254/latest/meta-data", "webhook_url_blocked_host"],
  ["https://2852039166/", "webhook_url_blocked_host"],
  ["https://[::ffff:169.254.169.254]/", "webhook_url_blocked_host"],
  ["https://[fd00:ec2::254]/", "webhook_url_blocked_host"],
  ["https://metadata.google.internal/", "webhook_url_blocked_host"],
  ["https://100.64.0.1/", "webhook_url_blocked_host"],
  ["https://100.100.100.200/", "webhook_url_blocked_host"],
  ["https://224.0.0.1/", "webhook_url_blocked_host"],
  ["https://[ff02::1]/", "webhook_url_blocked_host"],
  ["https://255.255.255.255/", "webhook_url_blocked_host"],
  ["https://240.0.0.1/", "webhook_url_blocked_host"],
  ["https://[fe80::1]/", "webhook_url_blocked_host"],
  ["https://[fc00::1]/", "webhook_url_blocked_host"],
  // IPv6 forms that carry an IPv4 address: NAT64, 6to4, Teredo
  ["https://[64:ff9b::7f00:1]/", "webhook_url_blocked_host"],
  ["https://[64:ff9b::a00:1]/", "webhook_url_blocked_host"],
  ["https://[2002:7f00:1::]/", "webhook_url_blocked_host"],
  ["https://[2001:0::1]/", "webhook_url_blocked_host"],
  // public addresses pass
  ["https://93.184.216.34/", "ok"],
  ["https://[2606:2800:220:1:248:1893:25c8:1946]/", "ok"],
  ["https://[::ffff:93.184.216.34]/", "ok"],
  // the allow list lifts the address rule for its host:port only
  ["https://receiver.test:9443/hook", "ok"],
];

for (const [url, expected] of CASES) {
  test(`${url} -> ${expected}`, (t) => t.is(codeOf(url), expected));
}

test("at most 2000 characters", (t) => {
  const base = "https://hooks.example.org/";
  t.is(codeOf(base + "a".repeat(2000 - base.length)), "ok");
  t.is(codeOf(base + "a".repeat(2001 - base.length)), "invalid_request");
});

test("the allow list never lifts the service-host rule", (t) => {
  t.is(codeOf("https://api.example.com/", { ...policy, allowedHosts: ["api.example.com"] }), "webhook_url_service_host");
});

test("a name is judged by every address it resolves to", (t) => {
  const url = new URL("https://hooks.example.org/");
  t.notThrows(() => checkResolved(url, ["93.184.216.34"], policy));
  t.throws(() => checkResolved(url, ["93.184.216.34", "10.1.2.3"], policy), { instanceOf: AppError, message: /blocked|private/ });
  t.throws(() => checkResolved(url, ["::ffff:127.0.0.1"], policy));
  t.throws(() => checkResolved(url, [], policy));
  t.notThrows(() => checkResolved(new URL("https://receiver.test:9443/"), ["127.0.0.1"], policy));
});

test("isBlockedIp on raw addresses", (t) => {
  for (const a of ["127.0.0.1", "::1", "10.1.1.1", "fd12::1", "169.254.1.1", "::ffff:10.0.0.1", "garbage"]) t.true(isBlockedIp(a), a);
  for (const a of ["8.8.8.8", "2001:4860:4860::8888", "::ffff:8.8.8.8"]) t.false(isBlockedIp(a), a);
});

test("events: omitted or collection.updated; anything else names allowed_events", (t) => {
  t.deepEqual(checkEvents([]), ["collection.updated"]);
  t.deepEqual(checkEvents(["collection.updated"]), ["collection.updated"]);
  const err = t.throws(() => checkEvents(["collection.deleted"])) as AppError;
  t.is(err.code, "invalid_request");
  t.deepEqual(err.extra.allowed_events, ["collection.updated"]);
});
