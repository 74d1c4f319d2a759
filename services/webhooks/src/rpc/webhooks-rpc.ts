/** Thin Connect handlers of WebhooksService: decode once, call the use case, encode. */
import type { ConnectRouter } from "@connectrpc/connect";
import { WebhooksService } from "@cms/contracts/webhooks/v1/webhooks_pb";
import { requireCaller } from "@cms/platform";
import type { Webhooks } from "../app/webhooks.js";
import { attemptMessage, webhookMessage } from "./encode.js";

export function webhooksRoutes(webhooks: Webhooks) {
  return (router: ConnectRouter) =>
    router.service(WebhooksService, {
      async setWebhook(req, ctx) {
        const { webhook, secret } = await webhooks.set(requireCaller(ctx), { collectionId: Number(req.collectionId), url: req.url, events: req.events });
        return { webhook: webhookMessage(webhook), secret };
      },
      async getWebhook(req, ctx) {
        const { webhook, recentAttempts } = await webhooks.get(requireCaller(ctx), Number(req.collectionId));
        return { webhook: webhookMessage(webhook, recentAttempts) };
      },
      async removeWebhook(req, ctx) {
        return { removed: await webhooks.remove(requireCaller(ctx), Number(req.collectionId)), collectionId: req.collectionId };
      },
      async testWebhook(req, ctx) {
        const { delivered, attempt } = await webhooks.test(requireCaller(ctx), Number(req.collectionId));
        return { delivered, attempt: attemptMessage(attempt) };
      },
    });
}
