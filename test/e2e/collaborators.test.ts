/** collaborators.* through the JSON endpoint: invites, answers, lists, revoke, permissions, caps, access. */
import test from "ava";
import { randomUUID } from "node:crypto";
import type { BusEvent } from "@cms/platform";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";

let sys: TestSystem;
const events: BusEvent[] = [];

test.before(async () => {
  sys = await startTestSystem();
  await sys.system.subscribe(`test-collab-${process.pid}`, "collection.updated", async (e) => { events.push(e); });
});
test.after.always(async () => { await sys?.stop(); });

async function create(u: TestUser, fields: Record<string, unknown>) {
  const res = await sys.call(u.token, { op: "collections.create", ...fields });
  if (res.status !== 200) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.collection as { id: number; name: string };
}

const invite = (owner: TestUser, collectionId: number, username: string, flags: Record<string, unknown> = {}) =>
  sys.call(owner.token, { op: "collaborators.invite", collection_id: collectionId, username, ...flags });
const accept = (u: TestUser, collectionId: number, inviter: TestUser) =>
  sys.call(u.token, { op: "collaborators.invite.accept", collection_id: collectionId, inviter_user_id: inviter.userId });
const decline = (u: TestUser, collectionId: number, inviter: TestUser) =>
  sys.call(u.token, { op: "collaborators.invite.decline", collection_id: collectionId, inviter_user_id: inviter.userId });
const revoke = (owner: TestUser, collectionId: number, userId: string) =>
  sys.call(owner.token, { op: "collaborators.revoke", collection_id: collectionId, user_id: userId });
const updatePerms = (owner: TestUser, collectionId: number, userId: string, flags: Record<string, unknown>) =>
  sys.call(owner.token, { op: "collaborators.update_permissions", collection_id: collectionId, user_id: userId, ...flags });
const get = (u: TestUser, collectionId: number) => sys.call(u.token, { op: "collections.get", collection_id: collectionId });

/** An accepted collaborator on a fresh collection of a fresh owner. */
async function collaboration(flags: Record<string, unknown> = {}, name = "Shared") {
  const owner = await sys.user();
  const guest = await sys.user();
  const c = await create(owner, { name, share_access_level: "restricted" });
  const inv = await invite(owner, c.id, guest.username, flags);
  if (inv.status !== 200) throw new Error(`invite failed: ${inv.status} ${JSON.stringify(inv.body)}`);
  const acc = await accept(guest, c.id, owner);
  if (acc.status !== 200) throw new Error(`accept failed: ${acc.status} ${JSON.stringify(acc.body)}`);
  return { owner, guest, c };
}

test("invite with defaults, listed as sent and received, accepted, then listed as collaborator", async (t) => {
  const owner = await sys.user();
  const guest = await sys.user();
  const c = await create(owner, { name: "Invite flow", share_access_level: "restricted" });

  const inv = await invite(owner, c.id, guest.username);
  t.is(inv.status, 200);
  const i = inv.body.invite;
  t.like(i, {
    collection_id: c.id, user_id: guest.userId, username: guest.username, inviter_user_id: owner.userId,
    status: "pending", can_upload: true, can_edit: false, can_delete: false,
  });
  t.false(Number.isNaN(Date.parse(i.created_at)));

  const sent = await sys.call(owner.token, { op: "collaborators.invites.list" });
  t.is(sent.status, 200);
  t.is(sent.body.invites.length, 1);
  t.like(sent.body.invites[0], { collection_id: c.id, user_id: guest.userId, username: guest.username, status: "pending" });

  const received = await sys.call(guest.token, { op: "collaborators.invites.received" });
  t.is(received.status, 200);
  t.is(received.body.invites.length, 1);
  t.like(received.body.invites[0], {
    collection_id: c.id, collection_name: "Invite flow", inviter_user_id: owner.userId, inviter_username: owner.username, status: "pending",
  });
  // The owner received nothing; the guest sent nothing.
  t.deepEqual((await sys.call(owner.token, { op: "collaborators.invites.received" })).body.invites, []);
  t.deepEqual((await sys.call(guest.token, { op: "collaborators.invites.list" })).body.invites, []);
  // Pending is not a collaborator yet: no access, not in the list.
  t.is((await get(guest, c.id)).status, 403);
  t.deepEqual((await sys.call(owner.token, { op: "collaborators.list", collection_id: c.id })).body.collaborators, []);

  const acc = await accept(guest, c.id, owner);
  t.is(acc.status, 200);
  t.like(acc.body.invite, { collection_id: c.id, user_id: guest.userId, inviter_user_id: owner.userId, status: "accepted", can_upload: true });

  const list = await sys.call(owner.token, { op: "collaborators.list", collection_id: c.id });
  t.is(list.status, 200);
  t.is(list.body.collaborators.length, 1);
  const m = list.body.collaborators[0];
  t.like(m, { user_id: guest.userId, username: guest.username, can_upload: true, can_edit: false, can_delete: false });
  t.false(Number.isNaN(Date.parse(m.accepted_at)));
  // Accepted invites leave both pending lists.
  t.deepEqual((await sys.call(owner.token, { op: "collaborators.invites.list" })).body.invites, []);
  t.deepEqual((await sys.call(guest.token, { op: "collaborators.invites.received" })).body.invites, []);
});

