/** Media domain rules without I/O. */
import test from "ava";
import { AppError, normalizeTags, safeFilename } from "@cms/platform";
import {
  checkName, checkOwnKey, foldAccents, isReservedName, isVideoHostingUrl, itemName, listHint, placeholderPath, textNoteColumns, textNoteMode,
  textNoteThumbnail, viewerOfMime,
} from "../src/domain/rules.js";
import { pagePreview } from "../src/domain/page-preview.js";

test("reserved names: a leading and trailing double underscore", (t) => {
  for (const n of ["__cover__", "__x__", " __a b__ "]) t.true(isReservedName(n), n);
  for (const n of ["__", "____", "_x_", "__x", "x__", "a__b__", "cover"]) t.false(isReservedName(n), n);
  t.throws(() => checkName("__thumb__"), { instanceOf: AppError });
  t.notThrows(() => checkName(undefined));
});

test("tags: lowercase, deduplicated, at most 10", (t) => {
  t.deepEqual(normalizeTags(["A", "a", " B "], "media item"), ["a", "b"]);
  t.deepEqual(normalizeTags([], "media item"), []);
  t.throws(() => normalizeTags(Array.from({ length: 11 }, (_, i) => `t${i}`), "media item"), { instanceOf: AppError, message: "invalid_request: At most 10 tags per media item." });
});

test("video-hosting URLs are recognised on their hosts and subdomains only", (t) => {
  for (const u of ["https://www.youtube.com/watch?v=x", "https://youtu.be/x", "https://m.youtube.com/watch?v=x", "https://vimeo.com/123", "https://player.vimeo.com/video/1", "https://www.twitch.tv/x", "https://www.facebook.com/watch/?v=1"]) t.true(isVideoHostingUrl(u), u);
  for (const u of ["https://example.com/youtube.com", "https://notyoutube.com/x", "https://www.facebook.com/photo", "not a url"]) t.false(isVideoHostingUrl(u), u);
});

test("viewer from MIME type", (t) => {
  t.is(viewerOfMime("image/webp"), "image");
  t.is(viewerOfMime("video/mp4"), "video");
  t.is(viewerOfMime("audio/mpeg"), "audio");
  t.is(viewerOfMime("application/pdf"), "pdf");
  t.is(viewerOfMime("text/markdown"), "markdown");
  t.is(viewerOfMime("text/plain"), "text");
  t.is(viewerOfMime("application/zip"), "other");
});

test("text-note mode: display_mode or viewer, text is plain, both must agree", (t) => {
  t.deepEqual(textNoteMode("plain", undefined), { displayMode: "plain", viewer: "text" });
  t.deepEqual(textNoteMode(undefined, "text"), { displayMode: "plain", viewer: "text" });
  t.deepEqual(textNoteMode("markdown", "markdown"), { displayMode: "markdown", viewer: "markdown" });
  t.deepEqual(textNoteMode(undefined, "code"), { displayMode: "code", viewer: "code" });
  t.is(textNoteMode(undefined, undefined), undefined);
  t.throws(() => textNoteMode("plain", "markdown"), { instanceOf: AppError });
  t.throws(() => textNoteMode(undefined, "image"), { instanceOf: AppError });
});

test("text-note thumbnail: thumbnail_url, then placeholder_kind, then notes", (t) => {
  t.deepEqual(textNoteThumbnail("https://x/t.png", "poem"), { thumbnailUrl: "https://x/t.png", placeholderKind: null });
  t.deepEqual(textNoteThumbnail(undefined, "poem"), { thumbnailUrl: placeholderPath("poem"), placeholderKind: "poem" });
  t.deepEqual(textNoteThumbnail(undefined, undefined), { thumbnailUrl: "/assets/player/carousel_placeholders_webp/carousel-placeholder-notes.webp", placeholderKind: "notes" });
});

test("list hints: empty, archived, filtered, past the end", (t) => {
  const base = { total: 0, all: 0, archived: 0, withoutFilters: 0, filtered: false, includeArchived: false, offset: 0 };
  t.regex(String(listHint(base).hint), /empty/);
  t.deepEqual(listHint({ ...base, all: 3, archived: 3 }).also_archived, 3);
  t.deepEqual(listHint({ ...base, all: 3, withoutFilters: 3, filtered: true }).also_without_filters, 3);
  t.regex(String(listHint({ ...base, total: 5, all: 5, offset: 10 }).hint), /past the end/);
  t.deepEqual(listHint({ ...base, total: 5, all: 5 }), {});
});

test("page preview: og:image, twitter:image and title, resolved against the page URL", (t) => {
  t.deepEqual(pagePreview(`<html><head><title> T </title><meta property="og:image" content="/a.png"></head></html>`, "https://e.com/x/y"), { image: "https://e.com/a.png", title: "T" });
  t.deepEqual(pagePreview(`<meta name="twitter:image" content="https://cdn.e.com/b.jpg"><meta property="og:title" content="OG">`, "https://e.com/"), { image: "https://cdn.e.com/b.jpg", title: "OG" });
  t.deepEqual(pagePreview(`<p>no preview</p>`, "https://e.com/"), { image: undefined, title: undefined });
});

test("filenames in store keys are made safe", (t) => {
  t.is(safeFilename("/a/b/My Photo (1).JPG", "x"), "My_Photo_1_.JPG");
  t.is(safeFilename("/", "download"), "download");
  t.is(safeFilename("/..%2F..%2Fetc", "x"), "etc");
  t.is(safeFilename("/café.png", "x"), "cafe.png");
});

test("accent folding matches how search_text is built", (t) => {
  t.is(foldAccents("Crète ÉTÉ"), "crete ete");
});

test("textNoteColumns: viewer, display_mode and MIME type agree", (t) => {
  t.deepEqual(textNoteColumns({ displayMode: "markdown", viewer: "markdown" }), { viewer: "markdown", display_mode: "markdown", mime_type: "text/markdown" });
  t.deepEqual(textNoteColumns({ displayMode: "plain", viewer: "text" }), { viewer: "text", display_mode: "plain", mime_type: "text/plain" });
  t.deepEqual(textNoteColumns({ displayMode: "code", viewer: "code" }), { viewer: "code", display_mode: "code", mime_type: "text/plain" });
});

test("item names: the given name, else the file's own name unless reserved", (t) => {
  t.is(itemName("given", "file.png"), "given");
  t.is(itemName(undefined, "dir/sub\\photo.png"), "photo.png");
  t.is(itemName(undefined, "__cover__"), null);
  t.is(itemName(undefined, undefined), null);
  t.is(itemName(undefined, "x".repeat(600))!.length, 500);
});

test("own keys: the caller's or the collection owner's objects only", (t) => {
  const caller = { userId: "u1" };
  t.notThrows(() => checkOwnKey(caller, "owner", "store://u1/3/a.png", "source_url"));
  t.notThrows(() => checkOwnKey(caller, "owner", "store://owner/3/a.png", "source_url"));
  t.throws(() => checkOwnKey(caller, "owner", "store://u2/3/a.png", "source_url"), { instanceOf: AppError, message: "forbidden: source_url names an object of another user." });
  t.throws(() => checkOwnKey(caller, "owner", "store://../x", "source_url"), { message: "invalid_request: source_url is not a valid object-store key." });
});
