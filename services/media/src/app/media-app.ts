/**
 * The media service's application: every use case, built once from the ports (./ports.ts). The
 * rpc handlers, the event consumers and the jobs call into what this returns.
 */
import { randomUUID } from "node:crypto";
import { createAccess } from "./access.js";
import { createCatalogue } from "./catalogue.js";
import { createChunkedUploads } from "./chunked.js";
import { createCollectionLifecycle } from "./collection-lifecycle.js";
import { createCollectionLinks } from "./collection-links.js";
import { createDownloads } from "./downloads.js";
import { createDropLinks } from "./drop-links.js";
import { createIngest } from "./ingest.js";
import { createObjectCleanup } from "./object-cleanup.js";
import { createPendingUploads } from "./pending-uploads.js";
import type { MediaDeps } from "./ports.js";
import { createStoredFiles } from "./stored-files.js";
import { createTextNotes } from "./text-notes.js";
import { createUploads } from "./uploads.js";

/** How long a job's lease lasts: a replica that dies mid-job blocks the job for at most this long. */
const JOB_LEASE_MS = 10 * 60_000;

/** Builds every use case over the given ports (the one factory of the application). */
export function createMediaApp(deps: MediaDeps) {
  const access = createAccess(deps);
  const ingest = createIngest(deps, access);
  const files = createStoredFiles(deps, ingest);
  const pending = createPendingUploads(deps, ingest);
  const chunked = createChunkedUploads(deps, { access, ingest, files });
  const uploads = createUploads(deps, { access, ingest, files });
  const holder = randomUUID();

  /** Runs a job unless another replica holds its lease (no transaction stays open meanwhile). */
  async function exclusive(name: string, job: () => Promise<Record<string, unknown>>): Promise<Record<string, unknown>> {
    if (!(await deps.unitOfWork(({ media }) => media.claimLease(name, holder, JOB_LEASE_MS)))) return { skipped: "another replica is running this job" };
    try {
      return await job();
    } finally {
      await deps.unitOfWork(({ media }) => media.releaseLease(name, holder))
        .catch((err) => deps.log.warn({ err, job: name }, "could not release a job lease; it expires on its own"));
    }
  }

  return {
    catalogue: createCatalogue(deps, { access, ingest, files, pending }),
    notes: createTextNotes(deps, { access, files }),
    uploads,
    chunked,
    pending,
    downloads: createDownloads(deps, { access, ingest, pending }),
    dropLinks: createDropLinks(deps, { access, ingest, files }),
    links: createCollectionLinks(deps),
    lifecycle: createCollectionLifecycle(deps),
    objects: createObjectCleanup(deps, access),
    jobs: {
      /** Expired chunked upload/download sessions and their chunks; uploaded objects nothing took up. */
      uploadCleanup: (now: Date) => exclusive("upload_cleanup", async () => ({
        ...await chunked.cleanupExpiredSessions(now), unclaimed_uploads: await uploads.forgetUnclaimedUploads(now),
      })),
      /** One-call upload rows whose bytes landed unseen (presigned S3 PUT), or never came. */
      uploadFinalize: (now: Date) => exclusive("upload_finalize", () => pending.finalizeJob(now)),
      /** media.list's kept totals: the changes the triggers appended, moved into the counts. */
      listCountsFold: () => exclusive("list_counts_fold", async () => ({ folded: await deps.stores.media.foldListCounts() })),
    },
  };
}

/** Every media use case, grouped as the rpc handlers use them. */
export type MediaApp = ReturnType<typeof createMediaApp>;
