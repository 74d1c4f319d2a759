/**
 * The metrics every process exports, declared once: the catalogue below is what the instruments
 * are made from, what the Prometheus names are derived from, and what the dashboard in
 * deploy/observability is checked against. Recording goes through the functions here, never
 * through instruments made elsewhere, so no metric exists that the catalogue does not list.
 *
 * Names are already Prometheus-shaped (snake case, unit in the name) so that the OpenTelemetry
 * name and the scraped name differ only by the `_total` of counters. Instruments exist only
 * once telemetry started with a metric reader (METRICS_PORT or OTLP); before that, and with
 * OTEL_SDK_DISABLED, every recording is a no-op.
 */
import type { Attributes, Meter, Counter, Histogram, ObservableGauge, ObservableResult } from "@opentelemetry/api";
import type { Knex } from "knex";

export type MetricType = "counter" | "histogram" | "gauge";

export interface MetricDef {
  name: string;
  type: MetricType;
  unit: string;
  help: string;
  labels: readonly string[];
}

/** Latency buckets (seconds) shared by every duration histogram: 1 ms to 60 s. */
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

const def = (name: string, type: MetricType, unit: string, labels: readonly string[], help: string): MetricDef => ({ name, type, unit, labels, help });

/** Every metric this system exports. */
export const METRICS = {
  opRequests: def("cms_op_requests", "counter", "{request}", ["op", "code"], "Operations answered by the gateway's op endpoint, by operation and outcome code (ok or the contract's error code)."),
  opDuration: def("cms_op_duration_seconds", "histogram", "s", ["op"], "Time from an op request's arrival to its answer, by operation."),
  rpcServerRequests: def("cms_rpc_server_requests", "counter", "{request}", ["rpc_service", "rpc_method", "code"], "Connect/gRPC calls a service handled, by method and Connect code."),
  rpcServerDuration: def("cms_rpc_server_duration_seconds", "histogram", "s", ["rpc_service", "rpc_method"], "Time a service took to handle a call."),
  rpcClientRequests: def("cms_rpc_client_requests", "counter", "{request}", ["rpc_service", "rpc_method", "code"], "Connect/gRPC calls this process made to a service, by method and Connect code."),
  rpcClientDuration: def("cms_rpc_client_duration_seconds", "histogram", "s", ["rpc_service", "rpc_method"], "Time a call to a service took, as its caller saw it."),
  outboundRequests: def("cms_outbound_requests", "counter", "{request}", ["peer", "operation", "outcome"], "Calls leaving the system (URL fetches, webhook attempts, object store), by peer, operation and outcome (HTTP status class or failure)."),
  outboundDuration: def("cms_outbound_duration_seconds", "histogram", "s", ["peer", "operation"], "Time an outbound call took until its answer's headers."),
  outboxUnpublished: def("cms_outbox_unpublished", "gauge", "{event}", ["schema"], "Events written to a service's outbox and not yet published."),
  outboxLag: def("cms_outbox_lag_seconds", "gauge", "s", ["schema"], "Age of the oldest unpublished event of a service's outbox (0 when empty)."),
  outboxPublished: def("cms_outbox_published", "counter", "{event}", ["schema", "type"], "Events the outbox relay published."),
  consumerPending: def("cms_bus_consumer_pending", "gauge", "{message}", ["subscription"], "NATS JetStream consumer lag: messages of a durable subscription not yet delivered or not yet acknowledged."),
  consumed: def("cms_bus_consumed", "counter", "{event}", ["subscription", "type", "outcome"], "Events handled by a subscription, by outcome (ok, error: redelivered later)."),
  consumeDuration: def("cms_bus_handler_duration_seconds", "histogram", "s", ["subscription", "type"], "Time a subscription's handler took for one event."),
  webhookDeliveries: def("cms_webhook_deliveries", "counter", "{attempt}", ["outcome"], "Webhook delivery attempts by outcome: delivered, retry (will be tried again) or failed (given up)."),
  transferBytes: def("cms_transfer_bytes", "counter", "By", ["direction", "route"], "Bytes through the gateway's HTTP surfaces: in (uploaded) and out (downloaded), by route."),
  dbPoolConnections: def("cms_db_pool_connections", "gauge", "{connection}", ["pool", "state"], "Database pool connections by state: used, free, and pending (callers waiting for one)."),
  dbPoolMax: def("cms_db_pool_max", "gauge", "{connection}", ["pool"], "Largest size of a database pool (saturation = used / max)."),
} as const satisfies Record<string, MetricDef>;

/** The names a Prometheus scrape shows for a metric (counters gain `_total`, histograms their series). */
export function prometheusNames(m: MetricDef): string[] {
  if (m.type === "counter") return [`${m.name}_total`];
  if (m.type === "histogram") return [`${m.name}_bucket`, `${m.name}_sum`, `${m.name}_count`];
  return [m.name];
}

type Instruments = {
  counters: Map<string, Counter>;
  histograms: Map<string, Histogram>;
  gauges: ObservableGauge[];
};

let instruments: Instruments | undefined;

// What observable gauges read at collection time; registered by the launcher and the bus, also
// before instruments exist (recording starts once they do).
const outboxes = new Map<string, () => Promise<{ unpublished: number; lagSeconds: number }>>();
const consumers = new Map<string, () => Promise<number>>();
const pools = new Map<string, Knex>();

function register<T>(map: Map<string, T>, key: string, value: T): () => void {
  map.set(key, value);
  return () => { if (map.get(key) === value) map.delete(key); };
}

/** The outbox of a schema, read at collection time. Returns the unregistration. */
export function observeOutbox(schema: string, read: () => Promise<{ unpublished: number; lagSeconds: number }>): () => void {
  return register(outboxes, schema, read);
}

