/**
 * The webhooks service module: each collection's one outbound signed webhook (configuration,
 * secret, health, delivery log) and the delivery engine behind it.
 */
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { EVENTS, type ServiceModule } from "@cms/platform";
import { migrations } from "./store/migrations.js";
import { createWebhooksStore } from "./store/webhooks-store.js";
import { createHttpsReceiver } from "./store/https-receiver.js";
import { createWebhooks } from "./app/webhooks.js";
import { createDeliveryEngine } from "./app/delivery-engine.js";
import { LOG_RETENTION_MS } from "./domain/deliveries.js";
import { webhooksRoutes } from "./rpc/webhooks-rpc.js";

const HOUR = 3600_000;

export const webhooksModule: ServiceModule = {
  name: "webhooks",
  schema: "webhooks",
  migrations,
  async init(ctx) {
    const { config } = ctx;
    const uow = ctx.unitOfWork(createWebhooksStore);
    const store = createWebhooksStore(ctx.db);
    const receiver = createHttpsReceiver({
      // Read when used: with PORT=0 the service's own origins are known only once the gateway listens.
      policy: { get serviceOrigins() { return [config.baseUrl, config.appUrl, config.mcpUrl]; }, allowedHosts: config.outboundAllowedHosts },
      timeoutMs: config.webhookTimeoutMs,
    });
    const webhooks = createWebhooks({ uow, store, receiver, collections: () => ctx.clients.get(CollectionsService) });
    const engine = createDeliveryEngine({
      uow, store, receiver, log: ctx.log,
      config: { coalesceMs: config.webhookCoalesceMs, backoffMs: config.webhookBackoffMs, timeoutMs: config.webhookTimeoutMs, concurrency: 64 },
    });
    await ctx.bus.subscribe("deliveries", EVENTS.collectionUpdated, (event) => engine.onCollectionUpdated(event));
    // One replica at a time purges the log of webhooks removed 30 days ago.
    const purge = (now = new Date()) => ctx.db.transaction(async (trx) => {
      const { rows } = await trx.raw("SELECT pg_try_advisory_xact_lock(7401) AS ok");
      if (!rows[0].ok) return { skipped: "another replica is running this job" };
      return createWebhooksStore(trx).purge(new Date(now.getTime() - LOG_RETENTION_MS));
    });
    let timer: NodeJS.Timeout | undefined;
    return {
      routes: webhooksRoutes(webhooks),
      jobs: {
        delivery_log_purge: (args) => purge(args.now ? new Date(String(args.now)) : new Date()),
        deliveries: () => engine.pass() as unknown as Promise<Record<string, unknown>>,
      },
      async start() {
        engine.start();
        timer = setInterval(() => { purge().then((r) => ctx.log.debug(r, "delivery log purge")).catch((err) => ctx.log.error({ err }, "delivery log purge failed")); }, HOUR);
        timer.unref();
      },
      async stop() {
        if (timer) clearInterval(timer);
        await engine.stop();
      },
    };
  },
};