test("explicit flags on invite; username is case-insensitive and may carry @", async (t) => {
  const owner = await sys.user();
  const guest = await sys.user();
  const c = await create(owner, { name: "Flags" });
  const inv = await invite(owner, c.id, `@${guest.username.toUpperCase()}`, { can_upload: false, can_edit: true, can_delete: true });
  t.is(inv.status, 200);
  t.like(inv.body.invite, { user_id: guest.userId, can_upload: false, can_edit: true, can_delete: true, status: "pending" });
});

test("invite refusals: not owner 403, missing or deleted 404, public or registered 400, unknown user 404, self 400", async (t) => {
  const owner = await sys.user();
  const other = await sys.user();
  const c = await create(owner, { name: "Refusals", share_access_level: "restricted" });

  const notOwner = await invite(other, c.id, owner.username);
  t.is(notOwner.status, 403);
  t.is(notOwner.body.error, "forbidden");
  const missing = await invite(owner, 987654321, other.username);
  t.is(missing.status, 404);
  t.is(missing.body.error, "not_found");

  for (const level of ["public", "registered"]) {
    const pc = await create(owner, { name: `Level ${level}`, share_access_level: level });
    const res = await invite(owner, pc.id, other.username);
    t.is(res.status, 400, level);
    t.is(res.body.error, "invalid_request");
    t.is(res.body.field, "collection_id");
  }

  const unknown = await invite(owner, c.id, "nobody_by_that_name_xyz");
  t.is(unknown.status, 404);
  t.is(unknown.body.error, "not_found");

  const self = await invite(owner, c.id, owner.username);
  t.is(self.status, 400);
  t.is(self.body.error, "invalid_request");
  t.is(self.body.field, "username");

  const gone = await create(owner, { name: "Deleted" });
  const del = await sys.call(owner.token, { op: "collections.delete", collection_id: gone.id });
  t.is(del.status, 200, JSON.stringify(del.body));
  const onDeleted = await invite(owner, gone.id, other.username);
  t.is(onDeleted.status, 404);
  t.is(onDeleted.body.error, "not_found");
});

test("re-inviting: pending updates its flags, accepted is 400 invalid_request naming username, declined becomes pending again", async (t) => {
  const owner = await sys.user();
  const guest = await sys.user();
  const c = await create(owner, { name: "Reinvite", share_access_level: "private" });
  t.is((await invite(owner, c.id, guest.username)).status, 200);
  const again = await invite(owner, c.id, guest.username, { can_edit: true, can_upload: false });
  t.is(again.status, 200);
  t.like(again.body.invite, { status: "pending", can_upload: false, can_edit: true, can_delete: false });
  const sent = (await sys.call(owner.token, { op: "collaborators.invites.list" })).body.invites;
  t.is(sent.length, 1);
  t.like(sent[0], { can_upload: false, can_edit: true });

  const dec = await decline(guest, c.id, owner);
  t.is(dec.status, 200);
  t.is(dec.body.invite.status, "declined");
  t.deepEqual((await sys.call(owner.token, { op: "collaborators.invites.list" })).body.invites, []);
  t.is((await get(guest, c.id)).status, 403);

  const reissued = await invite(owner, c.id, guest.username);
  t.is(reissued.status, 200);
  t.like(reissued.body.invite, { status: "pending", can_upload: true, can_edit: false });
  t.is((await accept(guest, c.id, owner)).status, 200);

  const conflict = await invite(owner, c.id, guest.username);
  t.is(conflict.status, 400);
  t.is(conflict.body.error, "invalid_request");
  t.is(conflict.body.field, "username");
});

