/** A local HTTP server for fetch paths: serves a generated image and simple pages. */
import http from "node:http";
import type { AddressInfo } from "node:net";
import sharp from "sharp";

export interface ImageServer {
  host: string;
  url(path: string): string;
  hits: string[];
  close(): Promise<void>;
}

export async function startImageServer(): Promise<ImageServer> {
  const png = await sharp({ create: { width: 1200, height: 900, channels: 3, background: { r: 200, g: 80, b: 40 } } }).png().toBuffer();
  const jpeg = await sharp({ create: { width: 2000, height: 1500, channels: 3, background: { r: 20, g: 120, b: 200 } } }).jpeg().toBuffer();
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? "");
    if (req.url === "/cover.png") { res.writeHead(200, { "content-type": "image/png", "content-length": png.length }); res.end(png); return; }
    if (req.url === "/redirect-to-private") { res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data" }); res.end(); return; }
    if (req.url === "/not-an-image") { res.writeHead(200, { "content-type": "text/plain" }); res.end("hello"); return; }
    if (req.url === "/photo.jpg") { res.writeHead(200, { "content-type": "image/jpeg", "content-length": jpeg.length }); res.end(jpeg); return; }
    // JPEG bytes under a misleading name and type: the server must sniff the bytes.
    if (req.url === "/disguised.txt") { res.writeHead(200, { "content-type": "text/plain" }); res.end(jpeg); return; }
    if (req.url === "/notes.txt") { res.writeHead(200, { "content-type": "text/plain; charset=utf-8" }); res.end("just some text\n"); return; }
    if (req.url === "/page.html") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(`<html><head><title>A page</title><meta property="og:image" content="/cover.png"></head><body>hi</body></html>`);
      return;
    }
    if (req.url === "/twitter.html") {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(`<html><head><meta name="twitter:image" content="${"http://127.0.0.1:" + (server.address() as AddressInfo).port}/cover.png"><title>Tw</title></head></html>`);
      return;
    }
    if (req.url === "/private-preview.html") {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(`<html><head><meta property="og:image" content="http://169.254.169.254/latest/meta-data/x.png"></head></html>`);
      return;
    }
    if (req.url === "/trickle.html") {
      // The start of a page at once, then a byte every 200 ms for as long as the reader stays.
      res.writeHead(200, { "content-type": "text/html" });
      res.write("<html><head><title>Never ends");
      const drip = setInterval(() => res.write(" "), 200);
      res.on("close", () => clearInterval(drip));
      return;
    }
    res.writeHead(404); res.end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    host: `127.0.0.1:${port}`,
    url: (p) => `http://127.0.0.1:${port}${p}`,
    hits,
    close: () => new Promise<void>((r) => { server.close(() => r()); server.closeAllConnections(); }),
  };
}
