/**
 * Component tests of the steps that span the collections and media services (sub-collection
 * create, move) and of the lifecycle changes, against in-memory fakes: whatever media does
 * (answers, is down, refuses, loses its answer, the process dies mid-step), the two sides end
 * up agreeing, and no media call happens inside a unit of work.
 */
import test from "ava";
import { AppError, toConnectError } from "@cms/platform";
import { STEP_GRACE_MS, retryDelayMs } from "../src/domain/pending-steps.js";
import { caller, harness, type Harness } from "./fakes.js";

const alice = caller();
const later = (h: Harness, ms: number) => new Date(h.clock.now.getTime() + ms);

async function parentOf(h: Harness, name = "Parent") {
  return (await h.app.createCollection(alice, { name, tags: [], isNsfw: false, searchable: false })).row;
}

function createChild(h: Harness, parentId: number, name = "Child") {
  return h.app.createCollection(alice, { name, tags: [], isNsfw: false, searchable: false, parentId });
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  return err instanceof AppError ? err.code : `not an AppError: ${String(err)}`;
}

/** Collections A and B, and a sub-collection "Child" of A (linked in media). */
async function nested(h: Harness) {
  const a = await parentOf(h, "A");
  const b = await parentOf(h, "B");
  return { a, b, child: (await createChild(h, a.id)).row };
}

/** Starts a move whose media call changes media and never answers (its process died); the move's commit is done. */
async function stalledMove(h: Harness, id: number, to: number | null) {
  h.media.behaviour.moveCollectionLink = { hold: new Promise<void>(() => {}) };
  void h.app.moveCollection(alice, id, to);
  await new Promise((r) => setImmediate(r));
  h.media.behaviour.moveCollectionLink = "ok";
}

/** Both sides agree on the child: its row and exactly one link row in its parent, or neither. */
function agree(h: Harness, childId: number): "both" | "neither" | string {
  const row = h.state().collections.get(childId);
  const links = h.media.links.filter((l) => l.child === childId);
  if (!row && links.length === 0) return "neither";
  if (row && row.parent_id !== null && links.length === 1 && links[0]!.parent === row.parent_id) return "both";
  if (row && row.parent_id === null && links.length === 0) return "both";
  return `disagree: row ${JSON.stringify(row?.parent_id)}, links ${JSON.stringify(links)}`;
}

test("create with a parent: media answers, the link row is reported and no step stays", async (t) => {
  const h = harness();
  const parent = await parentOf(h);
  const out = await createChild(h, parent.id);
  t.is(agree(h, out.row.id), "both");
  t.is(out.linkMediaId, h.media.links[0]!.id);
  t.is(h.state().steps.size, 0);
  t.deepEqual(h.events.map((e) => e.payload.kind), ["created", "created"]);
});

test("create with a parent: media down, the collection is removed again, the link detached, 503", async (t) => {
  const h = harness();
  const parent = await parentOf(h);
  h.media.behaviour.insertCollectionLink = "down";
  t.is(await codeOf(createChild(h, parent.id)), "unavailable");
  const childId = h.state().seq.collection;
  t.is(agree(h, childId), "neither");
  t.is(h.state().steps.size, 0, "the undo finished: nothing left for the job");
  t.deepEqual(h.media.calls.slice(-2), ["insertCollectionLink", "moveCollectionLink"], "detached in media too");
  t.deepEqual(h.events.map((e) => e.payload.kind), ["created", "created", "deleted"]);
  // The name is free again: a retry succeeds.
  h.media.behaviour.insertCollectionLink = "ok";
  t.is(agree(h, (await createChild(h, parent.id)).row.id), "both");
});

test("create with a parent: media wrote the link but its answer was lost; the undo removes both sides", async (t) => {
  const h = harness();
  const parent = await parentOf(h);
  h.media.behaviour.insertCollectionLink = "answer_lost";
  t.is(await codeOf(createChild(h, parent.id)), "unavailable");
  t.is(agree(h, h.state().seq.collection), "neither");
});

