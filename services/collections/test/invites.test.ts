/** Collaboration rules without I/O: caps, permission defaults and merging. */
import test from "ava";
import { AppError } from "@cms/platform";
import {
  acceptsInvites, capError, DEFAULT_INVITE_PERMISSIONS, INVITE_CAPS, inviteCapBreach, invitePermissions, mergePermissions,
  normalizeUsername, samePermissions,
} from "../src/domain/invites.js";

const now = new Date("2026-11-23T12:00:00Z");
const ago = (minutes: number) => new Date(now.getTime() - minutes * 60_000);
const stamps = (n: number, minutesAgo: (i: number) => number) => Array.from({ length: n }, (_, i) => ago(minutesAgo(i)));

test("caps are the contract's: 15 per hour, 50 per 24 hours, 20 pending per collection", (t) => {
  t.deepEqual({ ...INVITE_CAPS }, { perHour: 15, perDay: 50, pendingPerCollection: 20 });
});

test("no cap is breached below every limit", (t) => {
  t.is(inviteCapBreach({ now, sentAt: [], pendingOnCollection: 0 }), undefined);
  t.is(inviteCapBreach({ now, sentAt: stamps(14, (i) => i), pendingOnCollection: 19 }), undefined);
  // 49 in the day, of which 14 in the last hour.
  t.is(inviteCapBreach({ now, sentAt: [...stamps(14, (i) => i), ...stamps(35, (i) => 120 + i)], pendingOnCollection: 0 }), undefined);
});

test("hourly cap: the 16th invite within a rolling hour is refused, with the wait until the oldest leaves", (t) => {
  const b = inviteCapBreach({ now, sentAt: stamps(15, (i) => 50 - i), pendingOnCollection: 0 });
  t.is(b?.cap, "invites_per_hour");
  t.regex(b!.detail, /15 invites per rolling hour/);
  // The oldest was sent 50 minutes ago: 10 minutes to wait.
  t.is(b?.retryAfterSeconds, 600);
  // Invites older than an hour no longer count toward it.
  t.is(inviteCapBreach({ now, sentAt: stamps(15, (i) => 61 + i), pendingOnCollection: 0 }), undefined);
  // More than 15: enough of the oldest must leave for one more.
  const over = inviteCapBreach({ now, sentAt: [ago(59), ago(40), ...stamps(15, (i) => i)], pendingOnCollection: 0 });
  // 17 in the hour: the three oldest must leave, the third was sent 14 minutes ago.
  t.is(over?.retryAfterSeconds, 46 * 60);
});

test("24-hour cap: the 51st invite within a rolling day is refused, even when the last hour is quiet", (t) => {
  const sent = stamps(50, (i) => 23 * 60 - i * 20); // between 23 h and ~6.7 h ago
  const b = inviteCapBreach({ now, sentAt: sent, pendingOnCollection: 0 });
  t.is(b?.cap, "invites_per_24_hours");
  t.regex(b!.detail, /50 invites per rolling 24 hours/);
  t.is(b?.retryAfterSeconds, 3600);
  // Stamps older than 24 hours are ignored.
  t.is(inviteCapBreach({ now, sentAt: [...stamps(40, (i) => 25 * 60 + i), ...stamps(10, (i) => 90 + i)], pendingOnCollection: 0 }), undefined);
});

test("pending cap: a 21st pending invite on one collection is refused, without a retry hint", (t) => {
  const b = inviteCapBreach({ now, sentAt: [], pendingOnCollection: 20 });
  t.is(b?.cap, "pending_per_collection");
  t.regex(b!.detail, /20 pending invites per collection/);
  t.is(b?.retryAfterSeconds, undefined);
  t.is(inviteCapBreach({ now, sentAt: [], pendingOnCollection: 19 }), undefined);
});

test("several caps breached: pending first, then 24 hours, then hourly; the wait covers all time caps", (t) => {
  const dayAndHour = [...stamps(35, (i) => 600 + i), ...stamps(15, (i) => 30 - i)];
  t.is(inviteCapBreach({ now, sentAt: dayAndHour, pendingOnCollection: 20 })?.cap, "pending_per_collection");
  const b = inviteCapBreach({ now, sentAt: dayAndHour, pendingOnCollection: 0 });
  t.is(b?.cap, "invites_per_24_hours");
  // The day frees up after ~14 h, the hour after 30 min: the longer wait is reported.
  t.is(b?.retryAfterSeconds, (24 * 60 - 634) * 60);
});

test("caps can be passed in", (t) => {
  t.is(inviteCapBreach({ now, sentAt: [ago(1)], pendingOnCollection: 0 }, { perHour: 1, perDay: 10, pendingPerCollection: 10 })?.cap, "invites_per_hour");
});

test("a breach is 429 rate_limited naming the cap", (t) => {
  const e = capError(inviteCapBreach({ now, sentAt: stamps(15, (i) => i), pendingOnCollection: 0 })!);
  t.true(e instanceof AppError);
  t.is(e.code, "rate_limited");
  t.is(e.status, 429);
  t.is(e.extra.cap, "invites_per_hour");
  t.is(typeof e.extra.retry_after_seconds, "number");
  const p = capError(inviteCapBreach({ now, sentAt: [], pendingOnCollection: 20 })!);
  t.is(p.extra.cap, "pending_per_collection");
  t.false("retry_after_seconds" in p.extra);
});

test("invite permissions: defaults can_upload true, can_edit and can_delete false", (t) => {
  t.deepEqual(invitePermissions({}), { can_upload: true, can_edit: false, can_delete: false });
  t.deepEqual(invitePermissions({}), { ...DEFAULT_INVITE_PERMISSIONS });
  t.deepEqual(invitePermissions({ can_upload: false, can_delete: true }), { can_upload: false, can_edit: false, can_delete: true });
});

test("merging permissions: omitted flags unchanged, at least one flag required", (t) => {
  const cur = { can_upload: true, can_edit: false, can_delete: false };
  t.deepEqual(mergePermissions(cur, { can_edit: true }), { can_upload: true, can_edit: true, can_delete: false });
  t.deepEqual(mergePermissions(cur, { can_upload: false, can_delete: true }), { can_upload: false, can_edit: false, can_delete: true });
  const err = t.throws(() => mergePermissions(cur, {}), { instanceOf: AppError });
  t.is(err?.code, "invalid_request");
  t.throws(() => mergePermissions(cur, { can_upload: undefined }), { instanceOf: AppError });
  t.true(samePermissions(cur, mergePermissions(cur, { can_upload: true })));
  t.false(samePermissions(cur, mergePermissions(cur, { can_delete: true })));
});

test("only restricted and private collections take invites", (t) => {
  t.true(acceptsInvites("restricted"));
  t.true(acceptsInvites("private"));
  t.false(acceptsInvites("public"));
  t.false(acceptsInvites("registered"));
});

test("usernames: leading @ and case are ignored", (t) => {
  t.is(normalizeUsername("@Bob_1"), "bob_1");
  t.is(normalizeUsername(" carol "), "carol");
});
