/** Structured JSON logs (pino) that carry the active trace and span ids. */
import { pino, type DestinationStream, type Logger } from "pino";
import { isSpanContextValid, trace } from "@opentelemetry/api";

export type { Logger };

/** `toStderr` keeps stdout free for a command's own output (the admin CLI); a stream receives the lines instead (tests). */
export function createLogger(level: string, base: Record<string, unknown> = {}, toStderr: boolean | DestinationStream = false): Logger {
  return pino({
    level,
    base: { ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    mixin() {
      const ctx = trace.getActiveSpan()?.spanContext();
      // A non-recording span (telemetry off) has all-zero ids: better none than those.
      if (!ctx || !isSpanContextValid(ctx)) return {};
      return { trace_id: ctx.traceId, span_id: ctx.spanId };
    },
  }, typeof toStderr === "object" ? toStderr : toStderr ? pino.destination(2) : undefined);
}
