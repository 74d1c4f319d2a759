/**
 * The delivery engine's consumer of collection.updated: a collection without a live webhook is
 * settled with one read and no transaction; one with a webhook gets its change recorded (and its
 * published state) inside a unit of work. Its pass likewise: a read each says whether a window or
 * a delivery is due, and only then does a unit of work close or claim.
 */
import test from "ava";
import type { BusEvent, Logger, UnitOfWork } from "@cms/platform";
import { createDeliveryEngine } from "../src/app/delivery-engine.js";
import type { WebhooksStore } from "../src/store/webhooks-store.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } } as unknown as Logger;

function engineWith(hooks: Set<number>, due: { windows?: boolean; deliveries?: boolean } = {}) {
  const calls: string[] = [];
  const inUnit = {
    async setPublished(id: number, published: boolean) { calls.push(`setPublished ${id} ${published}`); },
    async addChange(id: number, change: { kind: string }) { calls.push(`addChange ${id} ${change.kind}`); return hooks.has(id); },
    async closeDueWindows() { calls.push("closeDueWindows"); return []; },
    async claimDue() { calls.push("claimDue"); return []; },
  } as unknown as WebhooksStore;
  const uow = (async (work) => { calls.push("unit"); return work(inUnit, { async emit() {} }); }) as UnitOfWork<WebhooksStore>;
  const store = {
    async liveWebhook(id: number) { calls.push(`read ${id}`); return hooks.has(id) ? ({ id: "w" } as never) : undefined; },
    async anyWindowDue() { calls.push("windows due?"); return due.windows === true; },
    async anyDeliveryDue() { calls.push("deliveries due?"); return due.deliveries === true; },
  };
  const engine = createDeliveryEngine({ uow, store, receiver: { send: async () => ({ durationMs: 0 }) } as never, log: quiet, config: { coalesceMs: 1000, backoffMs: [1000], timeoutMs: 1000, concurrency: 1 } });
  return { engine, calls };
}

const event = (payload: Record<string, unknown>): BusEvent => ({ id: `e-${Math.random()}`, type: "collection.updated", payload, headers: {}, occurredAt: new Date().toISOString() } as BusEvent);

test("a collection without a webhook: one read, no unit of work", async (t) => {
  const { engine, calls } = engineWith(new Set([7]));
  await engine.onCollectionUpdated(event({ collection_id: 3, kind: "renamed" }));
  await engine.onCollectionUpdated(event({ collection_id: 3, kind: "published", published: true }));
  t.deepEqual(calls, ["read 3", "read 3"]);
});

test("a collection with a webhook: its change and published state recorded in a unit of work", async (t) => {
  const { engine, calls } = engineWith(new Set([7]));
  await engine.onCollectionUpdated(event({ collection_id: 7, kind: "unpublished", published: false }));
  t.deepEqual(calls, ["read 7", "unit", "setPublished 7 false", "addChange 7 unpublished"]);
  calls.length = 0;
  await engine.onCollectionUpdated(event({ collection_id: "x" }));
  t.deepEqual(calls, [], "an event without a collection id is dropped");
});

test("an idle pass: a read for windows and one for deliveries, no unit of work", async (t) => {
  const { engine, calls } = engineWith(new Set());
  t.deepEqual(await engine.pass(), { windowsClosed: 0, deliveriesCreated: 0, attemptsMade: 0 });
  t.deepEqual(calls, ["windows due?", "deliveries due?"]);
});

test("a pass with a window or a delivery due runs the unit of work that closes or claims", async (t) => {
  const windows = engineWith(new Set(), { windows: true });
  await windows.engine.pass();
  t.deepEqual(windows.calls, ["windows due?", "unit", "closeDueWindows", "deliveries due?"]);
  const deliveries = engineWith(new Set(), { deliveries: true });
  await deliveries.engine.pass();
  t.deepEqual(deliveries.calls, ["windows due?", "deliveries due?", "unit", "claimDue"]);
});