/** A durable subscription's pending count, read at collection time. Returns the unregistration. */
export function observeConsumer(subscription: string, read: () => Promise<number>): () => void {
  return register(consumers, subscription, read);
}

/** A knex instance whose pool is reported. Returns the unregistration. */
export function observePool(name: string, db: Knex): () => void {
  return register(pools, name, db);
}

interface TarnPool { numUsed(): number; numFree(): number; numPendingAcquires(): number; max: number }

/** Makes the instruments from a meter (telemetry.ts calls it once a meter provider is registered). */
export function initMetrics(meter: Meter): void {
  const counters = new Map<string, Counter>();
  const histograms = new Map<string, Histogram>();
  const gauges: ObservableGauge[] = [];
  const gaugeOf = (m: MetricDef, collect: (result: ObservableResult) => Promise<void> | void) => {
    const g = meter.createObservableGauge(m.name, { description: m.help, unit: m.unit });
    g.addCallback(collect);
    gauges.push(g);
  };
  for (const m of Object.values(METRICS) as MetricDef[]) {
    if (m.type === "counter") counters.set(m.name, meter.createCounter(m.name, { description: m.help, unit: m.unit }));
    if (m.type === "histogram") histograms.set(m.name, meter.createHistogram(m.name, { description: m.help, unit: m.unit, advice: { explicitBucketBoundaries: DURATION_BUCKETS } }));
  }
  // Gauges read their sources concurrently; a source that fails is skipped for this collection.
  const settle = async <T>(entries: Array<[string, () => Promise<T>]>, each: (key: string, value: T) => void) => {
    const results = await Promise.allSettled(entries.map(async ([k, read]) => [k, await read()] as const));
    for (const r of results) if (r.status === "fulfilled") each(r.value[0], r.value[1]);
  };
  // Both outbox gauges come from one query per outbox per collection (kept for a second).
  let outboxRead: { at: number; values: Promise<Map<string, { unpublished: number; lagSeconds: number }>> } | undefined;
  const readOutboxes = () => {
    if (!outboxRead || Date.now() - outboxRead.at > 1000) {
      const values = new Map<string, { unpublished: number; lagSeconds: number }>();
      outboxRead = { at: Date.now(), values: settle([...outboxes], (k, v) => values.set(k, v)).then(() => values) };
    }
    return outboxRead.values;
  };
  gaugeOf(METRICS.outboxUnpublished, async (r) => {
    for (const [schema, v] of await readOutboxes()) r.observe(v.unpublished, { schema });
  });
  gaugeOf(METRICS.outboxLag, async (r) => {
    for (const [schema, v] of await readOutboxes()) r.observe(v.lagSeconds, { schema });
  });
  gaugeOf(METRICS.consumerPending, (r) => settle([...consumers], (subscription, n) => r.observe(n, { subscription })));
  gaugeOf(METRICS.dbPoolConnections, (r) => {
    for (const [pool, db] of pools) {
      const p = (db.client as { pool?: TarnPool }).pool;
      if (!p) continue;
      r.observe(p.numUsed(), { pool, state: "used" });
      r.observe(p.numFree(), { pool, state: "free" });
      r.observe(p.numPendingAcquires(), { pool, state: "pending" });
    }
  });
  gaugeOf(METRICS.dbPoolMax, (r) => {
    for (const [pool, db] of pools) {
      const p = (db.client as { pool?: TarnPool }).pool;
      if (p) r.observe(p.max, { pool });
    }
  });
  instruments = { counters, histograms, gauges };
}

/** Forgets the instruments (telemetry shut down). */
export function resetMetrics(): void {
  instruments = undefined;
}

function add(m: MetricDef, value: number, attrs: Attributes): void {
  instruments?.counters.get(m.name)!.add(value, attrs);
}

function record(m: MetricDef, value: number, attrs: Attributes): void {
  instruments?.histograms.get(m.name)!.record(value, attrs);
}

/** Seconds since a performance.now() reading. */
export function secondsSince(start: number): number {
  return (performance.now() - start) / 1000;
}

/** One answered operation at the gateway. */
export function recordOp(op: string, code: string, seconds: number): void {
  add(METRICS.opRequests, 1, { op, code });
  record(METRICS.opDuration, seconds, { op });
}

/** One Connect call, handled (server) or made (client). */
export function recordRpc(side: "server" | "client", service: string, method: string, code: string, seconds: number): void {
  const attrs = { rpc_service: service, rpc_method: method };
  add(side === "server" ? METRICS.rpcServerRequests : METRICS.rpcClientRequests, 1, { ...attrs, code });
  record(side === "server" ? METRICS.rpcServerDuration : METRICS.rpcClientDuration, seconds, attrs);
}

/** One call leaving the system; outcome is an HTTP status class ("2xx") or a failure name. */
export function recordOutbound(peer: string, operation: string, outcome: string, seconds: number): void {
  add(METRICS.outboundRequests, 1, { peer, operation, outcome });
  record(METRICS.outboundDuration, seconds, { peer, operation });
}

/** "2xx" for 204, and so on. */
export function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`;
}

export function recordPublished(schema: string, type: string): void {
  add(METRICS.outboxPublished, 1, { schema, type });
}

export function recordConsumed(subscription: string, type: string, outcome: "ok" | "error", seconds: number): void {
  add(METRICS.consumed, 1, { subscription, type, outcome });
  record(METRICS.consumeDuration, seconds, { subscription, type });
}

export function recordWebhookDelivery(outcome: "delivered" | "retry" | "failed"): void {
  add(METRICS.webhookDeliveries, 1, { outcome });
}

export function recordTransfer(direction: "in" | "out", route: string, bytes: number): void {
  if (bytes > 0) add(METRICS.transferBytes, bytes, { direction, route });
}
