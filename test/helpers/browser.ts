/**
 * Headless Chromium for page tests: Debian's `chromium` driven by playwright-core. CI installs
 * the package (.ci/run); a machine without it fails these tests with that instruction rather
 * than skipping them.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { ROOT } from "./paths.js";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Screenshots and other things a person looks at after a run (gitignored). */
export const ARTIFACTS = join(ROOT, "test-artifacts");

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}

type Closable = { stop(): Promise<void> } | { close(): Promise<void> };

/**
 * Starts a test's pieces together (a system, the browser, a server) and answers all of them; when
 * one fails to start, the others are stopped before the failure is thrown. A before hook that
 * failed leaves its variables unset, so its after hook could not stop what did start (a system
 * left running holds its embedded PostgreSQL until the machine restarts).
 */
export async function startTogether<T extends readonly Closable[]>(...starting: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(starting);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (!failed) return settled.map((r) => (r as PromiseFulfilledResult<Closable>).value) as unknown as T;
  for (const r of settled) {
    if (r.status === "fulfilled") await ("stop" in r.value ? r.value.stop() : r.value.close()).catch(() => {});
  }
  throw failed.reason;
}

/** Saves a full-page screenshot as test-artifacts/<name>.png; its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Fills the sign-in form on the page shown (the web pages' own, or the authorization page's) and submits it; resolves once the next page has loaded. */
export async function submitSignIn(page: Page, username: string, password: string): Promise<void> {
  await page.fill("#username", username);
  await page.fill("#password", password);
  await Promise.all([page.waitForLoadState("load"), page.click("button[type=submit]")]);
}

/**
 * A TCP proxy in front of a server, whose connections a test can cut (a laptop that slept, a
 * network that dropped) and whose new connections it can refuse until it is restored.
 */
export interface CuttableProxy {
  url: string;
  /** Ends every open connection and refuses new ones. */
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startCuttableProxy(target: string): Promise<CuttableProxy> {
  const { createServer, connect } = await import("node:net");
  const { hostname, port } = new URL(target);
  const open = new Set<import("node:net").Socket>();
  let refusing = false;
  const server = createServer((client) => {
    if (refusing) { client.destroy(); return; }
    const upstream = connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on("close", () => open.delete(s));
      s.on("error", () => { client.destroy(); upstream.destroy(); });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as import("node:net").AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    cut() { refusing = true; for (const s of open) s.destroy(); },
    restore() { refusing = false; },
    close: () => new Promise((resolve) => { for (const s of open) s.destroy(); server.close(() => resolve()); }),
  };
}
