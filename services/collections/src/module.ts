/** The collections service module: collections, nesting, publishing, discovery, likes, deletion windows. */
import type { ServiceModule } from "@cms/platform";
import { collectionsMigrations } from "./store/migrations.js";
import { createDeps } from "./app/deps.js";
import { collectionsRoutes } from "./rpc/collections-rpc.js";
import { purgeExpired } from "./app/lifecycle.js";

const HOUR = 3600_000;

export const collectionsModule: ServiceModule = {
  name: "collections",
  schema: "collections",
  migrations: collectionsMigrations,
  extensions: ["pg_trgm", "unaccent"],
  async init(ctx) {
    const deps = createDeps(ctx);
    let timer: NodeJS.Timeout | undefined;
    // One replica at a time runs the hourly purge (transaction-scoped advisory lock).
    const retention = async (now = new Date()) => {
      return ctx.db.transaction(async (trx) => {
        const { rows } = await trx.raw("SELECT pg_try_advisory_xact_lock(7201) AS ok");
        if (!rows[0].ok) return { purged: 0, skipped: "another replica is running the retention job" };
        return purgeExpired(deps, now);
      });
    };
    return {
      routes: collectionsRoutes(deps),
      jobs: { retention: (args) => retention(args.now ? new Date(String(args.now)) : new Date()) },
      async start() {
        timer = setInterval(() => {
          retention().then((r) => ctx.log.info(r, "retention job")).catch((err) => ctx.log.error({ err }, "retention job failed"));
        }, HOUR);
        timer.unref();
      },
      async stop() {
        if (timer) clearInterval(timer);
      },
    };
  },
};
