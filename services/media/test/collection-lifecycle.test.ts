/**
 * The consumer of collection.lifecycle (and ApplyCollectionLifecycle, the same code) against
 * in-memory stores: what each action does to the media and to link rows in other collections,
 * and that redelivery and reordering change nothing.
 */
import test from "ava";
import { EVENTS } from "@cms/platform";
import type { MediaRow } from "../src/domain/media-row.js";
import { lifecycleChange } from "../src/app/collection-lifecycle.js";
import { fakeMediaApp } from "./fakes.js";

const OWNER = "00000000-0000-4000-8000-000000000001";

/**
 * Collection 10 holds a file, a text note and the link row of its sub-collection 20 (which holds
 * a file); 30 is another parent where 20 is also linked, with a file of its own after the link.
 */
async function world() {
  const f = fakeMediaApp();
  const { media } = f.stores;
  const row = (collection_id: number, position: number, more: Partial<MediaRow> = {}) => media.insert({
    collection_id, owner_user_id: OWNER, created_by: OWNER, main_url: `store://${OWNER}/${collection_id}/${position}_a.png`, viewer: "image", position,
    thumbnail_url: `store://${OWNER}/${collection_id}/${position}_thumb.webp`, ...more,
  });
  const link = (parent: number, child: number, position: number) => row(parent, position, {
    main_url: `collection://${child}`, viewer: "collection", linked_collection_id: child, thumbnail_url: null,
  });
  const ids = {
    file10: (await row(10, 0)).id,
    note10: (await row(10, 1, { main_url: "inline://text-note", viewer: "text", thumbnail_url: null })).id,
    link20in10: (await link(10, 20, 2)).id,
    file20: (await row(20, 0)).id,
    link20in30: (await link(30, 20, 0)).id,
    file30: (await row(30, 1)).id,
  };
  return { ...f, ids };
}

const visible = (rows: MediaRow[], collectionId: number) => rows.filter((r) => r.collection_id === collectionId && !r.is_deleted)
  .sort((a, b) => a.position - b.position).map((r) => [r.id, r.position]);

test("soft_deleted hides the collections' media and their link rows elsewhere; the parents left are renumbered", async (t) => {
  const { app, state, events, ids } = await world();
  const affected = await app.lifecycle.applyLifecycle({ collectionIds: [20], action: "soft_deleted", version: 1 });
  t.is(affected, 3, "the file of 20 and its two link rows");
  t.deepEqual(visible(state.media, 20), []);
  t.deepEqual(visible(state.media, 10), [[ids.file10, 0], [ids.note10, 1]]);
  t.deepEqual(visible(state.media, 30), [[ids.file30, 0]]);
  t.deepEqual(events.map((e) => [e.type, e.payload.collection_id, e.payload.kind]).sort(), [
    [EVENTS.collectionUpdated, 10, "media_removed"], [EVENTS.collectionUpdated, 30, "media_removed"],
  ]);
  t.false("owner_user_id" in events[0]!.payload, "the media service does not know the owner of the collection event");
});

test("soft_deleted takes the parents' collection locks before it touches any of their rows (media.delete holds one while it renumbers)", async (t) => {
  const { app, stores } = await world();
  const order: string[] = [];
  const { media } = stores;
  const lock = media.lockCollections.bind(media);
  const hide = media.hideLinksTo.bind(media);
  const hideOwn = media.hideWithCollections.bind(media);
  media.lockCollections = async (ids) => { order.push(`lock ${[...ids].sort((a, b) => a - b).join(",")}`); return lock(ids); };
  media.hideLinksTo = async (childIds, except) => { order.push("hide links"); return hide(childIds, except); };
  media.hideWithCollections = async (ids) => { order.push("hide own"); return hideOwn(ids); };
  await app.lifecycle.applyLifecycle({ collectionIds: [20], action: "soft_deleted", version: 1 });
  t.is(order[0], "lock 10,30", "both parents of 20's link rows, in id order, first");
  t.true(order.indexOf("hide links") > 0 && order.indexOf("hide own") > 0);
});

test("a parent deleted with its child keeps the child's link row as its own media (restored with it)", async (t) => {
  const { app, state, ids } = await world();
  await app.lifecycle.applyLifecycle({ collectionIds: [10, 20], action: "soft_deleted", version: 1 });
  t.deepEqual(visible(state.media, 10), []);
  t.deepEqual(visible(state.media, 30), [[ids.file30, 0]], "20's link in 30 (not deleted) is hidden");
  await app.lifecycle.applyLifecycle({ collectionIds: [10, 20], action: "restored", version: 2 });
  t.deepEqual(visible(state.media, 10), [[ids.file10, 0], [ids.note10, 1], [ids.link20in10, 2]], "in place: hidden with its collection");
  t.deepEqual(visible(state.media, 20), [[ids.file20, 0]]);
  t.deepEqual(visible(state.media, 30), [[ids.file30, 0], [ids.link20in30, 1]], "a link elsewhere comes back at the end");
});

test("the same change delivered again (the RPC after the commit, then the event; or a redelivery) changes nothing", async (t) => {
  const { app, state, events } = await world();
  const change = { collectionIds: [20], action: "soft_deleted" as const, version: 7 };
  t.is(await app.lifecycle.applyLifecycle(change), 3);
  const after = structuredClone(state.media);
  const written = events.length;
  t.is(await app.lifecycle.consume({ id: "e1", payload: { collection_ids: [20], action: "soft_deleted", version: 7 } }), 0);
  t.is(await app.lifecycle.applyLifecycle(change), 0);
  t.deepEqual(state.media, after);
  t.is(events.length, written, "no second collection.updated");
});

