/** The player page behind a share URL, over plain HTTP (the browser tests are player-browser.test.ts). */
import test from "ava";
import { startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";
import { startImageServer, type ImageServer } from "../helpers/image-server.js";
import { createShowcase, type Showcase } from "../helpers/showcase.js";

let sys: TestSystem;
let img: ImageServer;
let owner: TestUser;
let show: Showcase;

test.before(async () => {
  img = await startImageServer();
  sys = await startTestSystem({ OUTBOUND_ALLOWED_HOSTS: img.host });
  owner = await sys.user({ plan: "paid" });
  show = await createShowcase(sys, owner, img);
});
test.after.always(async () => { await sys?.stop(); await img?.close(); });

async function page(url: string, init: RequestInit = {}) {
  const res = await fetch(url, init);
  return { status: res.status, headers: res.headers, html: await res.text() };
}

/** The page's data block (what its script reads). */
function dataOf(html: string): Record<string, any> {
  const m = /<script type="application\/json" id="player-data">([^<]*)<\/script>/.exec(html);
  if (!m) throw new Error("no data block");
  return JSON.parse(m[1]!);
}

/** Every attribute value of a name in the page, in order. */
function attrs(html: string, re: RegExp): string[] {
  return [...html.matchAll(re)].map((m) => m[1]!.replace(/&amp;/g, "&"));
}

test("the share URL renders the published collection: title, description, Open Graph and Twitter tags, every item in order", async (t) => {
  t.true(show.shareUrl.startsWith(sys.url), show.shareUrl);
  const res = await page(show.shareUrl);
  t.is(res.status, 200);
  t.is(res.headers.get("content-type"), "text/html; charset=utf-8");
  t.regex(res.html, /<title>Summer in Lisbon · @[^<]+<\/title>/);
  t.regex(res.html, /<meta property="og:title" content="Summer in Lisbon">/);
  t.regex(res.html, /<meta property="og:description" content="Tiles, trams &amp; &lt;the&gt; sea">/);
  t.regex(res.html, new RegExp(`<meta property="og:url" content="${show.shareUrl.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}">`));
  t.regex(res.html, /<meta name="twitter:card" content="summary">/);
  // Not searchable: search engines are asked not to index it.
  t.regex(res.html, /<meta name="robots" content="noindex">/);
  const order = attrs(res.html, /<li class="item item-\w+" id="item-(\d+)"/g).map(Number);
  const { ids } = show;
  t.deepEqual(order, [ids.image, ids.audio, ids.video, ids.link, ids.markdown, ids.code, ids.plain, ids.child]);
  t.deepEqual(attrs(res.html, /<li class="item item-(\w+)"/g), ["image", "audio", "video", "link", "note", "note", "note", "collection"]);
  const data = dataOf(res.html);
  t.is(data.collection_id, show.collectionId);
  t.false(data.boot_fullscreen);
  t.false(data.live);
  t.deepEqual(data.prefs, { kinds: { image: true, video: true, audio: true, embed: false, other: false }, loop: true, interval_seconds: 5, shuffle: false });
  t.deepEqual(data.items.map((i: { slide_kind: string }) => i.slide_kind), ["image", "audio", "video", "embed", "other", "other", "other", "other"]);
});

test("items: images from the 800 px background, video and audio from download links, link cards, notes rendered as their mode says, sub-collections the viewer may open", async (t) => {
  const { html } = await page(show.shareUrl);
  const item = (id: number) => {
    const m = new RegExp(`<li [^>]*id="item-${id}"[^>]*>([\\s\\S]*?)</li>`).exec(html);
    if (!m) throw new Error(`item ${id} is not on the page`);
    return m[1]!;
  };
  const described = await sys.must(owner.token, { op: "media.get", media_id: show.ids.image });
  t.truthy(described.media.background_image_url);
  const imageSrc = attrs(item(show.ids.image), /<img class="main" src="([^"]+)"/g)[0]!;
  t.true(imageSrc.startsWith(`${sys.url}/storage/v1/download/`), imageSrc);
  const bg = await fetch(imageSrc);
  t.is(bg.status, 200);
  t.is(bg.headers.get("content-type"), "image/webp");
  const meta = await (await import("sharp")).default(Buffer.from(await bg.arrayBuffer())).metadata();
  t.is(meta.width, 800);
  // The thumbnail strip uses the 200 px thumbnails.
  const thumbs = attrs(html, /<button type="button" class="thumb" [^>]*><img src="([^"]+)"/g);
  t.is(thumbs.length, 8);
  const thumb = await (await import("sharp")).default(Buffer.from(await (await fetch(thumbs[0]!)).arrayBuffer())).metadata();
  t.true(Math.max(thumb.width ?? 0, thumb.height ?? 0) <= 200);

  // Video and audio seek through Range requests on their download links.
  for (const id of [show.ids.video, show.ids.audio]) {
    const src = attrs(item(id), /<(?:video|audio) class="main"[^>]* src="([^"]+)"/g)[0]!;
    const part = await fetch(src, { headers: { range: "bytes=10-19" } });
    t.is(part.status, 206, src);
    t.is(part.headers.get("content-range")?.split("/")[0], "bytes 10-19");
    t.is((await part.arrayBuffer()).byteLength, 10);
  }
  t.regex(item(show.ids.video), /<video class="main" controls preload="metadata"/);
  t.regex(item(show.ids.audio), /<audio class="main" controls preload="metadata"/);

  // The web link is a card to the page, with its preview image (ingested into the store).
  const link = item(show.ids.link);
  t.regex(link, new RegExp(`<a class="frame card" href="${img.url("/page.html")}" rel="noopener noreferrer nofollow ugc" target="_blank">`));
  t.regex(link, /<img src="http:\/\/[^"]+\/storage\/v1\/download\/[^"]+"/);
  t.regex(link, /<strong>A page<\/strong>/);

  // Markdown rendered with raw HTML refused; code and plain text escaped.
  const md = item(show.ids.markdown);
  t.regex(md, /<h1>Day one<\/h1>/);
  t.regex(md, /<strong>Alfama<\/strong> then <em>Belém<\/em>/);
  t.regex(md, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
  t.notRegex(md, /<script>/);
  t.regex(md, /<a href="https:\/\/example.org\/map" rel="noopener noreferrer nofollow ugc" target="_blank">map<\/a>/);
  t.regex(item(show.ids.code), /<pre class="note note-code"><code>const x = 1 &lt; 2;<\/code><\/pre>/);
  t.regex(item(show.ids.plain), /<div class="note note-plain">Dear all,\nwish you were here.<\/div>/);
  // Text notes show their built-in placeholder as thumbnail.
  t.true(thumbs.includes("/assets/player/carousel_placeholders_webp/carousel-placeholder-notes.webp"));

  // The published sub-collection links to its own page; the unpublished one is not on the page at all.
  t.regex(item(show.ids.child), new RegExp(`<a class="frame card card-collection" href="${show.childShareUrl}">`));
  t.false(html.includes(show.hiddenChildName));
  t.is((await page(show.childShareUrl)).status, 200);
});

