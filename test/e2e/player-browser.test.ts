/**
 * The player in a real browser (headless Chromium): what a person who opens a share URL sees,
 * and the owner's open tabs following ui.state.set and player.command made through the JSON
 * endpoint. The HTML itself is checked over plain HTTP in player-page.test.ts.
 */
import test from "ava";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";
import { startImageServer, type ImageServer } from "../helpers/image-server.js";
import { createShowcase, type Showcase } from "../helpers/showcase.js";
import { launchBrowser, startTogether, screenshot, startCuttableProxy, submitSignIn } from "../helpers/browser.js";

const PASSWORD = "tiles and trams of Lisbon";

/** The bound for a change to reach every open tab. */
const LIVE_WITHIN_MS = 2_000;

let sys: TestSystem;
let img: ImageServer;
let browser: Browser;
let owner: TestUser;
let show: Showcase;

test.before(async () => {
  img = await startImageServer();
  [sys, browser] = await startTogether(startTestSystem({ OUTBOUND_ALLOWED_HOSTS: img.host }), launchBrowser());
  // An owner who can also sign in on the web page.
  const username = `owner_${Date.now().toString(36)}`;
  owner = await sys.user({ username, plan: "paid", password: PASSWORD });
  show = await createShowcase(sys, owner, img);
});
test.after.always(async () => {
  await browser?.close();
  await sys?.stop();
  await img?.close();
});

/** A tab of an anonymous visitor, or of the owner (bearer token on every request, as a signed-in page has). */
async function openTab(url: string, opts: { as?: TestUser; context?: BrowserContext } = {}): Promise<Page> {
  const context = opts.context ?? await browser.newContext({
    viewport: { width: 1280, height: 800 },
    extraHTTPHeaders: opts.as ? { authorization: `Bearer ${opts.as.token}` } : {},
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  (page as Page & { scriptErrors?: string[] }).scriptErrors = errors;
  await page.goto(url);
  return page;
}

/** A browser context signed in through the sign-in page's form, as a person does. */
async function signedInContext(user: TestUser): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await page.goto(`${sys.url}/`);
  await submitSignIn(page, user.username, PASSWORD);
  await page.waitForSelector(`text=Signed in as`);
  await page.close();
  return context;
}

const bodyData = (page: Page, key: string) => page.evaluate((k) => document.body.dataset[k], key);

async function waitForBody(page: Page, key: string, value: string, timeout = LIVE_WITHIN_MS): Promise<void> {
  await page.waitForFunction(([k, v]) => document.body.dataset[k!] === v, [key, value] as const, { timeout });
}

test.serial("a share URL shows the collection: the first item in the carousel, every thumbnail, the image at 800 px; a screenshot is saved", async (t) => {
  const page = await openTab(show.shareUrl);
  t.is(await page.title(), `Summer in Lisbon · @${owner.username}`);
  await waitForBody(page, "current", String(show.ids.image));
  t.is(await bodyData(page, "view"), "carousel");
  t.is(await bodyData(page, "fullscreen"), "false");
  t.is(await bodyData(page, "live"), undefined, "an anonymous visitor's page does not follow anyone");
  // The current slide's image is loaded and visible.
  const image = page.locator(`#item-${show.ids.image} img.main`);
  await image.waitFor({ state: "visible" });
  await page.waitForFunction((id) => {
    const el = document.querySelector<HTMLImageElement>(`#item-${id} img.main`);
    return Boolean(el?.complete && el.naturalWidth > 0);
  }, show.ids.image);
  t.is(await image.evaluate((el: HTMLImageElement) => el.naturalWidth), 800);
  t.is(await page.locator("button.thumb").count(), 8);
  t.true(await page.locator("h1").first().isVisible());
  const path = await screenshot(page, "player-carousel");
  t.log(`screenshot: ${path}`);
  t.deepEqual((page as Page & { scriptErrors?: string[] }).scriptErrors, []);
  await page.context().close();
});

test.serial("keyboard: arrows move between items, f toggles fullscreen, Escape leaves it", async (t) => {
  const page = await openTab(show.shareUrl);
  await waitForBody(page, "current", String(show.ids.image));
  await page.keyboard.press("ArrowRight");
  await waitForBody(page, "current", String(show.ids.audio));
  await page.keyboard.press("ArrowRight");
  await waitForBody(page, "current", String(show.ids.video));
  await page.keyboard.press("ArrowLeft");
  await waitForBody(page, "current", String(show.ids.audio));
  await page.keyboard.press("f");
  await waitForBody(page, "fullscreen", "true");
  await page.keyboard.press("Escape");
  await waitForBody(page, "fullscreen", "false");
  t.pass();
  await page.context().close();
});

test.serial("open_fullscreen boots the first item fullscreen, ?fullscreen=false overrides it", async (t) => {
  const publish = (open_fullscreen: boolean) => sys.must(owner.token, { op: "collections.publish", collection_id: show.collectionId, slug: "lisbon", share_access_level: "public", open_fullscreen });
  await publish(true);
  try {
    const page = await openTab(show.shareUrl);
    await waitForBody(page, "current", String(show.ids.image));
    t.is(await bodyData(page, "fullscreen"), "true");
    await screenshot(page, "player-fullscreen");
    await page.goto(`${show.shareUrl}?fullscreen=false`);
    await waitForBody(page, "current", String(show.ids.image));
    t.is(await bodyData(page, "fullscreen"), "false");
    await page.context().close();
  } finally {
    await publish(false);
  }
});

test.serial("an unknown share URL shows the friendly 404 page", async (t) => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const res = await page.goto(`${sys.url}/${owner.username}/no-such-slug`);
  t.is(res?.status(), 404);
  t.is(await page.locator("h1").textContent(), "Nothing here");
  await screenshot(page, "player-404");
  await context.close();
});

