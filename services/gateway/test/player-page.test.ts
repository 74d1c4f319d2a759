/** The player page's rules: item kinds, slideshow kinds, prefs, note rendering, what an item links to, safe JSON. */
import test from "ava";
import {
  DEFAULT_PREFS, PLACEHOLDER_OF, itemKindOf, pageItemOf, playbackPrefsOf, renderNote, renderPlayerPage, scriptJson, slideKindOf,
  type PageChild, type PageMedia, type PlayerPageModel, type UrlOf,
} from "../src/domain/player-page.js";

const file = (over: Partial<PageMedia>): PageMedia => ({ id: 1, mainUrl: "store://u/1/1_a.bin", viewer: "other", ...over });
const urlOf: UrlOf = (ref) => (ref.startsWith("store://") ? `https://api.example/dl/${ref.slice(8)}` : ref.startsWith("/assets/") ? ref : undefined);

test("item kinds: sub-collection links, text notes, web links, then stored files by viewer and MIME type", (t) => {
  t.is(itemKindOf(file({ linkedCollectionId: 5n, viewer: "collection" })), "collection");
  t.is(itemKindOf(file({ mainUrl: "inline://text-note", viewer: "markdown" })), "note");
  t.is(itemKindOf(file({ mainUrl: "https://example.org/page", viewer: "website" })), "link");
  t.is(itemKindOf(file({ mainUrl: "https://youtube.com/watch?v=1", viewer: "video" })), "link");
  t.is(itemKindOf(file({ viewer: "image", mimeType: "image/png" })), "image");
  t.is(itemKindOf(file({ viewer: "image", mimeType: "application/pdf" })), "file");
  t.is(itemKindOf(file({ viewer: "video", mimeType: "video/webm" })), "video");
  t.is(itemKindOf(file({ viewer: "other", mimeType: "audio/wav" })), "audio");
  t.is(itemKindOf(file({ viewer: "pdf", mimeType: "application/pdf" })), "file");
});

test("slideshow kinds follow playback_prefs' names (web links are embeds; notes, files and sub-collections are other)", (t) => {
  t.deepEqual((["image", "video", "audio", "link", "note", "collection", "file"] as const).map(slideKindOf), ["image", "video", "audio", "embed", "other", "other", "other"]);
});

test("playback prefs: stored values over the defaults, anything malformed ignored", (t) => {
  t.deepEqual(playbackPrefsOf(null), DEFAULT_PREFS);
  t.deepEqual(playbackPrefsOf({ kinds: { embed: true, image: "yes" }, loop: false, interval_seconds: 12, shuffle: true }),
    { kinds: { ...DEFAULT_PREFS.kinds, embed: true }, loop: false, interval_seconds: 12, shuffle: true });
  t.is(playbackPrefsOf({ interval_seconds: 0 }).interval_seconds, 5);
  t.is(playbackPrefsOf({ interval_seconds: 3601 }).interval_seconds, 5);
  t.is(playbackPrefsOf({ interval_seconds: 2.5 }).interval_seconds, 5);
});

