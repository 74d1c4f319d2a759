/**
 * The link rows the collections service asks for, against in-memory stores: a second
 * InsertCollectionLink or MoveCollectionLink (a retry, a compensation) changes nothing.
 */
import test from "ava";
import { EVENTS } from "@cms/platform";
import { fakeMediaApp } from "./fakes.js";

const OWNER = "00000000-0000-4000-8000-000000000001";

async function parentWithItems(n: number, collectionId = 1) {
  const f = fakeMediaApp();
  for (let i = 0; i < n; i++) {
    await f.stores.media.insert({ collection_id: collectionId, owner_user_id: OWNER, created_by: OWNER, main_url: `https://e.com/${i}`, viewer: "website", position: i });
  }
  return f;
}

const order = (f: ReturnType<typeof fakeMediaApp>, collectionId: number) => f.state.media.filter((r) => r.collection_id === collectionId && !r.is_deleted)
  .sort((a, b) => a.position - b.position).map((r) => [r.linked_collection_id ?? r.main_url, r.position]);

test("InsertCollectionLink appends a link row; a second call answers the same row and writes nothing", async (t) => {
  const f = await parentWithItems(2);
  const first = await f.app.links.insertCollectionLink({ parentId: 1, childId: 5, ownerUserId: OWNER, description: "child" });
  t.is(first.position, 2);
  const written = f.events.length;
  t.is(written, 1);
  t.deepEqual(f.events[0], { type: EVENTS.collectionUpdated, payload: { collection_id: 1, kind: "media_added", occurred_at: f.events[0]!.payload.occurred_at } });
  const again = await f.app.links.insertCollectionLink({ parentId: 1, childId: 5, ownerUserId: OWNER, description: "child" });
  t.deepEqual(again, first);
  t.is(f.state.media.filter((r) => r.linked_collection_id === 5).length, 1);
  t.is(f.events.length, written);
  const row = f.state.media.find((r) => r.id === first.id)!;
  t.like(row, { main_url: "collection://5", viewer: "collection", description: "child", name: null, owner_user_id: OWNER, created_by: OWNER });
});

test("InsertCollectionLink at a position makes room; past the end it appends", async (t) => {
  const f = await parentWithItems(3);
  const at1 = await f.app.links.insertCollectionLink({ parentId: 1, childId: 5, ownerUserId: OWNER, position: 1 });
  t.is(at1.position, 1);
  t.deepEqual(order(f, 1), [["https://e.com/0", 0], [5, 1], ["https://e.com/1", 2], ["https://e.com/2", 3]]);
  const past = await f.app.links.insertCollectionLink({ parentId: 1, childId: 6, ownerUserId: OWNER, position: 99 });
  t.is(past.position, 4);
  t.deepEqual(await f.app.links.insertCollectionLink({ parentId: 1, childId: 5, ownerUserId: OWNER, position: 0 }), at1, "a retry does not move it");
});

test("MoveCollectionLink moves the link to the end of the new parent; calling again changes nothing", async (t) => {
  const f = await parentWithItems(2);
  await f.stores.media.insert({ collection_id: 2, owner_user_id: OWNER, created_by: OWNER, main_url: "https://e.com/x", viewer: "website", position: 0 });
  const link = await f.app.links.insertCollectionLink({ parentId: 1, childId: 5, ownerUserId: OWNER, position: 0 });
  const moved = await f.app.links.moveCollectionLink({ childId: 5, newParentId: 2, ownerUserId: OWNER });
  t.deepEqual(moved.removed, [link.id]);
  t.deepEqual(order(f, 1), [["https://e.com/0", 0], ["https://e.com/1", 1]], "the old parent is renumbered");
  t.deepEqual(order(f, 2), [["https://e.com/x", 0], [5, 1]]);
  const written = f.events.length;
  const again = await f.app.links.moveCollectionLink({ childId: 5, newParentId: 2, ownerUserId: OWNER });
  t.deepEqual(again, { removed: [], linkId: moved.linkId });
  t.is(f.events.length, written);
});

test("MoveCollectionLink collapses links in several parents into the new one, and detaching (again) leaves none", async (t) => {
  const f = fakeMediaApp();
  await f.app.links.insertCollectionLink({ parentId: 1, childId: 5, ownerUserId: OWNER });
  await f.app.links.insertCollectionLink({ parentId: 2, childId: 5, ownerUserId: OWNER });
  const kept = await f.app.links.insertCollectionLink({ parentId: 3, childId: 5, ownerUserId: OWNER });
  const moved = await f.app.links.moveCollectionLink({ childId: 5, newParentId: 3, ownerUserId: OWNER });
  t.is(moved.linkId, kept.id, "the link already in the new parent stays");
  t.is(moved.removed.length, 2);
  t.deepEqual((await f.stores.media.linkRowsOf(5)).map((l) => l.collection_id), [3]);
  const detached = await f.app.links.moveCollectionLink({ childId: 5, ownerUserId: OWNER });
  t.deepEqual(detached, { removed: [kept.id], linkId: undefined });
  t.deepEqual(await f.app.links.moveCollectionLink({ childId: 5, ownerUserId: OWNER }), { removed: [], linkId: undefined });
  t.deepEqual(await f.stores.media.linkRowsOf(5), []);
});

test("a link hidden with its deleted child does not count as the link in the new parent", async (t) => {
  const f = fakeMediaApp();
  const hidden = await f.app.links.insertCollectionLink({ parentId: 3, childId: 5, ownerUserId: OWNER });
  await f.app.lifecycle.applyLifecycle({ collectionIds: [5], action: "soft_deleted", version: 1 });
  const moved = await f.app.links.moveCollectionLink({ childId: 5, newParentId: 3, ownerUserId: OWNER });
  t.deepEqual(moved.removed, [hidden.id]);
  t.not(moved.linkId, hidden.id);
  t.deepEqual((await f.stores.media.linkRowsOf(5)).map((l) => [l.collection_id, l.is_deleted]), [[3, false]]);
});

test("CountCollectionMedia answers every collection asked, 0 when empty; deleted rows do not count", async (t) => {
  const f = await parentWithItems(3);
  await f.stores.media.softDelete([f.state.media[0]!.id]);
  t.deepEqual(await f.app.links.countCollectionMedia([1, 9]), [{ collectionId: 1, count: 2 }, { collectionId: 9, count: 0 }]);
  t.deepEqual(await f.app.links.countCollectionMedia([]), []);
});
