/**
 * OpenTelemetry: the SDK (trace exporters chosen by the standard OTEL_* variables; PostgreSQL
 * spans from @opentelemetry/instrumentation-pg; metrics on a Prometheus endpoint when
 * METRICS_PORT is set and over OTLP when an OTLP endpoint is), the Connect interceptors that
 * carry trace context across service calls and count them (no instrumentation for connect-es
 * exists), and the span helper of calls leaving the system.
 *
 * Without a trace exporter no span is recorded: the SDK's tracer still gives every span real ids
 * (what the logs carry and what travels to the other services in traceparent; a process with no
 * tracer provider would log the all-zero ids of the API's no-op spans), but nothing would ever
 * read what a recorded span holds, and recording it was a sixth of node's CPU a collections.get
 * (bench/notes/overhead.md, stop 42). PostgreSQL's spans are left out then for the same reason.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { ROOT_CONTEXT, context, isSpanContextValid, metrics, propagation, trace, SpanKind, SpanStatusCode, type Attributes, type Link, type Span, type Tracer } from "@opentelemetry/api";
import type { Interceptor } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { initMetrics, recordOutbound, recordRpc, resetMetrics, secondsSince, statusClass } from "./metrics.js";

export interface TelemetryConfig {
  /** OTEL_SDK_DISABLED=true */
  disabled: boolean;
  /** OTEL_SERVICE_NAME */
  serviceName?: string;
  /** Any of OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (read by the SDK itself). */
  exporterConfigured: boolean;
  /** METRICS_PORT: the Prometheus endpoint's port (0 picks one); unset: no endpoint. */
  metricsPort?: number;
  /** Address the Prometheus endpoint binds (HOST). */
  metricsHost: string;
  /** OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT set, or OTEL_METRICS_EXPORTER=otlp. */
  otlpMetrics: boolean;
  /** OTEL_EXPORTER_OTLP_METRICS_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (default), http/json or grpc. */
  otlpMetricsProtocol: string;
  /** OTEL_METRIC_EXPORT_INTERVAL (ms). */
  metricExportIntervalMs: number;
}

export interface Telemetry {
  /** The Prometheus endpoint, when METRICS_PORT asked for one. */
  metricsUrl?: string;
  shutdown(): Promise<void>;
}

/** One SDK per process, shared by every system a process starts (tests start several). */
let shared: { telemetry: Telemetry; users: number; stop(): Promise<void> } | undefined;

/** A span processor that keeps nothing: set without an exporter, or the SDK would make its default OTLP one. */
const nothingKept = { onStart() {}, onEnd() {}, forceFlush: async () => {}, shutdown: async () => {} };

async function otlpMetricExporter(protocol: string) {
  if (protocol === "grpc") return new (await import("@opentelemetry/exporter-metrics-otlp-grpc")).OTLPMetricExporter();
  if (protocol === "http/json") return new (await import("@opentelemetry/exporter-metrics-otlp-http")).OTLPMetricExporter();
  return new (await import("@opentelemetry/exporter-metrics-otlp-proto")).OTLPMetricExporter();
}

export async function startTelemetry(serviceName: string, cfg: TelemetryConfig): Promise<Telemetry> {
  if (cfg.disabled) return { shutdown: async () => {} };
  if (shared) {
    shared.users++;
    return shared.telemetry;
  }
  const { NodeSDK, metrics: sdkMetrics, tracing } = await import("@opentelemetry/sdk-node");
  const { PrometheusExporter } = await import("@opentelemetry/exporter-prometheus");

  const readers = [];
  let prometheus: InstanceType<typeof PrometheusExporter> | undefined;
  if (cfg.metricsPort !== undefined) {
    prometheus = new PrometheusExporter({ preventServerStart: true });
    readers.push(prometheus);
  }
  if (cfg.otlpMetrics) {
    readers.push(new sdkMetrics.PeriodicExportingMetricReader({ exporter: await otlpMetricExporter(cfg.otlpMetricsProtocol), exportIntervalMillis: cfg.metricExportIntervalMs }));
  }
  const sdk = new NodeSDK({
    serviceName: cfg.serviceName || serviceName,
    ...(cfg.exporterConfigured
      // Queries outside any request (relay polls, readiness checks) make no root spans.
      ? { instrumentations: [new (await import("@opentelemetry/instrumentation-pg")).PgInstrumentation({ requireParentSpan: true })] }
      // Never recorded: each span is only its ids (a non-recording span of the SDK's tracer).
      : { instrumentations: [], spanProcessors: [nothingKept], sampler: new tracing.AlwaysOffSampler() }),
    // Set explicitly: the SDK's defaults would push metrics and logs to an OTLP collector on localhost.
    metricReaders: readers,
    logRecordProcessors: [],
  });
  sdk.start();
  if (readers.length) initMetrics(metrics.getMeter("cms"));

  let server: http.Server | undefined;
  let metricsUrl: string | undefined;
  if (prometheus) {
    const exporter = prometheus;
    server = http.createServer((req, res) => {
      if (req.method === "GET" && req.url?.split("?")[0] === "/metrics") { exporter.getMetricsRequestHandler(req, res); return; }
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("metrics are at /metrics\n");
    });
    await new Promise<void>((resolve, reject) => {
      server!.once("error", reject);
      server!.listen(cfg.metricsPort, cfg.metricsHost, () => resolve());
    });
    const addr = server.address() as AddressInfo;
    metricsUrl = `http://${addr.family === "IPv6" ? `[${addr.address}]` : addr.address}:${addr.port}/metrics`;
  }

  const entry = {
    users: 1,
    telemetry: {
      metricsUrl,
      async shutdown() {
        if (!shared || --shared.users > 0) return;
        const s = shared;
        shared = undefined;
        await s.stop();
      },
    },
    async stop() {
      resetMetrics();
      if (server) await new Promise<void>((resolve) => { server!.close(() => resolve()); server!.closeAllConnections(); });
      await sdk.shutdown().catch(() => {});
    },
  };
  shared = entry;
  return entry.telemetry;
}

