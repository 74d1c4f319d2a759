/** The media service module: media rows, text notes, thumbnails, uploads and downloads. */
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { EVENTS, type ServiceModule } from "@cms/platform";
import { mediaMigrations } from "./store/migrations.js";
import { internalHandlers } from "./rpc/internal-rpc.js";
import { catalogueHandlers } from "./rpc/media-rpc.js";
import { transferHandlers } from "./rpc/transfer-rpc.js";
import { createDeps, removableKeys } from "./app/deps.js";
import { cleanupExpiredSessions } from "./app/chunked.js";
import { finalizeJob } from "./app/uploads.js";

const MINUTE = 60_000;

export const mediaModule: ServiceModule = {
  name: "media",
  schema: "media",
  migrations: mediaMigrations,
  extensions: ["pg_trgm", "unaccent"],
  async init(ctx) {
    const deps = createDeps(ctx);
    // Objects whose rows are gone are removed from the store, unless something took them up
    // meanwhile; a failure is retried by the bus.
    await ctx.bus.subscribe("object-cleanup", EVENTS.objectsOrphaned, async (event) => {
      const keys = (event.payload.store_keys as string[]) ?? [];
      const removable = await removableKeys(deps, keys);
      await ctx.store.delete(removable);
      ctx.log.debug({ count: removable.length, kept: keys.length - removable.length }, "removed orphaned objects");
    });
    const internal = internalHandlers(ctx);
    const catalogue = catalogueHandlers(deps);
    const transfer = transferHandlers(deps);
    // One replica at a time runs a job (transaction-scoped advisory lock).
    const exclusive = (lock: number, job: () => Promise<Record<string, unknown>>) => ctx.db.transaction(async (trx) => {
      const { rows } = await trx.raw("SELECT pg_try_advisory_xact_lock(?) AS ok", [lock]);
      if (!rows[0].ok) return { skipped: "another replica is running this job" };
      return job();
    });
    const nowOf = (args: Record<string, unknown>) => (args.now ? new Date(String(args.now)) : new Date());
    const jobs = {
      // Expired chunked upload/download sessions and their chunks.
      upload_cleanup: (args: Record<string, unknown>) => exclusive(7301, () => cleanupExpiredSessions(deps, nowOf(args))),
      // One-call upload rows whose bytes landed unseen (presigned S3 PUT), or never came.
      upload_finalize: (args: Record<string, unknown>) => exclusive(7302, () => finalizeJob(deps, nowOf(args))),
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
      routes: (router) => { router.service(MediaService, { ...internal, ...catalogue, ...transfer }); },
      jobs,
      async start() {
        every("upload_cleanup", 10 * MINUTE);
        every("upload_finalize", MINUTE / 2);
      },
      async stop() {
        for (const t of timers) clearInterval(t);
      },
    };
  },
};
