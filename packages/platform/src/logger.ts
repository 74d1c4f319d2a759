/** Structured JSON logs (pino) that carry the active trace and span ids. */
import { pino, type Logger } from "pino";
import { trace } from "@opentelemetry/api";

export type { Logger };

/** `toStderr` keeps stdout free for a command's own output (the admin CLI). */
export function createLogger(level: string, base: Record<string, unknown> = {}, toStderr = false): Logger {
  return pino({
    level,
    base: { ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    mixin() {
      const span = trace.getActiveSpan();
      if (!span) return {};
      const ctx = span.spanContext();
      return { trace_id: ctx.traceId, span_id: ctx.spanId };
    },
  }, toStderr ? pino.destination(2) : undefined);
}
