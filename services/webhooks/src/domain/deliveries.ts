/**
 * The rules of delivering: what a window of changes becomes, whether it is delivered at all,
 * what one attempt's outcome means, when the next attempt is due, and when a webhook disables.
 */

/** Attempts per delivery (the contract: four, with three backoff delays between them). */
export const MAX_ATTEMPTS = 4;
/** Consecutive failed deliveries that disable a webhook. */
export const DISABLE_AFTER_FAILURES = 20;
/** How much of a receiver's answer is read (and then dropped). */
export const MAX_RESPONSE_BYTES = 64 * 1024;
/** How long the delivery log of a removed webhook is kept. */
export const LOG_RETENTION_MS = 30 * 24 * 3600_000;

export interface Change { kind: string; at: string }

/** The JSON body of a collection.updated delivery (conventions.md "Events on the wire"). */
export function deliveryBody(input: { deliveryId: string; collectionId: number; occurredAt: string; changes: Change[]; published: boolean; test?: boolean }): string {
  return JSON.stringify({
    id: input.deliveryId,
    type: "collection.updated",
    collection_id: input.collectionId,
    occurred_at: input.occurredAt,
    changes: input.changes,
    published: input.published,
    ...(input.test ? { test: true } : {}),
  });
}

/**
 * A closed window is delivered while the collection is published; when it is not, only a
 * window that holds the unpublish itself is (then nothing until it is published again).
 */
export function shouldDeliver(changes: readonly Change[], publishedNow: boolean): boolean {
  return publishedNow || changes.some((c) => c.kind === "unpublished");
}

export type AttemptResult =
  | { kind: "answered"; status: number; retryAfterMs?: number }
  | { kind: "failed"; error: string };

export type Verdict =
  | { kind: "delivered" }
  /** Try again after `delayMs`. */
  | { kind: "retry"; delayMs: number; error: string }
  /** The delivery failed for good; `disable` stops the webhook at once (410 Gone). */
  | { kind: "failed"; error: string; disable?: string };

/** Seconds or an HTTP date, as in Retry-After; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/**
 * What attempt number `attempt` (1-based) answering `result` means. 2xx delivers; 410 Gone
 * disables the webhook; anything else (3xx included: redirects are not followed) is a failure,
 * retried after the backoff of this attempt. A Retry-After on 429 or 503 is honoured within the
 * schedule: never sooner than the backoff, never later than the schedule's longest delay.
 */
export function judgeAttempt(attempt: number, result: AttemptResult, backoffMs: readonly number[]): Verdict {
  if (result.kind === "answered" && result.status >= 200 && result.status < 300) return { kind: "delivered" };
  const error = result.kind === "failed" ? result.error
    : result.status >= 300 && result.status < 400 ? `receiver answered ${result.status} (redirects are not followed)`
    : `receiver answered ${result.status}`;
  if (result.kind === "answered" && result.status === 410) return { kind: "failed", error, disable: "The receiver answered 410 Gone." };
  if (attempt >= MAX_ATTEMPTS) return { kind: "failed", error };
  const backoff = backoffMs[Math.min(attempt - 1, backoffMs.length - 1)] ?? 0;
  let delayMs = backoff;
  if (result.kind === "answered" && (result.status === 429 || result.status === 503) && result.retryAfterMs !== undefined) {
    delayMs = Math.min(Math.max(backoff, result.retryAfterMs), Math.max(...backoffMs, backoff));
  }
  return { kind: "retry", delayMs, error };
}

/** After a delivery failed for good: the webhook's new consecutive failure count, and whether it disables. */
export function afterFailedDelivery(failureCount: number): { failureCount: number; disable?: string } {
  const next = failureCount + 1;
  return next >= DISABLE_AFTER_FAILURES ? { failureCount: next, disable: `${DISABLE_AFTER_FAILURES} consecutive deliveries failed.` } : { failureCount: next };
}
