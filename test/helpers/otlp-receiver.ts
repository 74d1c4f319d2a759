/**
 * A local OTLP/HTTP receiver for tests: processes export to it with
 * OTEL_EXPORTER_OTLP_ENDPOINT=<url> and OTEL_EXPORTER_OTLP_PROTOCOL=http/json, and the test reads
 * the spans and metric names it received.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string }>;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Metric names received, by service. */
  metrics: Map<string, Set<string>>;
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
const valueOf = (v: AnyValue) => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.boolValue ?? v.doubleValue);
const attrs = (list: Array<{ key: string; value: AnyValue }> = []) => Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const metrics = new Map<string, Set<string>>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
        if (req.url === "/v1/traces") {
          for (const rs of body.resourceSpans ?? []) {
            const service = String(attrs(rs.resource?.attributes)["service.name"]);
            for (const ss of rs.scopeSpans ?? []) {
              for (const s of ss.spans ?? []) {
                spans.push({
                  service, traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId ?? "", name: s.name, kind: s.kind,
                  attributes: attrs(s.attributes), links: (s.links ?? []).map((l: { traceId: string; spanId: string }) => ({ traceId: l.traceId, spanId: l.spanId })),
                });
              }
            }
          }
        } else if (req.url === "/v1/metrics") {
          for (const rm of body.resourceMetrics ?? []) {
            const service = String(attrs(rm.resource?.attributes)["service.name"]);
            const set = metrics.get(service) ?? new Set<string>();
            for (const sm of rm.scopeMetrics ?? []) for (const m of sm.metrics ?? []) set.add(m.name);
            metrics.set(service, set);
          }
        }
        res.writeHead(200, { "content-type": "application/json" });
        res.end("{}");
      } catch {
        res.writeHead(400);
        res.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    metrics,
    close: () => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections(); }),
  };
}

/** Polls `check` until it returns a value (not undefined) or the deadline passes. */
export async function eventually<T>(check: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
