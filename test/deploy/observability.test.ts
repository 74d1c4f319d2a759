/**
 * deploy/observability: every metric the Grafana dashboard queries is one the processes export
 * (the catalogue METRICS, whose export test/e2e/metrics.test.ts proves on a running system),
 * every label it groups or filters by is one that metric carries, the dashboard shows the views
 * platform teams asked for, and the ServiceMonitor scrapes a port every Service of the system has.
 */
import test from "ava";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { METRICS, prometheusNames, type MetricDef } from "@cms/platform";
import { kustomizeCommand, renderOverlays, type K8sObject } from "../helpers/manifests.js";
import { ROOT } from "../helpers/paths.js";

const dashboard = JSON.parse(readFileSync(join(ROOT, "deploy", "observability", "grafana-dashboard.json"), "utf8"));
const panels: Array<{ title: string; targets?: Array<{ expr: string }> }> = dashboard.panels;
const exprs = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

/** Exported series name -> the metric it belongs to. */
const exported = new Map<string, MetricDef>();
for (const m of Object.values(METRICS) as MetricDef[]) for (const n of prometheusNames(m)) exported.set(n, m);

test("every metric the dashboard queries is exported", (t) => {
  t.true(exprs.length >= 15);
  for (const { panel, expr } of exprs) {
    const names = [...expr.matchAll(/\b(cms_[a-z0-9_]+)\b/g)].map((m) => m[1]!);
    t.true(names.length > 0, `${panel}: queries a cms metric`);
    for (const n of names) t.true(exported.has(n), `${panel}: ${n} is not a metric the service exports`);
  }
});

test("every label the dashboard filters or groups by is one its metric carries", (t) => {
  for (const { panel, expr } of exprs) {
    for (const m of expr.matchAll(/\b(cms_[a-z0-9_]+)\{([^}]*)\}/g)) {
      const def = exported.get(m[1]!)!;
      for (const l of m[2]!.matchAll(/(\w+)\s*(?:=|!=|=~|!~)/g)) t.true(def.labels.includes(l[1]!), `${panel}: ${m[1]} has no label ${l[1]}`);
    }
    for (const by of expr.matchAll(/by \(([^)]*)\)/g)) {
      const names = [...expr.matchAll(/\b(cms_[a-z0-9_]+)\b/g)].map((x) => exported.get(x[1]!)!);
      for (const label of by[1]!.split(",").map((s) => s.trim()).filter((s) => s && s !== "le")) {
        t.true(names.some((d) => d.labels.includes(label)), `${panel}: no queried metric has the label ${label}`);
      }
    }
  }
});

test("the dashboard has the RED view per op, p95 per op, errors by code, outbox and consumer lag, webhook success rate", (t) => {
  const has = (re: RegExp) => exprs.some(({ expr }) => re.test(expr));
  t.true(has(/sum by \(op\) \(rate\(cms_op_requests_total/), "requests per op");
  t.true(has(/histogram_quantile\(0\.95, sum by \(op, le\) \(rate\(cms_op_duration_seconds_bucket/), "p95 per op");
  t.true(has(/sum by \(code\) \(rate\(cms_op_requests_total\{code!="ok"\}/), "errors by code");
  t.true(has(/cms_outbox_lag_seconds/) && has(/cms_outbox_unpublished/), "outbox lag and backlog");
  t.true(has(/cms_bus_consumer_pending/), "consumer lag");
  t.true(has(/cms_webhook_deliveries_total\{outcome="delivered"\}.*\/.*cms_webhook_deliveries_total/), "webhook success rate");
  t.is(dashboard.templating.list[0].type, "datasource", "the Prometheus data source is a variable");
});

const it = kustomizeCommand() || process.env.CI ? test : test.skip;
it("the ServiceMonitor scrapes the metrics port of every Service of the system", (t) => {
  const sm = parseYaml(readFileSync(join(ROOT, "deploy", "observability", "servicemonitor.yaml"), "utf8")) as K8sObject;
  t.is(sm.apiVersion, "monitoring.coreos.com/v1");
  t.is(sm.kind, "ServiceMonitor");
  const { base } = renderOverlays();
  const config = base.find((o) => o.kind === "ConfigMap")!;
  const selected = base.filter((o) => o.kind === "Service" && Object.entries(sm.spec.selector.matchLabels).every(([k, v]) => o.metadata.labels?.[k] === v));
  t.deepEqual(selected.map((s) => s.metadata.name).sort(), ["auth", "collections", "gateway", "media", "social", "webhooks"]);
  for (const endpoint of sm.spec.endpoints) {
    t.is(endpoint.path, "/metrics");
    for (const s of selected) {
      const port = s.spec.ports.find((p: { name: string }) => p.name === endpoint.port);
      t.truthy(port, `Service ${s.metadata.name} has the port ${endpoint.port}`);
      t.is(port?.port, Number(config.data.METRICS_PORT), "the port METRICS_PORT opens");
    }
  }
});