test("notes: markdown without raw HTML, links that open elsewhere, images as links; code and plain text escaped", (t) => {
  const md = renderNote("# T\n<b>x</b> <img src=x onerror=alert(1)> [a](javascript:alert(1)) ![pic](https://evil.example/p.png) https://example.org", "markdown");
  t.regex(md, /<h1>T<\/h1>/);
  t.regex(md, /&lt;b&gt;x&lt;\/b&gt;/);
  t.notRegex(md, /<img/);
  t.notRegex(md, /href="javascript:/);
  t.regex(md, /<a href="https:\/\/evil.example\/p.png" rel="noopener noreferrer nofollow ugc" target="_blank">pic<\/a>/);
  t.regex(md, /<a href="https:\/\/example.org" rel="noopener noreferrer nofollow ugc" target="_blank">https:\/\/example.org<\/a>/);
  t.is(renderNote("a < b && c", "code"), `<pre class="note note-code"><code>a &lt; b &amp;&amp; c</code></pre>`);
  t.is(renderNote("<i>hi</i>", "plain"), `<div class="note note-plain">&lt;i&gt;hi&lt;/i&gt;</div>`);
  t.is(renderNote("x", undefined), `<div class="note note-plain">x</div>`);
});

test("page items: images from the background, placeholders without thumbnails, links only to http(s), sub-collections only when the viewer may open them", (t) => {
  const children = new Map<number, PageChild>([[7, { id: 7, name: "Child", shareUrl: "https://app.example/h/child", isNsfw: false }]]);
  const image = pageItemOf(file({ viewer: "image", mimeType: "image/png", thumbnailUrl: "store://u/1/t.webp", backgroundImageUrl: "store://u/1/bg.webp" }), urlOf, children)!;
  t.like(image, { kind: "image", slideKind: "image", srcUrl: "https://api.example/dl/u/1/bg.webp", thumbUrl: "https://api.example/dl/u/1/t.webp", title: "Item 1" });
  t.is(pageItemOf(file({ viewer: "image", mimeType: "image/png" }), urlOf, children)!.srcUrl, "https://api.example/dl/u/1/1_a.bin");
  t.is(pageItemOf(file({ viewer: "video", mimeType: "video/mp4" }), urlOf, children)!.thumbUrl, PLACEHOLDER_OF.video);
  t.is(pageItemOf(file({ mainUrl: "javascript:alert(1)", viewer: "website" }), urlOf, children), undefined);
  t.like(pageItemOf(file({ mainUrl: "https://example.org/", viewer: "website", name: " Site " }), urlOf, children), { kind: "link", href: "https://example.org/", title: "Site" });
  t.like(pageItemOf(file({ linkedCollectionId: 7, viewer: "collection" }), urlOf, children), { kind: "collection", href: "https://app.example/h/child", title: "Child" });
  t.is(pageItemOf(file({ linkedCollectionId: 8, viewer: "collection", name: "Secret" }), urlOf, children), undefined);
  t.like(pageItemOf(file({ mainUrl: "inline://text-note", viewer: "markdown", textNote: "*hi*", displayMode: "markdown", thumbnailUrl: "/assets/player/x.webp" }), urlOf, children),
    { kind: "note", noteHtml: `<div class="note note-markdown"><p><em>hi</em></p>\n</div>`, thumbUrl: "/assets/player/x.webp" });
});

test("the data block cannot end its script element or smuggle markup", (t) => {
  const json = scriptJson({ s: "</script><script>alert(1)</script><!-- \u2028" });
  t.false(json.includes("<"));
  t.false(json.includes("\u2028"));
  t.deepEqual(JSON.parse(json), { s: "</script><script>alert(1)</script><!-- \u2028" });
});

test("every user-written text on the page is escaped", (t) => {
  const model: PlayerPageModel = {
    collectionId: 1, title: `"><script>x</script>`, description: "<b>d</b>", handle: "h<i>", shareUrl: "https://app.example/h/s",
    isNsfw: false, searchable: true, bootFullscreen: false, prefs: DEFAULT_PREFS, total: 1, live: false, eventsPath: "/player/events", assetVersion: "v1",
    items: [{ mediaId: 2, kind: "link", slideKind: "embed", title: "<img src=x>", description: "<u>u</u>", thumbUrl: "/assets/a.webp", href: "https://example.org/?a=1&b=\"2\"" }],
  };
  const html = renderPlayerPage(model);
  t.false(html.includes("<script>x"));
  t.false(html.includes("<b>d</b>"));
  t.false(html.includes("<img src=x>"));
  t.false(html.includes("<u>u</u>"));
  t.true(html.includes(`href="https://example.org/?a=1&amp;b=&quot;2&quot;"`));
  t.true(html.includes("@h&lt;i&gt;"));
});
