/** Archive, soft and hard delete, restore windows and the retention job. */
import test from "ava";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { runJobNow, startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";
import { entryArgs } from "../helpers/split.js";

const run = promisify(execFile);
let sys: TestSystem;

test.before(async () => { sys = await startTestSystem(); });
test.after.always(async () => { await sys?.stop(); });

async function create(u: TestUser, fields: Record<string, unknown>) {
  return (await sys.must(u.token, { op: "collections.create", ...fields })).collection;
}

test("archive hides from default lists; unarchive brings it back", async (t) => {
  const u = await sys.user();
  const c = await create(u, { name: "Archivable" });
  const a = await sys.call(u.token, { op: "collections.archive", collection_id: c.id });
  t.true(a.body.collection.is_archived);
  t.is((await sys.call(u.token, { op: "collections.list" })).body.collections.length, 0);
  const un = await sys.call(u.token, { op: "collections.unarchive", collection_id: c.id });
  t.false(un.body.collection.is_archived);
  t.is((await sys.call(u.token, { op: "collections.list" })).body.collections.length, 1);
});

test("soft delete of a non-empty collection needs cascade_media or mode=hard (409 collection_not_empty)", async (t) => {
  const u = await sys.user({ plan: "free" });
  const p = await create(u, { name: "Non-empty" });
  const child = await create(u, { name: "Inside", parent_collection_id: p.id });
  const res = await sys.call(u.token, { op: "collections.delete", collection_id: p.id });
  t.is(res.status, 409);
  t.is(res.body.error, "collection_not_empty");
  t.is(res.body.media_count, 1);

  const dry = await sys.call(u.token, { op: "collections.delete", collection_id: p.id, cascade_media: true, dry_run: true });
  t.is(dry.status, 200);
  t.true(dry.body.dry_run);
  t.deepEqual(dry.body.would_delete.collection_ids.sort(), [p.id, child.id].sort());
  t.false((await sys.call(u.token, { op: "collections.get", collection_id: p.id })).body.collection.is_deleted);

  const del = await sys.call(u.token, { op: "collections.delete", collection_id: p.id, cascade_media: true });
  t.is(del.status, 200);
  t.is(del.body.mode, "soft");
  const until = Date.parse(del.body.restorable_until);
  t.true(Math.abs(until - (Date.now() + 7 * 86400_000)) < 60_000, "free plan: 7 days");
  t.is((await sys.call(u.token, { op: "collections.get", collection_id: p.id })).status, 404);
  t.is((await sys.call(u.token, { op: "collections.get", collection_id: child.id })).status, 404);

  const dryRestore = await sys.call(u.token, { op: "collections.restore", collection_id: p.id, dry_run: true });
  t.is(dryRestore.status, 200);
  t.is(dryRestore.body.restorable_until, del.body.restorable_until);
  t.is((await sys.call(u.token, { op: "collections.get", collection_id: p.id })).status, 404);

  const restored = await sys.call(u.token, { op: "collections.restore", collection_id: p.id });
  t.is(restored.status, 200);
  t.false(restored.body.collection.is_deleted);
  t.truthy(restored.body.restorable_until);
  t.is((await sys.call(u.token, { op: "collections.get", collection_id: child.id })).status, 200);
  t.is((await sys.call(u.token, { op: "collections.export", collection_id: p.id })).body.media.length, 1);
});

test("founding accounts get a 30-day window", async (t) => {
  const u = await sys.user({ plan: "founding" });
  const c = await create(u, { name: "Founding" });
  const del = await sys.call(u.token, { op: "collections.delete", collection_id: c.id });
  const until = Date.parse(del.body.restorable_until);
  t.true(Math.abs(until - (Date.now() + 30 * 86400_000)) < 60_000);
});

test("hard delete needs confirm (400 confirmation_required), removes rows and media", async (t) => {
  const u = await sys.user();
  const p = await create(u, { name: "Hard" });
  const child = await create(u, { name: "Hard child", parent_collection_id: p.id });
  const noConfirm = await sys.call(u.token, { op: "collections.delete", collection_id: p.id, mode: "hard" });
  t.is(noConfirm.status, 400);
  t.is(noConfirm.body.error, "confirmation_required");
  const dry = await sys.call(u.token, { op: "collections.delete", collection_id: p.id, mode: "hard", dry_run: true });
  t.is(dry.body.would_delete.media_count, 1);
  t.is((await sys.call(u.token, { op: "collections.get", collection_id: p.id })).status, 200);
  const del = await sys.call(u.token, { op: "collections.delete", collection_id: p.id, mode: "hard", confirm: true });
  t.is(del.status, 200);
  t.deepEqual(del.body.removed_collection_ids.sort(), [p.id, child.id].sort());
  t.is((await sys.call(u.token, { op: "collections.get", collection_id: p.id })).status, 404);
  t.is((await sys.call(u.token, { op: "collections.restore", collection_id: p.id })).status, 404);
});

test("deleting needs collections:delete and ownership", async (t) => {
  const u = await sys.user({ scopes: ["collections:read", "collections:write"] });
  const c = await create(u, { name: "No delete scope" });
  const res = await sys.call(u.token, { op: "collections.delete", collection_id: c.id });
  t.is(res.status, 403);
  t.is(res.body.need, "collections:delete");
  const other = await sys.user();
  t.is((await sys.call(other.token, { op: "collections.delete", collection_id: c.id })).status, 403);
});

test.serial("the retention job purges past the window; a later restore is 410 restore_window_expired", async (t) => {
  const u = await sys.user({ plan: "free" });
  const keep = await create(u, { name: "Recent delete" });
  const old = await create(u, { name: "Old delete" });
  await sys.call(u.token, { op: "collections.delete", collection_id: old.id });
  await sys.call(u.token, { op: "collections.delete", collection_id: keep.id });
  // Six days on: nothing of this user is due yet.
  const early = await runJobNow(sys.system, "retention", { now: new Date(Date.now() + 6 * 86400_000).toISOString() });
  t.is(typeof early.purged, "number");
  t.is((await sys.call(u.token, { op: "collections.restore", collection_id: old.id, dry_run: true })).status, 200);
  // Eight days on: both are past the free window.
  const late = await runJobNow(sys.system, "retention", { now: new Date(Date.now() + 8 * 86400_000).toISOString() });
  t.true((late.purged as number) >= 2);
  const res = await sys.call(u.token, { op: "collections.restore", collection_id: old.id });
  t.is(res.status, 410);
  t.is(res.body.error, "restore_window_expired");
});

test.serial("a sub-collection deleted on its own cannot be restored while its parent is deleted, so the parent's purge cannot take a live one", async (t) => {
  const u = await sys.user({ plan: "free" });
  const p = await create(u, { name: "Parent of a lone delete" });
  const c = await create(u, { name: "Deleted first", parent_collection_id: p.id });
  const noteInC = (await sys.must(u.token, { op: "media.text_note.add", collection_id: c.id, text: "keep me" })).media;
  t.is((await sys.call(u.token, { op: "collections.delete", collection_id: c.id, cascade_media: true })).status, 200);
  t.is((await sys.call(u.token, { op: "collections.delete", collection_id: p.id, cascade_media: true })).status, 200);
  const refused = await sys.call(u.token, { op: "collections.restore", collection_id: c.id });
  t.is(refused.status, 400);
  t.is(refused.body.field, "collection_id");
  t.is(refused.body.deleted_ancestor_id, p.id);
  // The parent first, then the child: both live again, the note with them.
  t.is((await sys.call(u.token, { op: "collections.restore", collection_id: p.id })).status, 200);
  t.is((await sys.call(u.token, { op: "collections.restore", collection_id: c.id })).status, 200, "now it can");
  await runJobNow(sys.system, "retention", { now: new Date(Date.now() + 8 * 86400_000).toISOString() });
  t.is((await sys.call(u.token, { op: "collections.get", collection_id: c.id })).status, 200);
  t.is((await sys.call(u.token, { op: "media.text_note.get", media_id: noteInC.id })).status, 200);
});

test("a hard delete takes sub-collections deleted earlier on their own, with their media; restoring one then answers 410", async (t) => {
  const u = await sys.user({ plan: "free" });
  const p = await create(u, { name: "Hard parent" });
  const c = await create(u, { name: "Soft child", parent_collection_id: p.id });
  const noteInC = (await sys.must(u.token, { op: "media.text_note.add", collection_id: c.id, text: "gone with the parent" })).media;
  t.is((await sys.call(u.token, { op: "collections.delete", collection_id: c.id, cascade_media: true })).status, 200);
  t.is((await sys.call(u.token, { op: "collections.delete", collection_id: p.id, mode: "hard", confirm: true })).status, 200);
  t.is(await sys.system.dbOf("media")!("media").where({ id: noteInC.id }).first(), undefined, "the child's media rows are gone too");
  const late = await sys.call(u.token, { op: "collections.restore", collection_id: c.id });
  t.is(late.status, 410);
  t.is(late.body.error, "restore_window_expired");
});

test.serial("npm run admin -- jobs run retention --now reaches the running system", async (t) => {
  t.timeout(120_000);
  const u = await sys.user({ plan: "free" });
  const c = await create(u, { name: "CLI purge" });
  await sys.call(u.token, { op: "collections.delete", collection_id: c.id });
  const env = { ...process.env, ...sys.env, LOG_LEVEL: "error" };
  const now = new Date(Date.now() + 9 * 86400_000).toISOString();
  const { stdout } = await run(process.execPath, [...entryArgs("packages/server/src/admin-cli.ts"), "jobs", "run", "retention", "--now", now], { env, cwd: process.cwd() });
  const out = JSON.parse(stdout.trim());
  t.true(out.purged >= 1);
  t.is((await sys.call(u.token, { op: "collections.restore", collection_id: c.id })).status, 410);
});

test("restoring into a taken name is 409 duplicate_collection_name", async (t) => {
  const u = await sys.user();
  const c = await create(u, { name: "Phoenix" });
  await sys.call(u.token, { op: "collections.delete", collection_id: c.id });
  await create(u, { name: "Phoenix" });
  const res = await sys.call(u.token, { op: "collections.restore", collection_id: c.id });
  t.is(res.status, 409);
  t.is(res.body.error, "duplicate_collection_name");
});

test("a soft-deleted sub-collection's link row leaves its parent, and comes back (at the end) on restore", async (t) => {
  const u = await sys.user();
  const parent = await create(u, { name: "Link parent" });
  const a = await create(u, { name: "Sub A", parent_collection_id: parent.id });
  const b = await create(u, { name: "Sub B", parent_collection_id: parent.id });
  const links = async () => (await sys.must(u.token, { op: "media.list", collection_id: parent.id })).media.map((m: any) => [m.linked_collection_id, m.position]);
  t.deepEqual(await links(), [[a.id, 0], [b.id, 1]]);
  t.is((await sys.call(u.token, { op: "collections.delete", collection_id: a.id })).status, 200);
  t.deepEqual(await links(), [[b.id, 0]]);
  t.is((await sys.call(u.token, { op: "collections.restore", collection_id: a.id })).status, 200);
  t.deepEqual(await links(), [[b.id, 0], [a.id, 1]]);
});