export function tracer(): Tracer {
  return trace.getTracer("cms");
}

/** "not_found" for Code.NotFound: the Connect code of a failure, as metrics label it. */
export function connectCode(err: unknown): string {
  if (err === undefined) return "ok";
  return Code[ConnectError.from(err).code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

function rpcAttributes(service: string, method: string) {
  return { "rpc.system": "connect_rpc", "rpc.service": service, "rpc.method": method };
}

/** Client side: a CLIENT span per call, context injected into the request headers, and the call counted. */
export const clientTracing: Interceptor = (next) => async (req) => {
  const service = req.service.typeName;
  const method = req.method.name;
  const started = performance.now();
  return tracer().startActiveSpan(`${service}/${method}`, { kind: SpanKind.CLIENT, attributes: rpcAttributes(service, method) }, async (span) => {
    const carrier: Record<string, string> = {};
    propagation.inject(context.active(), carrier);
    for (const [k, v] of Object.entries(carrier)) req.header.set(k, v);
    let failure: unknown;
    try {
      return await next(req);
    } catch (err) {
      failure = err;
      span.setStatus({ code: SpanStatusCode.ERROR, message: connectCode(err) });
      throw err;
    } finally {
      span.end();
      recordRpc("client", service, method, connectCode(failure), secondsSince(started));
    }
  });
};

/** Server side: a SERVER span per call, child of the caller's context from the headers, and the call counted. */
export const serverTracing: Interceptor = (next) => async (req) => {
  const carrier: Record<string, string> = {};
  req.header.forEach((v, k) => { carrier[k] = v; });
  const parent = propagation.extract(context.active(), carrier);
  const service = req.service.typeName;
  const method = req.method.name;
  const started = performance.now();
  return context.with(parent, () =>
    tracer().startActiveSpan(`${service}/${method}`, { kind: SpanKind.SERVER, attributes: rpcAttributes(service, method) }, async (span) => {
      let failure: unknown;
      try {
        return await next(req);
      } catch (err) {
        failure = err;
        const code = connectCode(err);
        span.setAttribute("rpc.connect_rpc.error_code", code);
        span.setStatus({ code: SpanStatusCode.ERROR, message: code });
        throw err;
      } finally {
        span.end();
        recordRpc("server", service, method, connectCode(failure), secondsSince(started));
      }
    }),
  );
};

/** What an outbound call ended with: an HTTP status, or the failure's name. */
export type OutboundOutcome = { status: number } | { failure: string };

/**
 * A call leaving the system (a URL fetch, a webhook attempt, an object store request): a CLIENT
 * span around it and the call counted by peer, operation and outcome. `outcomeOf` reads the
 * outcome of a result; a thrown error counts as `failureOf(err)`.
 */
export async function traceOutbound<T>(
  peer: string,
  operation: string,
  opts: { attributes?: Attributes; links?: Link[]; outcomeOf: (result: T) => OutboundOutcome; failureOf?: (err: unknown) => string },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const started = performance.now();
  return tracer().startActiveSpan(`${peer} ${operation}`, { kind: SpanKind.CLIENT, attributes: { "cms.peer": peer, ...opts.attributes }, links: opts.links }, async (span) => {
    let outcome: OutboundOutcome = { failure: "error" };
    try {
      const result = await fn(span);
      outcome = opts.outcomeOf(result);
      return result;
    } catch (err) {
      outcome = { failure: opts.failureOf?.(err) ?? "error" };
      throw err;
    } finally {
      if ("status" in outcome) {
        span.setAttribute("http.response.status_code", outcome.status);
        if (outcome.status >= 400) span.setStatus({ code: SpanStatusCode.ERROR, message: String(outcome.status) });
      } else {
        span.setAttribute("error.type", outcome.failure);
        span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.failure });
      }
      span.end();
      recordOutbound(peer, operation, "status" in outcome ? statusClass(outcome.status) : outcome.failure, secondsSince(started));
    }
  });
}

/** The active span's W3C traceparent (kept with work that continues later, outside the request). */
export function currentTraceparent(): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** A span link to the span a stored traceparent names (undefined when it is not a valid one). */
export function linkTo(traceparent: string): Link | undefined {
  const spanContext = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, { traceparent }));
  return spanContext && isSpanContextValid(spanContext) ? { context: spanContext } : undefined;
}
