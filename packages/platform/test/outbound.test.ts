/** The SSRF guard (which addresses are refused, in every encoding, and the allow list) and the fetch's time and size bounds. */
import test, { type ExecutionContext } from "ava";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { fetchStream, isBlockedAddress, OutboundError, readFetchedBody, safeFetch, vetUrl } from "../src/outbound.js";

test("private, loopback, link-local, metadata, CGNAT, unique-local and mapped addresses are blocked", (t) => {
  for (const a of ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "::", "fe80::1", "fd00::1", "fd00:ec2::254", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "224.0.0.1", "255.255.255.255"]) {
    t.true(isBlockedAddress(a), a);
  }
  for (const a of ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) t.false(isBlockedAddress(a), a);
  t.true(isBlockedAddress("not an ip"));
});

test("URLs naming blocked hosts in other encodings are refused", async (t) => {
  const policy = { allowedHosts: [] };
  for (const u of ["http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/", "http://127.1/", "http://[::ffff:7f00:1]/", "http://[0:0:0:0:0:0:0:1]/", "http://localhost/"]) {
    const err = await t.throwsAsync(vetUrl(u, policy), { instanceOf: OutboundError }, u);
    t.is(err?.reason, "blocked_host", u);
  }
  for (const u of ["ftp://example.com/", "file:///etc/passwd", "http://user:pw@example.com/", "not a url"]) {
    const err = await t.throwsAsync(vetUrl(u, policy), { instanceOf: OutboundError }, u);
    t.is(err?.reason, "bad_url", u);
  }
});

test("the allow list lifts the rule for the named host (and port) only", async (t) => {
  const server = http.createServer((req, res) => {
    if (req.url === "/redirect") { res.writeHead(302, { location: "http://127.0.0.2:9/private" }); res.end(); return; }
    if (req.url === "/big") { res.writeHead(200); res.end(Buffer.alloc(5000)); return; }
    res.writeHead(200, { "content-type": "text/plain" }); res.end("ok");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  t.teardown(() => { server.close(); server.closeAllConnections(); });
  const port = (server.address() as AddressInfo).port;
  const res = await safeFetch(`http://127.0.0.1:${port}/`, { policy: { allowedHosts: [`127.0.0.1:${port}`] } });
  t.is(res.body.toString(), "ok");
  t.is((await safeFetch(`http://127.0.0.1:${port}/`, { policy: { allowedHosts: ["127.0.0.1"] } })).status, 200);
  await t.throwsAsync(safeFetch(`http://127.0.0.1:${port}/`, { policy: { allowedHosts: [`127.0.0.1:${port + 1}`] } }), { instanceOf: OutboundError });
  // A redirect to another private host is checked again and refused.
  const redirect = await t.throwsAsync(safeFetch(`http://127.0.0.1:${port}/redirect`, { policy: { allowedHosts: [`127.0.0.1:${port}`] } }), { instanceOf: OutboundError });
  t.is(redirect?.reason, "blocked_host");
  const big = await t.throwsAsync(safeFetch(`http://127.0.0.1:${port}/big`, { policy: { allowedHosts: [`127.0.0.1:${port}`] }, maxBytes: 1000 }), { instanceOf: OutboundError });
  t.is(big?.reason, "too_large");
});

/** A server on 127.0.0.1 speaking raw TCP (`serve` gets each connection), closed after the test. */
async function rawServer(t: ExecutionContext, serve: (socket: net.Socket) => void): Promise<{ url: string; policy: { allowedHosts: string[] } }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => { sockets.add(socket); socket.on("close", () => sockets.delete(socket)); socket.on("error", () => {}); serve(socket); });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  t.teardown(() => { for (const s of sockets) s.destroy(); server.close(); });
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url: `http://${host}/`, policy: { allowedHosts: [host] } };
}

/** Writes `first`, then `drip` every 50 ms until the connection closes. */
function trickle(socket: net.Socket, first: string, drip: string): void {
  socket.write(first);
  const timer = setInterval(() => socket.write(drip), 50);
  socket.on("close", () => clearInterval(timer));
}

test("an answer whose headers come a byte at a time fails as a timeout at timeoutMs, all told (the socket's idle timeout restarts with every byte)", async (t) => {
  const { url, policy } = await rawServer(t, (socket) => trickle(socket, "HTTP/1.1 200 OK\r\nx-slow: ", "a"));
  // Before, the fetch waited for the headers' end (16 KiB at 20 bytes a second: 14 minutes).
  const err = await t.throwsAsync(fetchStream(url, { policy, timeoutMs: 400 }), { instanceOf: OutboundError });
  t.is(err?.reason, "timeout");
});

test("a body read into memory ends at its deadline, all told, and a truncated read keeps exactly maxBytes", async (t) => {
  const { url, policy } = await rawServer(t, (socket) => trickle(socket, "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\r\n<html>", " "));
  const err = await t.throwsAsync(safeFetch(url, { policy, timeoutMs: 400 }), { instanceOf: OutboundError });
  t.is(err?.reason, "timeout");
  const page = await readFetchedBody(await fetchStream(url, { policy, timeoutMs: 5_000 }), { maxBytes: 4, timeoutMs: 5_000, truncate: true });
  t.is(page.toString(), "<htm");
  const whole = await t.throwsAsync(readFetchedBody(await fetchStream(url, { policy, timeoutMs: 5_000 }), { maxBytes: 8, timeoutMs: 5_000 }), { instanceOf: OutboundError });
  t.is(whole?.reason, "too_large");
});
