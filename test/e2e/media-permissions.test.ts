/** Collaborator permission flags enforced on media operations, decided by the collections service. */
import test from "ava";
import { startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";

let sys: TestSystem;
let owner: TestUser;
let collab: TestUser;
let collectionId: number;

test.before(async () => {
  sys = await startTestSystem();
  owner = await sys.user({ plan: "paid" });
  collab = await sys.user();
  const c = await sys.call(owner.token, { op: "collections.create", name: "Shared", share_access_level: "restricted" });
  collectionId = c.body.collection.id;
  const inv = await sys.call(owner.token, { op: "collaborators.invite", collection_id: collectionId, username: collab.username });
  if (inv.status !== 200) throw new Error(JSON.stringify(inv.body));
  const acc = await sys.call(collab.token, { op: "collaborators.invite.accept", collection_id: collectionId, inviter_user_id: owner.userId });
  if (acc.status !== 200) throw new Error(JSON.stringify(acc.body));
});
test.after.always(async () => { await sys?.stop(); });

const perms = (flags: Record<string, boolean>) =>
  sys.call(owner.token, { op: "collaborators.update_permissions", collection_id: collectionId, user_id: collab.userId, ...flags });

test.serial("default flags: upload yes, edit and delete no (403 insufficient_permission naming the flag)", async (t) => {
  const created = await sys.call(collab.token, { op: "media.text_note.add", collection_id: collectionId, name: "by collaborator", text: "hi" });
  t.is(created.status, 200);
  const link = await sys.call(collab.token, { op: "media.create", collection_id: collectionId, source_url: "https://vimeo.com/1", thumbnail_url: "https://example.com/t.jpg" });
  t.is(link.status, 200);
  const id = created.body.media.id;
  // Collaborators read the collection and its media.
  t.is((await sys.call(collab.token, { op: "media.get", media_id: id })).status, 200);
  t.is((await sys.call(collab.token, { op: "media.list", collection_id: collectionId })).body.media.length, 2);
  t.is((await sys.call(collab.token, { op: "collections.get", collection_id: collectionId })).status, 200);

  const upd = await sys.call(collab.token, { op: "media.update", media_id: id, name: "edited" });
  t.is(upd.status, 403);
  t.is(upd.body.error, "insufficient_permission");
  t.is(upd.body.permission, "can_edit");
  const noteUpd = await sys.call(collab.token, { op: "media.text_note.update", media_id: id, text: "x" });
  t.is(noteUpd.body.permission, "can_edit");
  const del = await sys.call(collab.token, { op: "media.delete", media_ids: [id], confirm: true });
  t.is(del.status, 403);
  t.is(del.body.error, "insufficient_permission");
  t.is(del.body.permission, "can_delete");
});

test.serial("granted flags take effect at once; revoked ones too", async (t) => {
  const id = (await sys.call(collab.token, { op: "media.text_note.add", collection_id: collectionId, name: "flags" })).body.media.id;
  t.is((await perms({ can_edit: true })).status, 200);
  t.is((await sys.call(collab.token, { op: "media.update", media_id: id, name: "now editable" })).status, 200);
  t.is((await perms({ can_upload: false })).status, 200);
  const up = await sys.call(collab.token, { op: "media.text_note.add", collection_id: collectionId, name: "no upload" });
  t.is(up.status, 403);
  t.is(up.body.permission, "can_upload");
  t.is((await perms({ can_delete: true })).status, 200);
  t.is((await sys.call(collab.token, { op: "media.delete", media_ids: [id], confirm: true })).status, 200);
});

test.serial("owner-only media operations refuse collaborators; a revoked collaborator is refused immediately", async (t) => {
  await perms({ can_upload: true, can_edit: true, can_delete: true });
  const id = (await sys.call(collab.token, { op: "media.text_note.add", collection_id: collectionId, name: "owner ops" })).body.media.id;
  t.is((await sys.call(collab.token, { op: "media.archive", media_id: id })).status, 403);
  t.is((await sys.call(collab.token, { op: "media.reorder", collection_id: collectionId })).status, 403);
  const revoke = await sys.call(owner.token, { op: "collaborators.revoke", collection_id: collectionId, user_id: collab.userId });
  t.is(revoke.status, 200);
  const after = await sys.call(collab.token, { op: "media.text_note.add", collection_id: collectionId, name: "after revoke" });
  t.is(after.status, 403);
  t.is(after.body.error, "forbidden");
  t.is((await sys.call(collab.token, { op: "media.get", media_id: id })).status, 403);
});
