/**
 * Steps that span the collections and media services. The collections side commits first and
 * records the step in the same transaction; the media side is called after the commit. A step
 * still recorded means its outcome is not settled: either the request that recorded it is
 * still running, or it died (crash, outage) and the step must be undone. These are the rules of
 * that bookkeeping; no I/O here.
 */

/** The sub-collection's link row must be inserted in its parent (collections.create with a parent). */
export interface CreateLinkStep {
  kind: "create_link";
  /** The new sub-collection. */
  collectionId: number;
  parentId: number;
  ownerUserId: string;
  position?: number;
  description?: string;
}

/** The collection's link rows must follow it from one parent to another (collections.move). */
export interface MoveLinkStep {
  kind: "move_link";
  collectionId: number;
  /** null: it was at the top level. */
  fromParentId: number | null;
  /** null: it was detached to the top level. */
  toParentId: number | null;
  ownerUserId: string;
}

/** What a step has to make media do. */
export type StepWork = CreateLinkStep | MoveLinkStep;

/**
 * pending: recorded, the media call not settled; compensating: the collections side was undone
 * and the media side still has to follow (retried until media answers).
 */
export type StepState = "pending" | "compensating";

/** A recorded step and its undo's progress. */
export interface PendingStep {
  id: number;
  work: StepWork;
  state: StepState;
  attempts: number;
  nextAttemptAt: Date;
  lastError: string | null;
  createdAt: Date;
}

/**
 * How long a pending step belongs to the request that recorded it. After that the recovery job
 * treats the request as dead and undoes the step (the client never got a success: the request
 * answers only after it settled the step). Well above the time a media call takes.
 */
export const STEP_GRACE_MS = 2 * 60_000;

const FIRST_RETRY_MS = 30_000;
const MAX_RETRY_MS = 15 * 60_000;

/** The wait before the next attempt at an undo that failed `attempts` times (doubling, capped). */
export function retryDelayMs(attempts: number): number {
  return Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** Math.max(0, attempts - 1));
}

/** When a step recorded at `at` falls to the recovery job. */
export function graceEnd(at: Date): Date {
  return new Date(at.getTime() + STEP_GRACE_MS);
}
