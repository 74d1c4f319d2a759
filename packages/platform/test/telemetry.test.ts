/**
 * Telemetry in one process: with the SDK on and no exporter, spans are not recorded but still get
 * real ids, and every log line inside one carries them (never the all-zero ids of the API's no-op
 * spans); outside a span a line carries none. PostgreSQL's queries are wrapped in spans only when
 * an exporter is configured (checked in a process of its own: an instrumentation hooks require). Metrics recorded through the catalogue show on the Prometheus
 * endpoint under the names prometheusNames() gives.
 */
import test from "ava";
import { execFile } from "node:child_process";
import { Writable } from "node:stream";
import { isSpanContextValid } from "@opentelemetry/api";
import { createLogger, startTelemetry, tracer, recordOp, recordTransfer, METRICS, prometheusNames, type Telemetry } from "@cms/platform";
import { besideModule, nodeArgsOf } from "../../../test/helpers/paths.ts";

const PG_FIXTURE = besideModule(import.meta.url, "./fixtures/pg-under-telemetry.ts");

let telemetry: Telemetry;
test.before(async () => {
  telemetry = await startTelemetry("cms-test", {
    disabled: false, exporterConfigured: false, metricsPort: 0, metricsHost: "127.0.0.1",
    otlpMetrics: false, otlpMetricsProtocol: "http/protobuf", metricExportIntervalMs: 60_000,
  });
});
test.after.always(() => telemetry.shutdown());

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({ write(chunk, _enc, cb) { lines.push(JSON.parse(String(chunk))); cb(); } });
  return { lines, sink };
}

test("without an exporter a span is not recorded, and log lines inside it carry its real trace and span ids; outside, none", (t) => {
  const { lines, sink } = capture();
  const probe = createLogger("info", {}, sink);
  probe.info("outside");
  tracer().startActiveSpan("work", (span) => {
    probe.info("inside");
    const ctx = span.spanContext();
    t.true(isSpanContextValid(ctx), "real ids, not the no-op span's zeros");
    t.false(span.isRecording(), "nothing would read what a recorded span holds");
    t.is(lines[1]!.trace_id, ctx.traceId);
    t.is(lines[1]!.span_id, ctx.spanId);
    span.end();
  });
  t.false("trace_id" in lines[0]!);
  t.notRegex(String(lines[1]!.trace_id), /^0+$/);
});

test("recorded metrics are served on /metrics under their Prometheus names", async (t) => {
  t.truthy(telemetry.metricsUrl);
  recordOp("ping", "ok", 0.002);
  recordOp("collections.get", "not_found", 0.004);
  recordTransfer("in", "upload", 1234);
  const text = await (await fetch(telemetry.metricsUrl!)).text();
  for (const name of prometheusNames(METRICS.opRequests)) t.regex(text, new RegExp(`^${name}\\{[^}]*op="ping"`, "m"));
  t.regex(text, /^cms_op_requests_total\{[^}]*code="not_found"[^}]*op="collections.get"|^cms_op_requests_total\{[^}]*op="collections.get"[^}]*code="not_found"/m);
  for (const name of prometheusNames(METRICS.opDuration)) t.regex(text, new RegExp(`^${name}\\{`, "m"));
  t.regex(text, /^cms_transfer_bytes_total\{[^}]*direction="in"[^}]*\} 1234/m);
  t.is((await fetch(telemetry.metricsUrl!.replace(/\/metrics$/, "/other"))).status, 404);
});

/** The fixture's report: pg's query wrapped by the instrumentation, and a span recorded. */
const underTelemetry = (mode: "exporter" | "none") => new Promise<{ pgWrapped: boolean; recording: boolean }>((resolve, reject) => {
  execFile(process.execPath, [...nodeArgsOf(PG_FIXTURE), mode], { timeout: 30_000 }, (err, stdout, stderr) => {
    if (err) reject(new Error(`${err.message}\n${stderr}`));
    else resolve(JSON.parse(stdout.split("\n")[0]!) as { pgWrapped: boolean; recording: boolean });
  });
});

test("PostgreSQL's queries get spans, and spans are recorded, only when an exporter is configured", async (t) => {
  t.deepEqual(await underTelemetry("none"), { pgWrapped: false, recording: false });
  t.deepEqual(await underTelemetry("exporter"), { pgWrapped: true, recording: true });
});