test("accept and decline: only the invitee, only a pending invite from that inviter", async (t) => {
  const owner = await sys.user();
  const guest = await sys.user();
  const stranger = await sys.user();
  const c = await create(owner, { name: "Answers", share_access_level: "restricted" });
  t.is((await invite(owner, c.id, guest.username)).status, 200);

  for (const res of [
    await accept(stranger, c.id, owner),
    await decline(stranger, c.id, owner),
    await accept(owner, c.id, owner),
    await accept(guest, c.id, stranger),
    await accept(guest, 987654321, owner),
  ]) {
    t.is(res.status, 404);
    t.is(res.body.error, "not_found");
  }
  t.is((await accept(guest, c.id, owner)).status, 200);
  // Nothing pending any more.
  t.is((await accept(guest, c.id, owner)).status, 404);
  t.is((await decline(guest, c.id, owner)).status, 404);
  t.is((await get(guest, c.id)).status, 200);
});

test("collaborators.list is for the owner only and shows accepted collaborators only", async (t) => {
  const { owner, guest, c } = await collaboration();
  const pendingOne = await sys.user();
  t.is((await invite(owner, c.id, pendingOne.username)).status, 200);
  const list = await sys.call(owner.token, { op: "collaborators.list", collection_id: c.id });
  t.deepEqual(list.body.collaborators.map((m: any) => m.user_id), [guest.userId]);
  const byGuest = await sys.call(guest.token, { op: "collaborators.list", collection_id: c.id });
  t.is(byGuest.status, 403);
  t.is(byGuest.body.error, "forbidden");
  t.is((await sys.call(owner.token, { op: "collaborators.list", collection_id: 987654321 })).status, 404);
});

test("after accept the collaborator reads the collection with its flags and finds it in shared search", async (t) => {
  const { guest, c } = await collaboration({ can_upload: true, can_edit: true }, "Zebracorn shared album");
  const res = await get(guest, c.id);
  t.is(res.status, 200);
  t.deepEqual(res.body.collection.viewer_permissions, { is_owner: false, can_read: true, can_upload: true, can_edit: true, can_delete: false });
  const found = await sys.call(guest.token, { op: "collections.search", query: "zebracorn", scope: ["shared"] });
  t.is(found.status, 200);
  t.deepEqual(found.body.collections.map((x: any) => x.id), [c.id]);
});

test("revoke removes a collaborator or cancels an invite; access ends at once", async (t) => {
  const { owner, guest, c } = await collaboration({}, "Quokkaflux revoke");
  const pendingOne = await sys.user();
  t.is((await invite(owner, c.id, pendingOne.username)).status, 200);

  const byGuest = await revoke(guest, c.id, pendingOne.userId);
  t.is(byGuest.status, 403);
  t.is(byGuest.body.error, "forbidden");

  const cancelled = await revoke(owner, c.id, pendingOne.userId);
  t.is(cancelled.status, 200);
  t.like(cancelled.body, { removed: true, previous_status: "pending" });
  t.deepEqual((await sys.call(pendingOne.token, { op: "collaborators.invites.received" })).body.invites, []);
  t.is((await accept(pendingOne, c.id, owner)).status, 404);

  t.is((await get(guest, c.id)).status, 200);
  const removed = await revoke(owner, c.id, guest.userId);
  t.is(removed.status, 200);
  t.like(removed.body, { removed: true, previous_status: "accepted" });
  const after = await get(guest, c.id);
  t.is(after.status, 403);
  t.is(after.body.error, "forbidden");
  t.deepEqual((await sys.call(guest.token, { op: "collections.search", query: "quokkaflux", scope: ["shared"] })).body.collections, []);
  t.deepEqual((await sys.call(owner.token, { op: "collaborators.list", collection_id: c.id })).body.collaborators, []);

  const nothing = await revoke(owner, c.id, guest.userId);
  t.is(nothing.status, 404);
  t.is(nothing.body.error, "not_found");
  t.is((await revoke(owner, c.id, randomUUID())).status, 404);
});

