/**
 * The gateway's JSON answers: every surface writes a success and the contract's error shape
 * (`{"error", "detail", ...extra fields}`) through these, so that a code means the same status
 * and body whichever route refused the request.
 */
import type { ServerResponse } from "node:http";
import { fromConnectError, type Logger } from "@cms/platform";
import { failureOutcome } from "../app/run-operation.js";

/** Seconds a client should wait before retrying a 503 (a service restarting, a lost database connection). */
export const UNAVAILABLE_RETRY_AFTER_S = 1;

/**
 * The headers every answer of `status` carries: a 408 (a body that stopped arriving) closes its
 * connection (RFC 9110 15.5.9), which the stalled rest of the body would otherwise hold open.
 */
export function statusHeaders(status: number): Record<string, string> {
  return status === 408 ? { connection: "close" } : {};
}

/** Writes a JSON body with its length; a 503 says when to retry (Retry-After), whichever route answers it. */
export function sendJson(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  const retry = status === 503 && !Object.keys(headers).some((h) => h.toLowerCase() === "retry-after") ? { "retry-after": String(UNAVAILABLE_RETRY_AFTER_S) } : {};
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body), ...retry, ...statusHeaders(status), ...headers });
  res.end(body);
}

/** Answers a failure with the contract's error, or cuts the connection when bytes already went out. */
export function sendError(res: ServerResponse, err: unknown, log: Logger): void {
  const out = failureOutcome(err, log);
  if (!res.headersSent) sendJson(res, out.status, out.body);
  else res.destroy();
}

/** The last resort of a route that threw past its own handling: 500 with the contract's shape. */
export function sendInternalError(res: ServerResponse, err: unknown): void {
  if (!res.headersSent) sendJson(res, 500, JSON.stringify(fromConnectError(err).toBody()));
}