test("create with a parent: a refusal from media reaches the client as it is, with nothing left", async (t) => {
  const h = harness();
  const parent = await parentOf(h);
  h.media.behaviour.insertCollectionLink = { refuse: toConnectError(new AppError("not_found", "Collection 1 does not exist.")) };
  t.is(await codeOf(createChild(h, parent.id)), "not_found");
  t.is(agree(h, h.state().seq.collection), "neither");
});

test("create with a parent: when the undo cannot reach media either, the job retries it until media answers", async (t) => {
  const h = harness();
  const parent = await parentOf(h);
  h.media.behaviour.insertCollectionLink = "answer_lost";
  h.media.behaviour.moveCollectionLink = "down";
  t.is(await codeOf(createChild(h, parent.id)), "unavailable");
  const childId = h.state().seq.collection;
  t.false(h.state().collections.has(childId), "the collections side is undone at once");
  t.is(h.media.links.length, 1, "the link row media wrote is still there");
  const [step] = [...h.state().steps.values()];
  t.is(step!.state, "compensating");
  t.is(step!.attempts, 1);

  // Before the retry delay nothing is due; a run while media is still down only reschedules.
  t.deepEqual(await h.app.recoverPendingSteps(later(h, 1000)), { undone: 0, retrying: 0 });
  t.deepEqual(await h.app.recoverPendingSteps(later(h, retryDelayMs(1))), { undone: 0, retrying: 1 });
  t.is([...h.state().steps.values()][0]!.attempts, 2);

  h.media.behaviour.moveCollectionLink = "ok";
  t.deepEqual(await h.app.recoverPendingSteps(later(h, retryDelayMs(1) + retryDelayMs(2))), { undone: 1, retrying: 0 });
  t.is(agree(h, childId), "neither");
  t.is(h.state().steps.size, 0);
});

test("create with a parent: the process dies after the commit; the job undoes the step once its grace period is over", async (t) => {
  const h = harness();
  const parent = await parentOf(h);
  // Media writes the link, and the answer never comes back to this request (its process died).
  let answer!: () => void;
  h.media.behaviour.insertCollectionLink = { hold: new Promise<void>((r) => { answer = r; }) };
  const request = createChild(h, parent.id);
  await new Promise((r) => setImmediate(r));
  const childId = h.state().seq.collection;
  t.truthy(h.state().collections.get(childId), "committed");
  t.is(h.media.links.length, 1);

  t.deepEqual(await h.app.recoverPendingSteps(later(h, STEP_GRACE_MS - 1)), { undone: 0, retrying: 0 }, "inside its grace period the step is the request's");
  t.deepEqual(await h.app.recoverPendingSteps(later(h, STEP_GRACE_MS)), { undone: 1, retrying: 0 });
  t.is(agree(h, childId), "neither");

  // Had the request survived after all, it must not report a success the job has undone.
  answer();
  t.is(await codeOf(request), "unavailable");
  t.is(agree(h, childId), "neither");
});

test("move: media answers; the link rows follow and the step is gone", async (t) => {
  const h = harness();
  const { b, child } = await nested(h);
  const out = await h.app.moveCollection(alice, child.id, b.id);
  t.false(out.noop);
  t.is(out.removedLinkMediaIds.length, 1);
  t.is(agree(h, child.id), "both");
  t.is(h.state().collections.get(child.id)!.parent_id, b.id);
  t.is(h.state().steps.size, 0);
});

test("move: media down; the parent is put back, media re-linked there, 503", async (t) => {
  const h = harness();
  const { a, b, child } = await nested(h);
  // The move's call changes media but its answer is lost; the undo's call goes through.
  h.media.behaviour.moveCollectionLink = ["answer_lost", "ok"];
  t.is(await codeOf(h.app.moveCollection(alice, child.id, b.id)), "unavailable");
  t.is(h.state().collections.get(child.id)!.parent_id, a.id);
  t.is(agree(h, child.id), "both");
  t.is(h.state().steps.size, 0);
});

