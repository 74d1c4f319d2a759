/**
 * A browser-like HTTP client for the first-party pages: a cookie jar, no automatic redirects,
 * the forms' hidden fields read from the HTML, and a source address of its own on the loopback
 * network (127.0.0.x), so that each test's sign-in attempts count against its own address.
 */
import http from "node:http";

export interface WebResponse { status: number; headers: Headers; html: string; location?: string; setCookies: string[] }

let nextAddress = 2;
/** A loopback source address no other client of this process uses. */
export function freshLoopbackAddress(): string {
  const n = nextAddress++;
  return `127.0.${Math.floor(n / 250)}.${(n % 250) + 2}`;
}

export class WebClient {
  /** name -> value */
  readonly jar = new Map<string, string>();
  constructor(readonly base: string, readonly address: string = freshLoopbackAddress()) {}

  cookieHeader(): string {
    return [...this.jar].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  private keep(headers: Headers): string[] {
    const set = headers.getSetCookie();
    for (const c of set) {
      const [pair, ...attrs] = c.split(";");
      const i = pair!.indexOf("=");
      const name = pair!.slice(0, i).trim();
      const value = pair!.slice(i + 1).trim();
      const maxAge = attrs.map((a) => a.trim().toLowerCase()).find((a) => a.startsWith("max-age="));
      if (!value || maxAge === "max-age=0") this.jar.delete(name);
      else this.jar.set(name, value);
    }
    return set;
  }

  async request(path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<WebResponse> {
    const headers: Record<string, string> = { ...init.headers };
    if (this.jar.size && !headers.cookie) headers.cookie = this.cookieHeader();
    const url = new URL(path, this.base);
    const { status, raw, body } = await new Promise<{ status: number; raw: string[]; body: string }>((resolve, reject) => {
      const req = http.request(url, { method: init.method ?? "GET", headers, localAddress: this.address }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode!, raw: res.rawHeaders, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(init.body);
    });
    const h = new Headers();
    for (let i = 0; i < raw.length; i += 2) h.append(raw[i]!, raw[i + 1]!);
    const setCookies = this.keep(h);
    return { status, headers: h, html: body, location: h.get("location") ?? undefined, setCookies };
  }

  get(path: string): Promise<WebResponse> {
    return this.request(path);
  }

  post(path: string, fields: Record<string, string>): Promise<WebResponse> {
    return this.request(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(fields).toString() });
  }

  /** Fetches the sign-in page and posts the form: the answer to the POST. */
  async signIn(username: string, password: string, returnTo = "/"): Promise<WebResponse> {
    const page = await this.get(returnTo);
    return this.post("/signin", { csrf: hiddenField(page.html, "csrf"), return_to: returnTo, username, password });
  }
}

/** The value of a hidden field in a page (the first of that name). */
export function hiddenField(html: string, name: string): string {
  const m = new RegExp(`<input type="hidden" name="${name}" value="([^"]*)">`).exec(html);
  if (!m) throw new Error(`no hidden field ${name} in:\n${html.slice(0, 2000)}`);
  return m[1]!.replace(/&amp;/g, "&").replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">");
}

/** The text of the page's alert, if any. */
export function alertOf(html: string): string | undefined {
  return /<p class="alert" role="alert">([^<]*)<\/p>/.exec(html)?.[1];
}
