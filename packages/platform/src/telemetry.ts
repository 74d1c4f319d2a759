/**
 * OpenTelemetry: the SDK (exporters chosen by the standard OTEL_* variables; none configured
 * means spans are recorded for log correlation but not exported) and the Connect interceptors
 * that carry trace context across service calls, since no instrumentation for connect-es exists.
 */
import { context, propagation, trace, SpanKind, SpanStatusCode, type Tracer } from "@opentelemetry/api";
import type { Interceptor } from "@connectrpc/connect";
import { ConnectError } from "@connectrpc/connect";

let sdkStarted: { shutdown(): Promise<void> } | undefined;

export interface TelemetryConfig {
  /** OTEL_SDK_DISABLED=true */
  disabled: boolean;
  /** OTEL_SERVICE_NAME */
  serviceName?: string;
  /** Any of OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (read by the SDK itself). */
  exporterConfigured: boolean;
}

export async function startTelemetry(serviceName: string, cfg: TelemetryConfig): Promise<{ shutdown(): Promise<void> }> {
  if (sdkStarted) return sdkStarted;
  if (cfg.disabled) return { shutdown: async () => {} };
  const { NodeSDK } = await import("@opentelemetry/sdk-node");
  const exporterConfigured = cfg.exporterConfigured;
  const sdk = new NodeSDK({
    serviceName: cfg.serviceName || serviceName,
    instrumentations: [],
    // Without an exporter configured, keep spans in-process (ids in logs) and send nothing.
    ...(exporterConfigured ? {} : { spanProcessors: [] }),
  });
  sdk.start();
  sdkStarted = { shutdown: () => sdk.shutdown().catch(() => {}) };
  return sdkStarted;
}

export function tracer(): Tracer {
  return trace.getTracer("cms");
}

function rpcAttributes(service: string, method: string) {
  return { "rpc.system": "connect_rpc", "rpc.service": service, "rpc.method": method };
}

/** Client side: a CLIENT span per call, context injected into the request headers. */
export const clientTracing: Interceptor = (next) => async (req) => {
  const service = req.service.typeName;
  const method = req.method.name;
  return tracer().startActiveSpan(`${service}/${method}`, { kind: SpanKind.CLIENT, attributes: rpcAttributes(service, method) }, async (span) => {
    const carrier: Record<string, string> = {};
    propagation.inject(context.active(), carrier);
    for (const [k, v] of Object.entries(carrier)) req.header.set(k, v);
    try {
      return await next(req);
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: ConnectError.from(err).code.toString() });
      throw err;
    } finally {
      span.end();
    }
  });
};

/** Server side: a SERVER span per call, child of the caller's context from the headers. */
export const serverTracing: Interceptor = (next) => async (req) => {
  const carrier: Record<string, string> = {};
  req.header.forEach((v, k) => { carrier[k] = v; });
  const parent = propagation.extract(context.active(), carrier);
  const service = req.service.typeName;
  const method = req.method.name;
  return context.with(parent, () =>
    tracer().startActiveSpan(`${service}/${method}`, { kind: SpanKind.SERVER, attributes: rpcAttributes(service, method) }, async (span) => {
      try {
        return await next(req);
      } catch (err) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        throw err;
      } finally {
        span.end();
      }
    }),
  );
};