test("reordered: a restore applied before the soft delete it follows leaves the media visible", async (t) => {
  const { app, state, ids } = await world();
  await app.lifecycle.applyLifecycle({ collectionIds: [20], action: "restored", version: 2 });
  t.is(await app.lifecycle.applyLifecycle({ collectionIds: [20], action: "soft_deleted", version: 1 }), 0, "older than what 20 saw");
  t.deepEqual(visible(state.media, 20), [[ids.file20, 0]]);
  t.deepEqual(visible(state.media, 30).map(([id]) => id), [ids.link20in30, ids.file30]);
});

test("soft delete, restore, soft delete again: the newest wins whatever the order of delivery", async (t) => {
  const orders = [[1, 2, 3], [3, 2, 1], [2, 3, 1], [1, 3, 2]];
  for (const order of orders) {
    const { app, state } = await world();
    const actions = { 1: "soft_deleted", 2: "restored", 3: "soft_deleted" } as const;
    for (const v of order) await app.lifecycle.applyLifecycle({ collectionIds: [20], action: actions[v as 1 | 2 | 3], version: v });
    t.deepEqual(visible(state.media, 20), [], `order ${order.join(",")}`);
    t.is(state.lifecycle.get(20)?.version, 3);
  }
});

test("versions are per collection: an event mixing a newer and an already-newer collection applies to the first only", async (t) => {
  const { app, state, ids } = await world();
  await app.lifecycle.applyLifecycle({ collectionIds: [10], action: "restored", version: 5 });
  const affected = await app.lifecycle.applyLifecycle({ collectionIds: [10, 20], action: "soft_deleted", version: 4 });
  t.is(affected, 2, "20's file and its link in 30; 10 already saw version 5");
  t.deepEqual(visible(state.media, 10), [[ids.file10, 0], [ids.note10, 1], [ids.link20in10, 2]]);
  t.deepEqual(visible(state.media, 20), []);
});

test("purged removes the rows, link rows elsewhere too, and hands the stored objects to media.objects.orphaned", async (t) => {
  const { app, state, events, ids } = await world();
  t.is(await app.lifecycle.applyLifecycle({ collectionIds: [20], action: "purged", version: 1 }), 3);
  t.deepEqual(state.media.filter((r) => r.collection_id === 20 || r.linked_collection_id === 20), []);
  t.deepEqual(visible(state.media, 30), [[ids.file30, 0]]);
  const orphaned = events.filter((e) => e.type === EVENTS.objectsOrphaned).flatMap((e) => e.payload.store_keys as string[]);
  t.deepEqual(orphaned.sort(), [`store://${OWNER}/20/0_a.png`, `store://${OWNER}/20/0_thumb.webp`]);
  t.is(await app.lifecycle.applyLifecycle({ collectionIds: [20], action: "purged", version: 1 }), 0, "redelivered");
  t.is(await app.lifecycle.applyLifecycle({ collectionIds: [20], action: "restored", version: 1 }), 0, "as old as the purge");
  t.is(events.filter((e) => e.type === EVENTS.objectsOrphaned).length, 1);
});

test("a purge arriving after the soft delete it ends removes the hidden rows as well", async (t) => {
  const { app, state } = await world();
  await app.lifecycle.applyLifecycle({ collectionIds: [20], action: "soft_deleted", version: 1 });
  t.is(await app.lifecycle.applyLifecycle({ collectionIds: [20], action: "purged", version: 2 }), 3);
  t.deepEqual(state.media.filter((r) => r.collection_id === 20 || r.linked_collection_id === 20), []);
});

test("the consumer drops a payload it can never apply (logged) instead of failing forever; the RPC refuses it", async (t) => {
  const { app, state } = await world();
  const before = structuredClone(state.media);
  t.is(await app.lifecycle.consume({ id: "e", payload: { collection_ids: [20], action: "archived", version: 1 } }), 0);
  t.is(await app.lifecycle.consume({ id: "e", payload: { collection_ids: [20], action: "purged" } }), 0);
  t.deepEqual(state.media, before);
  t.throws(() => lifecycleChange([20], "archived", 1), { message: /action must be one of soft_deleted, restored, purged/ });
  t.deepEqual(lifecycleChange([20n, 21n], "restored", 3n), { collectionIds: [20, 21], action: "restored", version: 3 });
});

test("a failed unit leaves neither the change nor its version: the redelivery applies it", async (t) => {
  const { app, state, stores } = await world();
  const renumber = stores.media.renumber;
  stores.media.renumber = async () => { throw new Error("connection lost"); };
  await t.throwsAsync(app.lifecycle.applyLifecycle({ collectionIds: [20], action: "soft_deleted", version: 1 }), { message: "connection lost" });
  t.false(state.lifecycle.has(20));
  t.true(state.media.every((r) => !r.is_deleted));
  stores.media.renumber = renumber;
  t.is(await app.lifecycle.applyLifecycle({ collectionIds: [20], action: "soft_deleted", version: 1 }), 3);
});