test.serial("two tabs of the owner signed in on the web page follow ui.state.set and player.command within 2 s", async (t) => {
  const context = await signedInContext(owner);
  const tabs = [await openTab(show.shareUrl, { context }), await openTab(show.shareUrl, { context })];
  for (const tab of tabs) await waitForBody(tab, "live", "connected", 10_000);

  await sys.must(owner.token, { op: "ui.state.set", collection_id: show.collectionId, media_id: show.ids.video });
  await Promise.all(tabs.map((tab) => waitForBody(tab, "current", String(show.ids.video))));

  t.is((await sys.must(owner.token, { op: "player.command", command: "next" })).delivered_to, 2);
  await Promise.all(tabs.map((tab) => waitForBody(tab, "current", String(show.ids.link))));

  await sys.must(owner.token, { op: "ui.state.set", view_mode: "grid" });
  await Promise.all(tabs.map((tab) => waitForBody(tab, "view", "grid")));
  await sys.must(owner.token, { op: "ui.state.set", view_mode: "carousel" });
  await Promise.all(tabs.map((tab) => waitForBody(tab, "view", "carousel")));

  // Another user's command reaches none of them.
  const stranger = await sys.user();
  t.is((await sys.must(stranger.token, { op: "player.command", command: "previous" })).delivered_to, 0);
  await screenshot(tabs[0]!, "player-live");
  t.is(await bodyData(tabs[0]!, "current"), String(show.ids.link));
  await context.close();
});

test.serial("a tab whose connection dropped reconnects and shows the current state at once (a page sent with a bearer token)", async (t) => {
  // The tab reaches the gateway through a proxy whose connections the test cuts.
  const proxy = await startCuttableProxy(sys.url);
  const context = await browser.newContext({ extraHTTPHeaders: { authorization: `Bearer ${owner.token}` } });
  try {
    const tab = await openTab(show.shareUrl.replace(sys.url, proxy.url), { context });
    await waitForBody(tab, "live", "connected", 10_000);
    await sys.must(owner.token, { op: "ui.state.set", collection_id: show.collectionId, media_id: show.ids.image });
    await waitForBody(tab, "current", String(show.ids.image));

    proxy.cut();
    await waitForBody(tab, "live", "reconnecting", 10_000);
    // Changed while the tab could not hear it.
    await sys.must(owner.token, { op: "ui.state.set", collection_id: show.collectionId, media_id: show.ids.markdown });
    t.is(await bodyData(tab, "current"), String(show.ids.image));
    proxy.restore();
    // The stream asks for a retry after 3 s; the first message after it is the current state.
    await waitForBody(tab, "current", String(show.ids.markdown), 10_000);
    t.is(await bodyData(tab, "live"), "connected");
  } finally {
    await context.close();
    await proxy.close();
  }
});