test("update_permissions: at least one flag, omitted unchanged, on pending and accepted, reflected in reads", async (t) => {
  const { owner, guest, c } = await collaboration();
  const none = await updatePerms(owner, c.id, guest.userId, {});
  t.is(none.status, 400);
  t.is(none.body.error, "invalid_request");

  const res = await updatePerms(owner, c.id, guest.userId, { can_delete: true });
  t.is(res.status, 200);
  t.deepEqual(res.body.collaborator, { collection_id: c.id, user_id: guest.userId, status: "accepted", can_upload: true, can_edit: false, can_delete: true });
  t.deepEqual(res.body.permissions, { can_upload: true, can_edit: false, can_delete: true });
  t.like((await get(guest, c.id)).body.collection.viewer_permissions, { can_upload: true, can_edit: false, can_delete: true });

  const res2 = await updatePerms(owner, c.id, guest.userId, { can_upload: false, can_edit: true });
  t.deepEqual(res2.body.permissions, { can_upload: false, can_edit: true, can_delete: true });
  t.like((await sys.call(owner.token, { op: "collaborators.list", collection_id: c.id })).body.collaborators[0], { can_upload: false, can_edit: true, can_delete: true });

  const pendingOne = await sys.user();
  t.is((await invite(owner, c.id, pendingOne.username)).status, 200);
  const onPending = await updatePerms(owner, c.id, pendingOne.userId, { can_edit: true });
  t.is(onPending.status, 200);
  t.like(onPending.body.collaborator, { user_id: pendingOne.userId, status: "pending", can_upload: true, can_edit: true, can_delete: false });
  t.like((await accept(pendingOne, c.id, owner)).body.invite, { status: "accepted", can_edit: true });

  const byGuest = await updatePerms(guest, c.id, guest.userId, { can_delete: true });
  t.is(byGuest.status, 403);
  t.is((await updatePerms(owner, c.id, randomUUID(), { can_edit: true })).status, 404);
});

test("CheckAccess answers for owner, collaborators with and without flags, after revoke, and a stranger", async (t) => {
  const { owner, guest, c } = await collaboration({ can_upload: true, can_edit: false, can_delete: false });
  const stranger = await sys.user();
  const rpc = sys.system.clients.get(CollectionsService);
  const check = (userId: string, action: string) => rpc.checkAccess({ userId, collectionId: BigInt(c.id), action });

  for (const action of ["read", "upload", "edit", "delete", "owner"]) {
    const r = await check(owner.userId, action);
    t.true(r.allowed, action);
    t.true(r.isOwner);
    t.is(r.ownerUserId, owner.userId);
  }
  t.like(await check(guest.userId, "read"), { allowed: true, isOwner: false, deniedPermission: "" });
  t.like(await check(guest.userId, "upload"), { allowed: true, deniedPermission: "" });
  t.like(await check(guest.userId, "edit"), { allowed: false, deniedPermission: "can_edit" });
  t.like(await check(guest.userId, "delete"), { allowed: false, deniedPermission: "can_delete" });
  t.like(await check(guest.userId, "owner"), { allowed: false });

  t.is((await updatePerms(owner, c.id, guest.userId, { can_upload: false, can_edit: true })).status, 200);
  t.like(await check(guest.userId, "upload"), { allowed: false, deniedPermission: "can_upload" });
  t.like(await check(guest.userId, "edit"), { allowed: true, deniedPermission: "" });

  for (const action of ["read", "upload", "edit", "delete", "owner"]) {
    t.like(await check(stranger.userId, action), { allowed: false, exists: true, isOwner: false, deniedPermission: "" }, action);
  }

  t.is((await revoke(owner, c.id, guest.userId)).status, 200);
  for (const action of ["read", "upload", "edit", "delete"]) {
    t.like(await check(guest.userId, action), { allowed: false, deniedPermission: "" }, action);
  }
});

