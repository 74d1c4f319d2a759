/**
 * Stopping the all-in-one system on its embedded defaults: what the outboxes still hold is
 * published to every subscriber before any service's pool closes (with the in-process bus a
 * relay's publish runs the subscribers of every service, each with its own pool).
 */
import test from "ava";
import { randomUUID } from "node:crypto";
import { EVENTS, type BusEvent } from "@cms/platform";
import { startTestSystem } from "../helpers/system.js";

test("an event still in an outbox at the stop reaches every subscriber, those of services registered after its own included", async (t) => {
  const sys = await startTestSystem();
  let stopped = false;
  try {
    const owner = await sys.user();
    const { collection } = await sys.must(owner.token, { op: "collections.create", name: "Before the stop" });
    // Subscribed after the services: in-process subscribers run in order, so this one sees an
    // event only once the webhooks, media and social subscribers succeeded with it.
    const seen: BusEvent[] = [];
    await sys.system.subscribe("shutdown-test", EVENTS.collectionUpdated, async (e) => { seen.push(e); });
    await sys.must(owner.token, { op: "collections.update", collection_id: collection.id, name: "Changed" });
    await sys.system.drainEvents();
    const published = seen.at(-1);
    if (!published) return t.fail("collections.update published no collection.updated");

    // The same change again, written to the collections outbox directly and due in 3 s: no relay
    // pass takes it before the stop, and the stop's drain waits until it is due.
    const id = randomUUID();
    await sys.system.dbOf("collections")!.raw(
      "INSERT INTO outbox (id, type, payload, headers, next_attempt_at) VALUES (?, ?, ?::jsonb, '{}'::jsonb, now() + interval '3 seconds')",
      [id, published.type, JSON.stringify(published.payload)],
    );
    await sys.stop();
    stopped = true;
    t.true(seen.some((e) => e.id === id), "published at the stop, through every subscriber");
  } finally {
    if (!stopped) await sys.stop();
  }
});
