/**
 * Configuring a collection's webhook: set (URL rules, a new secret each time, re-enabled),
 * get (configuration, health, the last five attempts, never the secret), remove (idempotent;
 * queued deliveries discarded) and test (one signed test delivery now, outside coalescing).
 * Only the collection's owner: a collaborator, even with can_edit, is refused.
 */
import { randomUUID } from "node:crypto";
import type { Client } from "@connectrpc/connect";
import type { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { AppError, fromConnectError, type Caller, type UnitOfWork } from "@cms/platform";
import { checkEvents } from "../domain/url-rules.js";
import { deliveryBody } from "../domain/deliveries.js";
import { newSecret, signDelivery } from "../domain/signing.js";
import type { AttemptRow, WebhookRow, WebhooksStore } from "../store/webhooks-store.js";
import type { Receiver } from "../store/https-receiver.js";

export interface WebhookView { webhook: WebhookRow; recentAttempts: AttemptRow[] }

export interface TestOutcome { delivered: boolean; attempt: AttemptRow }

export interface WebhooksDeps {
  uow: UnitOfWork<WebhooksStore>;
  store: WebhooksStore;
  collections: () => Client<typeof CollectionsService>;
  receiver: Receiver;
}

/** How many attempts webhook_get shows. */
export const RECENT_ATTEMPTS = 5;

export function createWebhooks(deps: WebhooksDeps) {
  /** The collection, when the caller owns it: 404 when missing, 403 otherwise (collaborators included). */
  async function owned(caller: Caller, collectionId: number) {
    let res;
    try {
      res = await deps.collections().checkAccess({ userId: caller.userId, collectionId: BigInt(collectionId), action: "owner" });
    } catch (err) {
      throw fromConnectError(err);
    }
    if (!res.exists || res.isDeleted) throw new AppError("not_found", `Collection ${collectionId} does not exist or is not accessible.`);
    if (!res.isOwner) throw new AppError("forbidden", `Only the owner of collection ${collectionId} configures its webhook; collaborators cannot, whatever their flags.`);
    return res;
  }

  const notConfigured = (collectionId: number) => new AppError("not_found", `Collection ${collectionId} has no webhook.`, {
    hint: "Configure one with collections.webhook_set (collection_id, url); it delivers collection.updated while the collection is published.",
  });

  return {
    async set(caller: Caller, input: { collectionId: number; url: string; events: string[] }): Promise<{ webhook: WebhookRow; secret: string }> {
      const events = checkEvents(input.events);
      const access = await owned(caller, input.collectionId);
      // The URL rules with DNS, before anything is stored.
      await deps.receiver.vet(input.url);
      const secret = newSecret();
      const webhook = await deps.uow((store) => store.upsertWebhook({
        collectionId: input.collectionId, ownerUserId: access.ownerUserId, url: input.url, events, secret, published: access.isPublished,
      }));
      return { webhook, secret };
    },

    async get(caller: Caller, collectionId: number): Promise<WebhookView> {
      await owned(caller, collectionId);
      const webhook = await deps.store.liveWebhook(collectionId);
      if (!webhook) throw notConfigured(collectionId);
      return { webhook, recentAttempts: await deps.store.recentAttempts(webhook.id, RECENT_ATTEMPTS) };
    },

    async remove(caller: Caller, collectionId: number): Promise<boolean> {
      await owned(caller, collectionId);
      return deps.uow((store) => store.removeWebhook(collectionId));
    },

    /**
     * One signed test delivery (type collection.updated, test: true, one change of kind "test"),
     * sent now whatever the coalescing window, the publication and the enabled flag; one attempt,
     * no retries; logged as event webhook.test; the health fields are left alone.
     */
    async test(caller: Caller, collectionId: number): Promise<TestOutcome> {
      const access = await owned(caller, collectionId);
      const webhook = await deps.store.liveWebhook(collectionId);
      if (!webhook) throw notConfigured(collectionId);
      const id = randomUUID();
      const now = new Date();
      const body = deliveryBody({ deliveryId: id, collectionId, occurredAt: now.toISOString(), changes: [{ kind: "test", at: now.toISOString() }], published: access.isPublished, test: true });
      const result = await deps.receiver.send(webhook.url, { ...signDelivery(webhook.secret, id, body, Date.now()) }, body);
      const delivered = result.status !== undefined && result.status >= 200 && result.status < 300;
      const error = delivered ? null : result.error ?? `receiver answered ${result.status}`;
      const attempt: AttemptRow = { delivery_id: id, event: "webhook.test", attempt: 1, status: result.status ?? null, duration_ms: result.durationMs, error, at: new Date() };
      await deps.store.recordAttempt({ deliveryId: id, webhookId: webhook.id, event: attempt.event, attempt: 1, status: attempt.status, durationMs: attempt.duration_ms, error });
      return { delivered, attempt };
    },
  };
}

export type Webhooks = ReturnType<typeof createWebhooks>;