test("every change of collaborators emits collection.updated with kind collaborators_changed", async (t) => {
  const { owner, guest, c } = await collaboration();
  t.is((await updatePerms(owner, c.id, guest.userId, { can_edit: true })).status, 200);
  t.is((await revoke(owner, c.id, guest.userId)).status, 200);
  const kinds = () => events.filter((e) => e.payload.collection_id === c.id && e.payload.kind === "collaborators_changed");
  const deadline = Date.now() + 10_000;
  while (kinds().length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  // invite, accept, update_permissions, revoke
  t.is(kinds().length, 4);
  t.true(kinds().every((e) => e.payload.owner_user_id === owner.userId));
});

test("hourly cap: the 16th invite within an hour is 429 rate_limited; revoked invites still count", async (t) => {
  const owner = await sys.user();
  const cols = [
    await create(owner, { name: "Cap A", share_access_level: "restricted" }),
    await create(owner, { name: "Cap B", share_access_level: "private" }),
    await create(owner, { name: "Cap C", share_access_level: "restricted" }),
  ];
  const guests = await Promise.all(Array.from({ length: 16 }, () => sys.user()));
  for (let i = 0; i < 15; i++) {
    const res = await invite(owner, cols[i % 3]!.id, guests[i]!.username);
    t.is(res.status, 200, `invite ${i + 1}: ${JSON.stringify(res.body)}`);
  }
  // Re-inviting a pending invitee changes flags only and is not a new invite.
  t.is((await invite(owner, cols[0]!.id, guests[0]!.username, { can_edit: true })).status, 200);

  const over = await invite(owner, cols[1]!.id, guests[15]!.username);
  t.is(over.status, 429);
  t.is(over.body.error, "rate_limited");
  t.is(over.body.cap, "invites_per_hour");
  t.regex(over.body.detail, /15 invites per rolling hour/);
  t.true(over.body.retry_after_seconds > 0 && over.body.retry_after_seconds <= 3600);

  t.is((await revoke(owner, cols[0]!.id, guests[0]!.userId)).status, 200);
  const still = await invite(owner, cols[1]!.id, guests[15]!.username);
  t.is(still.status, 429);
  t.is(still.body.cap, "invites_per_hour");
  // Nothing was created by the refused invites.
  t.deepEqual((await sys.call(guests[15]!.token, { op: "collaborators.invites.received" })).body.invites, []);
});

test("pending cap: a 21st pending invite on one collection is 429; cancelling one makes room", async (t) => {
  const owner = await sys.user();
  const c = await create(owner, { name: "Pending cap", share_access_level: "restricted" });
  const db = sys.system.dbOf("collections")!;
  // 19 pending invites sent two hours ago (outside the hourly window), seeded directly.
  const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
  const seeded = Array.from({ length: 19 }, () => randomUUID());
  await db("collaborators").insert(seeded.map((userId) => ({
    collection_id: c.id, user_id: userId, inviter_user_id: owner.userId, status: "pending", created_at: twoHoursAgo,
  })));
  await db("collaborator_invite_log").insert(seeded.map((userId) => ({
    inviter_user_id: owner.userId, collection_id: c.id, user_id: userId, created_at: twoHoursAgo,
  })));
  // An accepted and a declined one do not count as pending.
  await db("collaborators").insert([
    { collection_id: c.id, user_id: randomUUID(), inviter_user_id: owner.userId, status: "accepted", created_at: twoHoursAgo, responded_at: twoHoursAgo },
    { collection_id: c.id, user_id: randomUUID(), inviter_user_id: owner.userId, status: "declined", created_at: twoHoursAgo, responded_at: twoHoursAgo },
  ]);
  const twentieth = await sys.user();
  const twentyFirst = await sys.user();
  t.is((await invite(owner, c.id, twentieth.username)).status, 200);
  const over = await invite(owner, c.id, twentyFirst.username);
  t.is(over.status, 429);
  t.is(over.body.error, "rate_limited");
  t.is(over.body.cap, "pending_per_collection");
  t.regex(over.body.detail, /20 pending invites per collection/);
  // Another collection of the same owner is not affected.
  const other = await create(owner, { name: "Pending cap other", share_access_level: "restricted" });
  t.is((await invite(owner, other.id, twentyFirst.username)).status, 200);
  // Cancelling a pending invite frees a place.
  t.is((await revoke(owner, c.id, seeded[0]!)).status, 200);
  t.is((await invite(owner, c.id, twentyFirst.username)).status, 200);
});

test("24-hour cap: the 51st invite within a day is 429 even with a quiet last hour", async (t) => {
  const owner = await sys.user();
  const c = await create(owner, { name: "Daily cap", share_access_level: "restricted" });
  const db = sys.system.dbOf("collections")!;
  // 49 invites sent 3 to 20 hours ago (their collaborator rows since revoked), one older than a day.
  await db("collaborator_invite_log").insert([
    ...Array.from({ length: 49 }, (_, i) => ({
      inviter_user_id: owner.userId, collection_id: c.id, user_id: randomUUID(), created_at: new Date(Date.now() - (3 + i / 3) * 3_600_000),
    })),
    { inviter_user_id: owner.userId, collection_id: c.id, user_id: randomUUID(), created_at: new Date(Date.now() - 25 * 3_600_000) },
  ]);
  const fiftieth = await sys.user();
  const fiftyFirst = await sys.user();
  t.is((await invite(owner, c.id, fiftieth.username)).status, 200);
  const over = await invite(owner, c.id, fiftyFirst.username);
  t.is(over.status, 429);
  t.is(over.body.error, "rate_limited");
  t.is(over.body.cap, "invites_per_24_hours");
  t.regex(over.body.detail, /50 invites per rolling 24 hours/);
  // The oldest counted one (19 h ago) leaves the window in at most 5 hours.
  t.true(over.body.retry_after_seconds > 4 * 3600 && over.body.retry_after_seconds <= 5 * 3600, String(over.body.retry_after_seconds));
});