test("the page's headers: a content security policy without inline script, no caching, no framing", async (t) => {
  const res = await page(show.shareUrl);
  const csp = res.headers.get("content-security-policy") ?? "";
  t.regex(csp, /default-src 'none'/);
  t.regex(csp, /script-src 'self'(;|$)/);
  t.regex(csp, /frame-ancestors 'none'/);
  t.regex(csp, /connect-src 'self'/);
  t.is(res.headers.get("cache-control"), "private, no-store");
  t.is(res.headers.get("x-frame-options"), "DENY");
  t.is(res.headers.get("x-content-type-options"), "nosniff");
  // The only scripts are the asset and the (not executed) data block.
  t.deepEqual(attrs(res.html, /<script([^>]*)>/g), [` src="/assets/player/player.js?v=${/player\.js\?v=(\w+)/.exec(res.html)![1]}" defer`, ` type="application/json" id="player-data"`]);
  const head = await fetch(show.shareUrl, { method: "HEAD" });
  t.is(head.status, 200);
  t.is(head.headers.get("content-length"), String(Buffer.byteLength(res.html)));
});

test("the script and style sheet are cacheable assets with ETags (304 on a match) and versioned URLs", async (t) => {
  const { html } = await page(show.shareUrl);
  for (const [path, type] of [["/assets/player/player.js", "text/javascript; charset=utf-8"], ["/assets/player/player.css", "text/css; charset=utf-8"]] as const) {
    t.regex(html, new RegExp(`${path.replace(/\./g, "\\.")}\\?v=[0-9a-f]{12}`));
    const res = await fetch(`${sys.url}${path}`);
    t.is(res.status, 200);
    t.is(res.headers.get("content-type"), type);
    t.regex(res.headers.get("cache-control") ?? "", /public, max-age=\d+/);
    const etag = res.headers.get("etag")!;
    t.regex(etag, /^"[0-9a-f]+"$/);
    const again = await fetch(`${sys.url}${path}`, { headers: { "if-none-match": etag } });
    t.is(again.status, 304);
  }
});

test("a cover unfurls as a large image card (og:image and twitter:image on the 800 px cover)", async (t) => {
  const { collection } = await sys.must(owner.token, { op: "collections.create", name: "Covered", thumbnail_url: img.url("/cover.png") });
  const { collection: published } = await sys.must(owner.token, { op: "collections.publish", collection_id: collection.id, slug: "covered", share_access_level: "public" });
  const { html } = await page(published.share_url);
  t.regex(html, /<meta name="twitter:card" content="summary_large_image">/);
  const og = attrs(html, /<meta property="og:image" content="([^"]+)">/g)[0]!;
  t.deepEqual(attrs(html, /<meta name="twitter:image" content="([^"]+)">/g), [og]);
  const cover = await fetch(og);
  t.is(cover.status, 200);
  t.is(cover.headers.get("content-type"), "image/webp");
  // No robots rule once the collection is listed in public search.
  await sys.must(owner.token, { op: "collections.update", collection_id: collection.id, searchable: true });
  t.notRegex((await page(published.share_url)).html, /name="robots"/);
});

