/**
 * The collections application: every use case of the service, created by one factory over its
 * ports (./ports.ts). The RPC handlers call these and nothing else.
 */
import type { CollectionsAppDeps } from "./ports.js";
import { contextOf } from "./context.js";
import { coverUseCases } from "./covers.js";
import { pendingStepsUseCases } from "./pending-steps.js";
import { crudUseCases } from "./crud.js";
import { lifecycleUseCases } from "./lifecycle.js";
import { nestingUseCases } from "./nesting.js";
import { publishUseCases } from "./publish.js";
import { discoveryUseCases } from "./discovery.js";
import { collaboratorUseCases } from "./collaborators.js";
import { internalUseCases } from "./internal.js";

/** Wires the use cases over their ports; module.ts passes the real ones, the component tests fakes. */
export function createCollectionsApp(deps: CollectionsAppDeps) {
  const app = contextOf(deps);
  const covers = coverUseCases(app);
  const steps = pendingStepsUseCases(app);
  return {
    ...crudUseCases(app, covers, steps),
    ...lifecycleUseCases(app),
    ...nestingUseCases(app, steps),
    ...publishUseCases(app),
    ...discoveryUseCases(app),
    ...collaboratorUseCases(app),
    ...internalUseCases(app),
    coverUploadUrl: covers.coverUploadUrl,
    /** The retention job's part for cover uploads nothing took up (./covers.ts). */
    forgetUnclaimedCoverUploads: covers.forgetUnclaimedCoverUploads,
    /** The recovery job of the steps spanning services (./pending-steps.ts). */
    recoverPendingSteps: steps.recover,
  };
}

/** What the RPC handlers call. */
export type CollectionsApp = ReturnType<typeof createCollectionsApp>;
