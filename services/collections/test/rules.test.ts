/** The collections service's domain rules, without I/O. */
import test from "ava";
import { AppError, normalizeTags } from "@cms/platform";
import {
  DEFAULT_PLAYBACK_PREFS, decidePublish, decideUnpublish, decideUpdateVisibility, handleResolution, normalizePlaybackPrefs,
  normalizeSlug, restorableUntil, restoreWindowDays, toCsv, wouldCycle, type PublishState,
} from "../src/domain/rules.js";

const fresh: PublishState = { shareAccessLevel: "private", shareAccessConfigured: false, searchable: false, isPublished: false, openFullscreen: false };

function code(fn: () => unknown): string | undefined {
  try { fn(); } catch (err) { return err instanceof AppError ? `${err.code}:${err.extra.field ?? ""}` : "other"; }
  return undefined;
}

test("publish rule 2: never configured becomes public and says so", (t) => {
  const d = decidePublish(fresh, {});
  t.is(d.shareAccessLevel, "public");
  t.true(d.shareAccessLevelDefaulted);
  t.true(d.shareAccessConfigured);
});

test("publish rule 1: a configured level is left unchanged, private and restricted included", (t) => {
  for (const level of ["private", "restricted", "registered", "public"] as const) {
    const d = decidePublish({ ...fresh, shareAccessLevel: level, shareAccessConfigured: true }, {});
    t.is(d.shareAccessLevel, level);
    t.false(d.shareAccessLevelDefaulted);
  }
});

test("publish: a passed level is always honoured, even over a configured one", (t) => {
  const d = decidePublish({ ...fresh, shareAccessLevel: "private", shareAccessConfigured: true }, { shareAccessLevel: "registered" });
  t.is(d.shareAccessLevel, "registered");
  t.false(d.shareAccessLevelDefaulted);
  t.is(decidePublish(fresh, { shareAccessLevel: "restricted" }).shareAccessLevel, "restricted");
});

test("publish: searchable needs a resulting public level", (t) => {
  t.true(decidePublish(fresh, { searchable: true }).searchable);
  t.is(code(() => decidePublish({ ...fresh, shareAccessConfigured: true }, { searchable: true })), "invalid_request:searchable");
  t.is(code(() => decidePublish(fresh, { searchable: true, shareAccessLevel: "registered" })), "invalid_request:searchable");
});

test("publish: republish does not restore searchable; open_fullscreen omitted keeps the stored value", (t) => {
  const published = { ...fresh, shareAccessLevel: "public" as const, shareAccessConfigured: true, isPublished: true, openFullscreen: true, searchable: false };
  const d = decidePublish(published, {});
  t.false(d.searchable);
  t.true(d.openFullscreen);
  t.false(decidePublish(published, { openFullscreen: false }).openFullscreen);
});

test("unpublish rule 3: level unchanged unless passed; searchable off", (t) => {
  const cur = { ...fresh, shareAccessLevel: "public" as const, shareAccessConfigured: true, isPublished: true, searchable: true };
  const d = decideUnpublish(cur);
  t.false(d.isPublished);
  t.false(d.searchable);
  t.is(d.shareAccessLevel, "public");
  t.is(decideUnpublish(cur, "private").shareAccessLevel, "private");
  t.true(decideUnpublish(fresh, "restricted").shareAccessConfigured);
});

test("update: searchable only when published and public; a downgrade turns it off", (t) => {
  t.is(code(() => decideUpdateVisibility(fresh, { searchable: true })), "invalid_request:searchable");
  const pub = { ...fresh, shareAccessLevel: "public" as const, isPublished: true, shareAccessConfigured: true };
  t.true(decideUpdateVisibility(pub, { searchable: true }).searchable);
  t.false(decideUpdateVisibility({ ...pub, searchable: true }, { shareAccessLevel: "restricted" }).searchable);
  t.is(code(() => decideUpdateVisibility(pub, { searchable: true, shareAccessLevel: "private" })), "invalid_request:searchable");
  t.true(decideUpdateVisibility(fresh, { shareAccessLevel: "private" }).shareAccessConfigured);
});

test("handle resolution: omitted keeps the stored handle, else the default alias; null forces the username", (t) => {
  t.deepEqual(handleResolution({ kind: "omitted" }, { aliasId: "a1", handleSet: true }), { mode: "alias", aliasId: "a1" });
  t.deepEqual(handleResolution({ kind: "omitted" }, { aliasId: null, handleSet: true }), { mode: "keep" });
  t.deepEqual(handleResolution({ kind: "omitted" }, { aliasId: null, handleSet: false }), { mode: "default" });
  t.deepEqual(handleResolution({ kind: "username" }, { aliasId: "a1", handleSet: true }), { mode: "username" });
  t.deepEqual(handleResolution({ kind: "alias", aliasId: "a2" }, { aliasId: "a1", handleSet: true }), { mode: "alias", aliasId: "a2" });
});