test("move: when the former parent has the name taken meanwhile, the collection stays and media follows it there", async (t) => {
  const h = harness();
  const { a, b, child } = await nested(h);
  // Media dies mid-move; before the job runs, a new "Child" appears under A.
  await stalledMove(h, child.id, b.id);
  await createChild(h, a.id);
  t.deepEqual(await h.app.recoverPendingSteps(later(h, STEP_GRACE_MS)), { undone: 1, retrying: 0 });
  t.is(h.state().collections.get(child.id)!.parent_id, b.id, "not put back over a name now taken");
  t.is(agree(h, child.id), "both");
});

test("move: a second move while the first one's step is open answers 503", async (t) => {
  const h = harness();
  const { b, child } = await nested(h);
  await stalledMove(h, child.id, b.id);
  t.is(await codeOf(h.app.moveCollection(alice, child.id, null)), "unavailable");
});

test("lifecycle: each change commits with a collection.lifecycle event of a higher version, then media applies it", async (t) => {
  const h = harness();
  const parent = await parentOf(h);
  const child = (await createChild(h, parent.id)).row;
  await h.app.deleteCollection(alice, parent.id, { mode: "soft", cascadeMedia: false, confirm: false, dryRun: false });
  await h.app.restoreCollection(alice, parent.id, { dryRun: false });
  await h.app.deleteCollection(alice, parent.id, { mode: "hard", cascadeMedia: false, confirm: true, dryRun: false });
  const events = h.events.filter((e) => e.type === "collection.lifecycle").map((e) => e.payload);
  t.deepEqual(events, [
    { collection_ids: [parent.id, child.id], action: "soft_deleted", version: 1 },
    { collection_ids: [parent.id, child.id], action: "restored", version: 2 },
    { collection_ids: [parent.id, child.id], action: "purged", version: 3 },
  ]);
  t.deepEqual(h.media.lifecycle.map((l) => [l.action, l.version]), [["soft_deleted", 1], ["restored", 2], ["purged", 3]]);
});

test("lifecycle: media down after the commit changes nothing for the client; the event carries the change", async (t) => {
  const h = harness();
  const parent = await parentOf(h);
  h.media.behaviour.applyCollectionLifecycle = "down";
  const out = await h.app.deleteCollection(alice, parent.id, { mode: "soft", cascadeMedia: false, confirm: false, dryRun: false });
  t.is(out.kind, "soft");
  t.true(h.state().collections.get(parent.id)!.is_deleted);
  t.true(h.events.some((e) => e.type === "collection.lifecycle" && e.payload.action === "soft_deleted"));
  t.true(h.logged.some(([level]) => level === "warn"), "the failure is logged");
  const restored = await h.app.restoreCollection(alice, parent.id, { dryRun: false });
  t.is(restored.kind, "restored");
});

test("lifecycle: a restore whose name is taken again answers duplicate_collection_name and writes no event", async (t) => {
  const h = harness();
  const first = await parentOf(h, "Same");
  await h.app.deleteCollection(alice, first.id, { mode: "soft", cascadeMedia: false, confirm: false, dryRun: false });
  await parentOf(h, "Same");
  const before = h.events.length;
  t.is(await codeOf(h.app.restoreCollection(alice, first.id, { dryRun: false })), "duplicate_collection_name");
  t.is(h.events.length, before);
  t.deepEqual(h.media.lifecycle.map((l) => l.action), ["soft_deleted"], "media was not asked to restore anything");
});

test("the retention purge commits, then media follows; a late restore answers 410", async (t) => {
  const h = harness();
  const parent = await parentOf(h);
  await h.app.deleteCollection(alice, parent.id, { mode: "soft", cascadeMedia: false, confirm: false, dryRun: false });
  t.deepEqual(await h.app.purgeExpired(later(h, 31 * 86_400_000)), { purged: 1 });
  t.deepEqual(h.media.lifecycle.map((l) => l.action), ["soft_deleted", "purged"]);
  t.is(await codeOf(h.app.restoreCollection(alice, parent.id, { dryRun: false })), "restore_window_expired");
});
