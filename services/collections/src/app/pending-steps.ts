/**
 * Steps that span the collections and media services, carried out after the collections commit
 * and undone when media does not follow:
 *
 * - The use case records the step in the unit of work of its collections change.
 * - After the commit it calls media (carryOut). On success it removes the step and answers.
 * - On failure it compensates, also when its caller was answered meanwhile (a deadline passed):
 *   first the collections side, in one unit of work with the step turning "compensating" (a
 *   create removes the collection again, a move puts the parent back); then media is brought to
 *   what the collections side now holds (the link detached, or re-pointed at the parent the
 *   collection is under). The client gets 503 unavailable.
 * - What a crash or an outage leaves is finished by the recovery job (recover): a step still
 *   pending after its grace period belongs to a request that never answered, and is compensated;
 *   a compensation whose media half failed is retried, with a growing delay, until media answers.
 *
 * A request and the job never both settle a step: each takes it over under its row lock, and the
 * request removes it only while it is still pending.
 */
import { AppError, emitCollectionUpdated, fromConnectError, outsideCall, type EventWriter } from "@cms/platform";
import { retryDelayMs, type PendingStep, type StepWork } from "../domain/pending-steps.js";
import type { CollectionsStores } from "./ports.js";
import { changeOf, type AppContext } from "./context.js";

/** A step as the use case recorded it. */
export interface RecordedStep { id: number; work: StepWork }

/** What media answered to a step: the link rows it removed, and the link row in the (new) parent. */
export interface LinkOutcome { removedLinkMediaIds: number[]; linkMediaId?: number }

/** What one run of the recovery job did. */
export interface RecoveryReport { undone: number; retrying: number; [key: string]: number }

/** The error a client gets when media did not follow: retryable, nothing was changed. */
function mediaUnavailable(failure: string): AppError {
  return new AppError("unavailable", `${failure}: the media service did not answer; nothing was changed. Safe to retry.`);
}

/**
 * A refusal from media carries the contract's answer (the client gets it as it is); anything
 * else (no answer, a timeout, an internal error) is an outage.
 */
function refusalOf(err: unknown): AppError | undefined {
  const e = fromConnectError(err);
  return e.code === "server_error" || e.code === "unavailable" ? undefined : e;
}

