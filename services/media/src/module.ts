/** The media service module: media rows, text notes, thumbnails, uploads and downloads. */
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { EVENTS, type ServiceModule } from "@cms/platform";
import { createMediaApp } from "./app/media-app.js";
import { internalHandlers } from "./rpc/internal-rpc.js";
import { catalogueHandlers } from "./rpc/media-rpc.js";
import { transferHandlers } from "./rpc/transfer-rpc.js";
import { mediaMigrations } from "./store/migrations.js";
import { createMediaStores } from "./store/stores.js";

const MINUTE = 60_000;

/** The media module table entry: wiring of the stores, the application, its consumers, routes and jobs. */
export const mediaModule: ServiceModule = {
  name: "media",
  schema: "media",
  migrations: mediaMigrations,
  extensions: ["pg_trgm", "unaccent", "btree_gin"],
  async init(ctx) {
    const app = createMediaApp({
      stores: createMediaStores(ctx.db),
      unitOfWork: ctx.unitOfWork(createMediaStores),
      oneStatementUnit: ctx.oneStatementUnit,
      collections: ctx.clients.get(CollectionsService),
      objects: ctx.store,
      config: ctx.config,
      log: ctx.log,
    });
    // Objects whose rows are gone are removed from the store, unless something took them up
    // meanwhile; a failure is retried by the bus.
    await ctx.bus.subscribe("object-cleanup", EVENTS.objectsOrphaned, async (event) => {
      const outcome = await app.objects.removeOrphaned((event.payload.store_keys as string[]) ?? []);
      ctx.log.debug(outcome, "removed orphaned objects");
    });
    // The media side of collections deleted, restored or purged; idempotent by version (the
    // collections service also calls ApplyCollectionLifecycle right after its commit).
    await ctx.bus.subscribe("collection-lifecycle", EVENTS.collectionLifecycle, async (event) => {
      const affected = await app.lifecycle.consume(event);
      ctx.log.debug({ affected, ...event.payload }, "applied collection lifecycle");
    });
    const nowOf = (args: Record<string, unknown>) => (args.now ? new Date(String(args.now)) : new Date());
    const jobs = {
      upload_cleanup: (args: Record<string, unknown>) => app.jobs.uploadCleanup(nowOf(args)),
      upload_finalize: (args: Record<string, unknown>) => app.jobs.uploadFinalize(nowOf(args)),
      list_counts_fold: () => app.jobs.listCountsFold(),
    };
    const timers: NodeJS.Timeout[] = [];
    const every = (name: keyof typeof jobs, ms: number) => {
      const t = setInterval(() => {
        jobs[name]({}).then((r) => ctx.log.debug(r, `${name} job`)).catch((err) => ctx.log.error({ err }, `${name} job failed`));
      }, ms);
      t.unref();
      timers.push(t);
    };
    return {
      routes: (router) => { router.service(MediaService, { ...internalHandlers(app), ...catalogueHandlers(app), ...transferHandlers(app) }); },
      jobs,
      async start() {
        every("upload_cleanup", 10 * MINUTE);
        every("upload_finalize", MINUTE / 2);
        // Often: a read of a collection's total sums the changes not folded yet.
        every("list_counts_fold", MINUTE / 12);
      },
      async stop() {
        for (const t of timers) clearInterval(t);
      },
    };
  },
};
