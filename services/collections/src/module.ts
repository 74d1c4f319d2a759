/** The collections service module: collections, nesting, publishing, discovery, likes, deletion windows. */
import type { ServiceModule } from "@cms/platform";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { collectionsMigrations } from "./store/migrations.js";
import { createCollectionsStores, SEARCH_SESSION_SETTINGS } from "./store/collections-store.js";
import { exclusively } from "./store/job-lock.js";
import { createCollectionsApp } from "./app/collections-app.js";
import { collectionsRoutes } from "./rpc/collections-rpc.js";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** The module table entry: wiring of the stores, the application, the routes and the jobs. */
export const collectionsModule: ServiceModule = {
  name: "collections",
  schema: "collections",
  migrations: collectionsMigrations,
  extensions: ["pg_trgm", "unaccent", "btree_gin"],
  sessionSettings: SEARCH_SESSION_SETTINGS,
  async init(ctx) {
    const app = createCollectionsApp({
      stores: createCollectionsStores(ctx.db),
      unitOfWork: ctx.unitOfWork(createCollectionsStores),
      media: ctx.clients.get(MediaService),
      social: ctx.clients.get(SocialService),
      auth: ctx.clients.get(AuthService),
      objects: ctx.store,
      config: ctx.config,
      log: ctx.log,
    });
    const skipped = (job: string) => ({ skipped: `another replica is running the ${job} job` });
    const nowOf = (args: Record<string, unknown>) => (args.now ? new Date(String(args.now)) : new Date());
    // One replica at a time runs each job (an advisory lock; a run elsewhere is skipped), and in
    // this process one run at a time (a run asked for while the timer's runs waits for it).
    const queues = new Map<string, Promise<unknown>>();
    const single = <T>(name: string, run: () => Promise<T>): Promise<T | undefined> => {
      // The previous run's outcome (a failure included) went to its own caller.
      const go = () => exclusively(ctx.db, name, run);
      const next = (queues.get(name) ?? Promise.resolve()).then(go, go);
      queues.set(name, next);
      return next;
    };
    const jobs = {
      retention: async (args: Record<string, unknown>) =>
        (await single("retention", async () => ({
          ...await app.purgeExpired(nowOf(args)), unclaimed_cover_uploads: await app.forgetUnclaimedCoverUploads(nowOf(args)),
        }))) ?? { purged: 0, unclaimed_cover_uploads: 0, ...skipped("retention") },
      pending_steps: async (args: Record<string, unknown>) =>
        (await single("pending_steps", () => app.recoverPendingSteps(nowOf(args)))) ?? { undone: 0, retrying: 0, ...skipped("pending_steps") },
    };
    const timers: NodeJS.Timeout[] = [];
    const running = new Set<Promise<unknown>>();
    const every = (name: keyof typeof jobs, ms: number, atStart: boolean) => {
      const run = () => {
        // A run that found nothing to do is not worth a line every minute.
        const p = jobs[name]({})
          .then((r) => (Object.values(r).some((v) => v !== 0) ? ctx.log.info(r, `${name} job`) : ctx.log.debug(r, `${name} job`)))
          .catch((err) => ctx.log.error({ err }, `${name} job failed`));
        running.add(p);
        void p.finally(() => running.delete(p));
      };
      if (atStart) run();
      const timer = setInterval(run, ms);
      timer.unref();
      timers.push(timer);
    };
    return {
      routes: collectionsRoutes(app, () => ctx.config.appUrl),
      jobs,
      async start() {
        every("retention", HOUR, false);
        // At start too: what a crash of this process left is finished without waiting a minute.
        every("pending_steps", MINUTE, true);
      },
      async stop() {
        for (const t of timers) clearInterval(t);
        await Promise.all(running);
      },
    };
  },
};
