/**
 * Metrics of a running system, scraped from its Prometheus endpoint (METRICS_PORT): after a few
 * operations, an upload and a webhook delivery, every metric of the catalogue (METRICS) is
 * exported under the names prometheusNames() gives, which is what the dashboard in
 * deploy/observability is checked against (test/deploy/observability.test.ts). The NATS consumer
 * lag exists only with NATS (the real-backend run). Also: the endpoint is off unless asked for.
 */
import test from "ava";
import { METRICS, loadConfig, prometheusNames, type MetricDef } from "@cms/platform";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { startReceiver, type Receiver } from "../helpers/webhook-receiver.js";

let sys: TestSystem;
let r: Receiver;
test.before(async () => {
  r = await startReceiver();
  sys = await startTestSystem({ OTEL_SDK_DISABLED: "false", METRICS_PORT: "0", OUTBOUND_ALLOWED_HOSTS: "localhost", WEBHOOK_COALESCE_MS: "200" });
});
test.after.always(async () => {
  await sys?.stop();
  await r?.close();
});

/** Series of the scrape: metric name -> label sets. */
function parse(text: string): Map<string, Array<Record<string, string>>> {
  const out = new Map<string, Array<Record<string, string>>>();
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? /.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
    out.set(m[1]!, [...(out.get(m[1]!) ?? []), labels]);
  }
  return out;
}

test("the metrics endpoint is off unless METRICS_PORT is set", (t) => {
  t.is(loadConfig({}, []).telemetry.metricsPort, undefined);
  t.is(loadConfig({ METRICS_PORT: "9464" }, []).telemetry.metricsPort, 9464);
});

test("every metric of the catalogue is exported, with the labels it declares", async (t) => {
  t.timeout(90_000);
  t.truthy(sys.system.metricsUrl, "the system reports its metrics URL");
  const alice = await sys.user();
  await sys.must(alice.token, { op: "ping" });
  t.is((await sys.call(alice.token, { op: "no.such.op" })).status, 400);
  const { collection } = await sys.must(alice.token, { op: "collections.create", name: "Metered", share_access_level: "public" });
  await sys.must(alice.token, { op: "collections.publish", collection_id: collection.id, slug: `metered-${collection.id}` });
  await sys.must(alice.token, { op: "collections.webhook_set", collection_id: collection.id, url: r.url });
  await sys.must(alice.token, { op: "collections.update", collection_id: collection.id, name: "Metered again" });
  // Bytes through the gateway: an upload URL and its PUT.
  const grant = await sys.must(alice.token, { op: "media.get_upload_url", collection_id: collection.id, filename: "a.txt", content_type: "text/plain", content_length: 5 });
  const put = await fetch(grant.byte_upload_url ?? grant.upload_url, { method: "PUT", headers: { "content-type": "text/plain", "content-length": "5" }, body: "hello" });
  t.is(put.status, 200, await put.text());
  await sys.system.drainEvents();
  await r.waitFor(1, 30_000);

  const series = await (async () => {
    for (let i = 0; ; i++) {
      const s = parse(await (await fetch(sys.system.metricsUrl!)).text());
      // The delivery's outcome is recorded just after the receiver answered.
      if (s.has("cms_webhook_deliveries_total") || i > 100) return s;
      await new Promise((res) => setTimeout(res, 50));
    }
  })();
  const withNats = Boolean(sys.env.NATS_URL);
  for (const m of Object.values(METRICS) as MetricDef[]) {
    if (m === METRICS.consumerPending && !withNats) continue;
    for (const name of prometheusNames(m)) {
      const found = series.get(name);
      t.truthy(found, `${name} is exported`);
      if (!found) continue;
      for (const label of m.labels) t.true(found.some((l) => label in l), `${name} has the label ${label}`);
    }
  }
  const has = (name: string, labels: Record<string, string>) => (series.get(name) ?? []).some((l) => Object.entries(labels).every(([k, v]) => l[k] === v));
  t.true(has("cms_op_requests_total", { op: "ping", code: "ok" }));
  t.true(has("cms_op_requests_total", { op: "unknown", code: "invalid_request" }), "an unknown op counts under op=unknown");
  t.true(has("cms_rpc_server_requests_total", { rpc_method: "UpdateCollection", code: "ok" }));
  t.true(has("cms_outbound_requests_total", { peer: "webhook", operation: "POST", outcome: "2xx" }));
  t.true(has("cms_webhook_deliveries_total", { outcome: "delivered" }));
  t.true(has("cms_transfer_bytes_total", { direction: "in", route: "upload" }), JSON.stringify(series.get("cms_transfer_bytes_total")));
  t.true(has("cms_db_pool_max", { pool: "collections" }));
  t.true(has("cms_outbox_unpublished", { schema: "collections" }));
  t.true(has("cms_bus_consumed_total", { type: "collection.updated", outcome: "ok" }));
});