test("playback prefs: partial input normalized with defaults; unknown keys and bad values refused", (t) => {
  t.deepEqual(normalizePlaybackPrefs({}), DEFAULT_PLAYBACK_PREFS);
  const p = normalizePlaybackPrefs({ kinds: { other: true }, interval_seconds: 10, shuffle: true });
  t.deepEqual(p.kinds, { image: true, video: true, audio: true, embed: false, other: true });
  t.is(p.interval_seconds, 10);
  t.true(p.loop);
  t.is(code(() => normalizePlaybackPrefs({ speed: 2 })), "invalid_request:playback_prefs.speed");
  t.is(code(() => normalizePlaybackPrefs({ kinds: { gif: true } })), "invalid_request:playback_prefs.kinds.gif");
  t.is(code(() => normalizePlaybackPrefs({ interval_seconds: 0 })), "invalid_request:playback_prefs.interval_seconds");
  t.is(code(() => normalizePlaybackPrefs({ interval_seconds: 3601 })), "invalid_request:playback_prefs.interval_seconds");
  t.is(code(() => normalizePlaybackPrefs({ loop: "yes" })), "invalid_request:playback_prefs.loop");
  t.is(code(() => normalizePlaybackPrefs([])), "invalid_request:playback_prefs");
});

test("slugs are normalized: lowercase, accents folded, single hyphens", (t) => {
  t.is(normalizeSlug("My Trips!"), "my-trips");
  t.is(normalizeSlug("  Été à Montréal  "), "ete-a-montreal");
  t.is(normalizeSlug("a--b__c"), "a-b-c");
  t.is(code(() => normalizeSlug("!!!")), "invalid_request:slug");
});

test("tags: lowercase, trimmed, deduplicated, at most 10", (t) => {
  t.deepEqual(normalizeTags(["A", " a ", "B"], "collection"), ["a", "b"]);
  t.is(code(() => normalizeTags(Array.from({ length: 11 }, (_, i) => `t${i}`), "collection")), "invalid_request:tags");
  t.deepEqual(normalizeTags(Array.from({ length: 12 }, (_, i) => `t${i % 10}`), "collection").length, 10);
  t.is(code(() => normalizeTags(["  "], "collection")), "invalid_request:tags");
});

test("restore windows: free 7, paid 7, founding 30 days", (t) => {
  t.is(restoreWindowDays("free"), 7);
  t.is(restoreWindowDays("paid"), 7);
  t.is(restoreWindowDays("founding"), 30);
  const at = new Date("2026-01-01T00:00:00Z");
  t.is(restorableUntil(at, "free").toISOString(), "2026-01-08T00:00:00.000Z");
  t.is(restorableUntil(at, "founding").toISOString(), "2026-01-31T00:00:00.000Z");
});

test("cycles: the collection itself or any descendant of it", (t) => {
  t.true(wouldCycle(1, 1, []));
  t.true(wouldCycle(1, 5, [4, 3, 1]));
  t.false(wouldCycle(1, 5, [4, 3]));
  t.false(wouldCycle(1, 2, []));
});

test("CSV follows RFC 4180: quotes around commas, quotes and line breaks; CRLF rows", (t) => {
  const csv = toCsv(["a", "b", "c"], [{ a: "plain", b: "x,y", c: "say \"hi\"" }, { a: null, b: "l1\nl2", c: ["t1", "t2"] }]);
  t.is(csv, "a,b,c\r\nplain,\"x,y\",\"say \"\"hi\"\"\"\r\n,\"l1\nl2\",\"t1,t2\"\r\n");
});

test("a published collection shows at its share URL: public to anyone, registered to signed-in viewers, the rest to owner and collaborators", async (t) => {
  const { permissionsOf, visibleOnPage } = await import("../src/domain/collection-json.js");
  const owner = "00000000-0000-4000-8000-000000000001";
  const other = "00000000-0000-4000-8000-000000000002";
  const row = { user_id: owner };
  const member = { can_upload: false, can_edit: false, can_delete: false };
  const cases: Array<["public" | "registered" | "restricted" | "private", string | undefined, boolean, boolean]> = [
    // level, viewer, collaborator, visible
    ["public", undefined, false, true],
    ["registered", undefined, false, false],
    ["registered", other, false, true],
    ["restricted", other, false, false],
    ["restricted", other, true, true],
    ["restricted", owner, false, true],
    ["private", other, false, false],
    ["private", owner, false, true],
  ];
  for (const [level, viewer, isMember, visible] of cases) {
    const perms = permissionsOf(row, viewer, isMember ? member : undefined);
    t.is(visibleOnPage({ share_access_level: level }, perms, viewer !== undefined), visible, `${level} ${viewer ?? "anonymous"} ${isMember}`);
  }
});