/** Carrying out, undoing and recovering steps spanning services. */
export function pendingStepsUseCases(app: AppContext) {
  const { stores, media } = app;

  /** The media call of a step. */
  async function callMedia(work: StepWork): Promise<LinkOutcome> {
    if (work.kind === "create_link") {
      const link = await media.insertCollectionLink({
        parentCollectionId: BigInt(work.parentId), childCollectionId: BigInt(work.collectionId), ownerUserId: work.ownerUserId,
        position: work.position, description: work.description,
      });
      return { removedLinkMediaIds: [], linkMediaId: Number(link.linkMediaId) };
    }
    const moved = await media.moveCollectionLink({
      childCollectionId: BigInt(work.collectionId),
      newParentCollectionId: work.toParentId === null ? undefined : BigInt(work.toParentId),
      ownerUserId: work.ownerUserId,
    });
    return { removedLinkMediaIds: moved.removedLinkMediaIds.map(Number), linkMediaId: moved.linkMediaId === undefined ? undefined : Number(moved.linkMediaId) };
  }

  /** The collections half of an undo, in the unit of work that turns the step "compensating". */
  async function undoLocally(s: CollectionsStores, events: EventWriter, work: StepWork): Promise<void> {
    const row = await s.collections.byId(work.collectionId, { lock: true });
    if (!row) return;
    if (work.kind === "create_link") {
      // The client never got this collection: it goes as if it had never been.
      await s.collections.remove([row.id]);
      await emitCollectionUpdated(events, changeOf(row, "deleted"));
      return;
    }
    // Back under its former parent, unless the collection is no longer where the move put it,
    // the former parent is gone, or its name is taken there now: then it stays, and media
    // follows it where it is.
    if (row.is_deleted || row.parent_id !== work.toParentId) return;
    if (work.fromParentId !== null) {
      const parent = await s.collections.byId(work.fromParentId);
      if (!parent || parent.is_deleted) return;
    }
    if (await s.collections.nameTaken(row.user_id, work.fromParentId, row.name)) return;
    const back = await s.collections.update(row.id, {
      parent_id: work.fromParentId, position: await s.collections.nextPosition(row.user_id, work.fromParentId), updated_at: app.now(),
    });
    await emitCollectionUpdated(events, changeOf(back, "moved"));
  }

  /** The media half of an undo: the link rows follow what the collections side holds now. */
  async function followInMedia(work: StepWork): Promise<void> {
    const row = await stores.collections.byId(work.collectionId);
    // A soft-deleted collection's link rows are the lifecycle's to hide and bring back.
    if (row?.is_deleted) return;
    const parent = row ? row.parent_id : null;
    await media.moveCollectionLink({
      childCollectionId: BigInt(work.collectionId),
      newParentCollectionId: parent === null ? undefined : BigInt(parent),
      ownerUserId: work.ownerUserId,
    });
  }

  /**
   * Undoes a step: the collections half once (if the step is still pending), then the media
   * half. "undone" when both are done, "retry" when it is left for a later attempt.
   */
  async function compensate(id: number, now: Date): Promise<"undone" | "retry" | "gone"> {
    let step: PendingStep | undefined;
    try {
      step = await app.unitOfWork(async (s, events) => {
        const st = await s.steps.byId(id, { lock: true });
        if (st?.state === "pending") {
          await undoLocally(s, events, st.work);
          await s.steps.markCompensating(id);
        }
        return st;
      });
      if (!step) return "gone";
      await followInMedia(step.work);
    } catch (err) {
      const attempts = (step?.attempts ?? 0) + 1;
      app.log.warn({ err, step: id, attempts }, "a step could not be undone yet; retried later");
      await stores.steps.retryLater(id, attempts, new Date(now.getTime() + retryDelayMs(attempts)), err instanceof Error ? err.message : String(err));
      return "retry";
    }
    await stores.steps.settle(id, "compensating");
    return "undone";
  }

  return {
    /**
     * The media call of a step recorded with a committed change. Its outcome, once the step is
     * settled; when media does not follow, the step is undone and the client gets 503 (or media's
     * own refusal), with nothing changed on either side.
     */
    async carryOut(step: RecordedStep, failure: string): Promise<LinkOutcome> {
      let outcome: LinkOutcome;
      try {
        outcome = await callMedia(step.work);
      } catch (err) {
        app.log.warn({ err, step: step.id, work: step.work }, "media did not follow a recorded step; undoing it");
        // Undone whatever became of the caller, answered deadline_exceeded or gone meanwhile (it
        // was told nothing changed): outside its call, whose unit of work would commit nothing
        // now. A failure to even record the undo leaves the step pending: the recovery job takes it.
        await outsideCall(() => compensate(step.id, app.now()))
          .catch((e) => app.log.error({ err: e, step: step.id }, "could not undo a step; the recovery job will"));
        throw refusalOf(err) ?? mediaUnavailable(failure);
      }
      // Gone from "pending": the recovery job took the step over (its grace ran out) and undoes it.
      if (!(await stores.steps.settle(step.id, "pending"))) throw mediaUnavailable(failure);
      return outcome;
    },

    /** The recovery job: finishes the steps due at `now` (see above); one pass over each. */
    async recover(now: Date = app.now()): Promise<RecoveryReport> {
      const report: RecoveryReport = { undone: 0, retrying: 0 };
      const seen = new Set<number>();
      for (;;) {
        const due = (await stores.steps.due(now, 100)).filter((s) => !seen.has(s.id));
        if (!due.length) return report;
        for (const s of due) {
          seen.add(s.id);
          const r = await compensate(s.id, now);
          if (r === "undone") report.undone++;
          else if (r === "retry") report.retrying++;
        }
      }
    },
  };
}

/** What the create and move use cases use to carry out their steps. */
export type StepRunner = ReturnType<typeof pendingStepsUseCases>;
