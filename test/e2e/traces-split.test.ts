/**
 * Traces in split mode, exported over OTLP to a local receiver: one collections.update is one
 * trace from the gateway's `op collections.update` span through the collections service (its
 * SERVER span and PostgreSQL spans) to the event's PRODUCER span and its CONSUMER span in the
 * webhooks process; the webhook delivery that coalesces two updates links to both traces; and
 * the metrics reach the receiver over OTLP as well. Needs real backends (test/with-backends.ts).
 */
import test from "ava";
import { call, hookedCollection, mustCall, splitEnabled, startSplitSystem, type SplitSystem } from "../helpers/split.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";
import { eventually, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../helpers/otlp-receiver.js";

const SERVER = 2, PRODUCER = 4, CONSUMER = 5;

if (!splitEnabled) {
  test.skip("traces in split mode (skipped: needs DATABASE_URL and NATS_URL; run with npm run test:backends)", () => {});
} else {
  let sys: SplitSystem;
  let otlp: OtlpReceiver;
  let hooks: Receiver;
  test.before(async () => {
    otlp = await startOtlpReceiver();
    hooks = await startReceiver();
    sys = await startSplitSystem({
      env: {
        OTEL_SDK_DISABLED: "false",
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_BSP_SCHEDULE_DELAY: "100",
        OTEL_METRIC_EXPORT_INTERVAL: "500",
        OUTBOUND_ALLOWED_HOSTS: "localhost",
        WEBHOOK_COALESCE_MS: "1500",
      },
    });
  });
  test.after.always(async () => {
    await sys?.stop();
    await hooks?.close();
    await otlp?.close();
  });

  test("one collections.update is one trace: gateway, collections service, database, and the event's consumer in the webhooks process", async (t) => {
    t.timeout(120_000);
    const gw = sys.gateways[0]!;
    const alice = await sys.user("tracer");
    const id = await hookedCollection(mustCall(sys, gw, alice.token), hooks.url);

    // Two updates inside one coalescing window: one delivery carrying both.
    for (const name of ["Traced once", "Traced twice"]) {
      const res = await call(gw, alice.token, { op: "collections.update", collection_id: id, name });
      t.is(res.status, 200, JSON.stringify(res.body));
    }

    const updates = await eventually(() => {
      const ops = otlp.spans.filter((s) => s.name === "op collections.update");
      return ops.length === 2 ? ops : undefined;
    }, 30_000, "two `op collections.update` spans from the gateway");
    for (const op of updates) {
      t.is(op.service, "cms-gateway");
      t.is(op.kind, SERVER);
      t.is(op.attributes["cms.op"], "collections.update");
      t.is(op.attributes["enduser.id"], alice.userId);
      t.is(op.attributes["http.response.status_code"], 200);
      t.is(op.parentSpanId, "", "the op span is the trace's root");
    }

    const first = updates[0]!;
    const inTrace = (s: ReceivedSpan) => s.traceId === first.traceId;
    // Each process exports its spans in its own batches: the webhooks process may have sent its
    // consumer span before the collections process sent the producer span it continues from.
    const trace = await eventually(() => {
      const spans = otlp.spans.filter(inTrace);
      const consumer = spans.find((s) => s.service === "cms-webhooks" && s.kind === CONSUMER && s.name === "process collection.updated");
      const producer = spans.find((s) => s.service === "cms-collections" && s.kind === PRODUCER);
      return consumer && producer && spans.some((s) => s.service === "cms-webhooks" && s.parentSpanId === consumer.spanId) ? spans : undefined;
    }, 30_000, "the event's producer span in the collections process, and its consumer span (and its database work) in the webhooks process");
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const chain = (s: ReceivedSpan): string[] => (s.parentSpanId && byId.has(s.parentSpanId) ? [...chain(byId.get(s.parentSpanId)!), s.name] : [s.name]);

    const rpc = trace.find((s) => s.service === "cms-collections" && s.kind === SERVER && s.name === "collections.v1.CollectionsService/UpdateCollection");
    t.truthy(rpc, `collections' SERVER span in the trace; got ${trace.map((s) => `${s.service}:${s.name}`).join(", ")}`);
    const isPg = (s: ReceivedSpan) => s.attributes["db.system.name"] === "postgresql" || s.attributes["db.system"] === "postgresql";
    const db = trace.filter((s) => s.service === "cms-collections" && isPg(s));
    t.true(db.length > 0, "PostgreSQL spans of the collections service");
    t.true(db.some((s) => chain(s).includes(rpc!.name)), "under its SERVER span");
    const producer = trace.find((s) => s.service === "cms-collections" && s.kind === PRODUCER && s.name === "publish collection.updated");
    t.truthy(producer, "the relay's PRODUCER span in the same trace");
    const consumer = trace.find((s) => s.service === "cms-webhooks" && s.kind === CONSUMER)!;
    t.is(consumer.parentSpanId, producer!.spanId, "the consumer in another process continues from the producer");
    t.deepEqual(chain(consumer).slice(0, 2), ["op collections.update", "collections.v1.CollectionsService/UpdateCollection"]);
    t.true(new Set(trace.map((s) => s.service)).size >= 3, "gateway, collections and webhooks processes");

    // The delivery coalescing both updates links to both traces.
    await hooks.waitFor(1, 30_000);
    const delivery = await eventually(() => otlp.spans.find((s) => s.service === "cms-webhooks" && s.name === "webhook POST"), 30_000, "the delivery attempt's span");
    const linked = new Set(delivery.links.map((l) => l.traceId));
    for (const op of updates) t.true(linked.has(op.traceId), `the delivery links to the trace of update ${op.traceId}`);
    t.is(delivery.attributes["http.response.status_code"], 200);

    // Metrics travel over OTLP too.
    const gatewayMetrics = await eventually(() => {
      const names = otlp.metrics.get("cms-gateway");
      return names?.has("cms_op_requests") && names.has("cms_rpc_client_requests") ? names : undefined;
    }, 30_000, "the gateway's metrics over OTLP");
    t.true(gatewayMetrics.has("cms_op_duration_seconds"));
    const webhookMetrics = await eventually(() => (otlp.metrics.get("cms-webhooks")?.has("cms_webhook_deliveries") ? otlp.metrics.get("cms-webhooks") : undefined), 30_000, "webhook delivery outcomes over OTLP");
    t.true(webhookMetrics.has("cms_bus_consumer_pending"), "NATS consumer lag is reported");
  });
}
