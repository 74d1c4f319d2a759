/** Webhook rows as the typed messages of the contract (webhooks.v1); the secret is never among them. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { DeliveryAttemptSchema, WebhookSchema } from "@cms/contracts/webhooks/v1/webhooks_pb";
import { timestampOf } from "@cms/platform";
import type { AttemptRow, WebhookRow } from "../store/webhooks-store.js";

const opt = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

export function attemptMessage(a: AttemptRow): MessageInitShape<typeof DeliveryAttemptSchema> {
  return { event: a.event, deliveryId: a.delivery_id, attempt: a.attempt, status: opt(a.status), durationMs: a.duration_ms, error: opt(a.error), at: timestampOf(a.at) };
}

export function webhookMessage(w: WebhookRow, recent: AttemptRow[] = []): MessageInitShape<typeof WebhookSchema> {
  return {
    collectionId: BigInt(w.collection_id), url: w.url, events: w.events, enabled: w.enabled, disabledReason: opt(w.disabled_reason),
    failureCount: w.failure_count, lastStatus: opt(w.last_status), lastError: opt(w.last_error),
    lastDeliveryAt: w.last_delivery_at ? timestampOf(w.last_delivery_at) : undefined,
    createdAt: timestampOf(w.created_at), updatedAt: timestampOf(w.updated_at), recentAttempts: recent.map(attemptMessage),
  };
}
