/**
 * The delivery engine's consumer of collection.updated: a collection without a live webhook is
 * settled with one read and no transaction; one with a webhook gets its change recorded (and its
 * published state) inside a unit of work.
 */
import test from "ava";
import type { BusEvent, Logger, UnitOfWork } from "@cms/platform";
import { createDeliveryEngine } from "../src/app/delivery-engine.js";
import type { WebhooksStore } from "../src/store/webhooks-store.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } } as unknown as Logger;

function engineWith(hooks: Set<number>) {
  const calls: string[] = [];
  const inUnit = {
    async setPublished(id: number, published: boolean) { calls.push(`setPublished ${id} ${published}`); },
    async addChange(id: number, change: { kind: string }) { calls.push(`addChange ${id} ${change.kind}`); return hooks.has(id); },
  } as unknown as WebhooksStore;
  const uow = (async (work) => { calls.push("unit"); return work(inUnit, { async emit() {} }); }) as UnitOfWork<WebhooksStore>;
  const store = { async liveWebhook(id: number) { calls.push(`read ${id}`); return hooks.has(id) ? ({ id: "w" } as never) : undefined; } };
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