test("open_fullscreen boots fullscreen; ?fullscreen=false overrides it", async (t) => {
  const { collection } = await sys.must(owner.token, { op: "collections.create", name: "Slides" });
  await sys.must(owner.token, { op: "media.text_note.add", collection_id: collection.id, text: "one" });
  const { collection: published } = await sys.must(owner.token, { op: "collections.publish", collection_id: collection.id, slug: "slides", share_access_level: "public", open_fullscreen: true });
  t.true(dataOf((await page(published.share_url)).html).boot_fullscreen);
  t.false(dataOf((await page(`${published.share_url}?fullscreen=false`)).html).boot_fullscreen);
  t.false(dataOf((await page(show.shareUrl)).html).boot_fullscreen);
  t.true(dataOf((await page(`${show.shareUrl}?fullscreen=true`)).html).boot_fullscreen);
});

test("playback_prefs reach the page's slideshow", async (t) => {
  const { collection } = await sys.must(owner.token, { op: "collections.create", name: "Prefs", playback_prefs: { kinds: { embed: true, audio: false }, interval_seconds: 2, shuffle: true, loop: false } });
  const { collection: published } = await sys.must(owner.token, { op: "collections.publish", collection_id: collection.id, slug: "prefs", share_access_level: "public" });
  t.deepEqual(dataOf((await page(published.share_url)).html).prefs, { kinds: { image: true, video: true, audio: false, embed: true, other: false }, loop: false, interval_seconds: 2, shuffle: true });
});

test("a friendly 404 page for unknown handles and slugs, unpublished, deleted and non-public collections", async (t) => {
  const notFound = async (url: string) => {
    const res = await page(url);
    t.is(res.status, 404, url);
    t.is(res.headers.get("content-type"), "text/html; charset=utf-8");
    t.regex(res.html, /<h1>Nothing here<\/h1>/);
    t.regex(res.html, /<meta name="robots" content="noindex">/);
  };
  await notFound(`${sys.url}/nobody-${Date.now()}/lisbon`);
  await notFound(`${sys.url}/${owner.username}/no-such-slug`);
  await notFound(`${sys.url}/${owner.username}/${"x".repeat(300)}`);
  await notFound(`${sys.url}/%E0%A4%A/lisbon`);

  const make = async (slug: string, level: string) => {
    const { collection } = await sys.must(owner.token, { op: "collections.create", name: `C ${slug}` });
    const { collection: p } = await sys.must(owner.token, { op: "collections.publish", collection_id: collection.id, slug, share_access_level: level });
    return { id: collection.id as number, url: p.share_url as string };
  };
  const unpublished = await make("was-public", "public");
  t.is((await page(unpublished.url)).status, 200);
  await sys.must(owner.token, { op: "collections.unpublish", collection_id: unpublished.id });
  await notFound(unpublished.url);

  const deleted = await make("deleted", "public");
  await sys.must(owner.token, { op: "collections.delete", collection_id: deleted.id, confirm: true });
  await notFound(deleted.url);

  // Registered and restricted collections need a signed-in viewer (an anonymous visit sees nothing).
  await notFound((await make("members", "registered")).url);
  await notFound((await make("restricted", "restricted")).url);

  // Other paths keep the API's JSON 404.
  const api = await fetch(`${sys.url}/a/b/c`);
  t.is(api.status, 404);
  t.is((await api.json()).error, "not_found");
});

test("a sensitive collection asks before showing", async (t) => {
  const { html } = await page(show.shareUrl);
  t.false(html.includes('id="nsfw-gate"'));
  const nsfw = await createShowcase(sys, owner, img, { name: "After dark", slug: "after-dark", fields: { is_nsfw: true } });
  const gated = await page(nsfw.shareUrl);
  t.regex(gated.html, /<div class="gate" id="nsfw-gate" role="dialog"/);
  t.true(dataOf(gated.html).nsfw);
});

test("a page view counts as a view of the public collection (not the owner's own)", async (t) => {
  const { collection } = await sys.must(owner.token, { op: "collections.create", name: "Counted" });
  const { collection: published } = await sys.must(owner.token, { op: "collections.publish", collection_id: collection.id, slug: "counted", share_access_level: "public" });
  await page(published.share_url);
  await page(published.share_url);
  t.is((await sys.must(owner.token, { op: "collections.stats.get", collection_id: collection.id })).stats.views, 2);
});
