/** The knex adapter of the pending steps store (../domain/pending-steps.ts). */
import type { Queryable } from "@cms/platform";
import type { PendingStep, StepWork } from "../domain/pending-steps.js";
import type { PendingStepsStore } from "../app/ports.js";

interface StepRow {
  id: number;
  kind: StepWork["kind"];
  collection_id: number;
  payload: Record<string, unknown>;
  state: PendingStep["state"];
  attempts: number;
  next_attempt_at: Date;
  last_error: string | null;
  created_at: Date;
}

const COLUMNS = ["id", "kind", "collection_id", "payload", "state", "attempts", "next_attempt_at", "last_error", "created_at"];

/** The row's payload holds the work without its kind and collection, which have columns. */
function stepOf(r: StepRow): PendingStep {
  return {
    id: Number(r.id),
    work: { ...r.payload, kind: r.kind, collectionId: Number(r.collection_id) } as StepWork,
    state: r.state,
    attempts: r.attempts,
    nextAttemptAt: r.next_attempt_at,
    lastError: r.last_error,
    createdAt: r.created_at,
  };
}

/** The pending steps store on the pool or a unit's transaction. */
export function createPendingStepsStore(q: Queryable): PendingStepsStore {
  return {
    async add(work, nextAttemptAt) {
      const { kind, collectionId, ...payload } = work;
      const [row] = await q("pending_steps").insert({ kind, collection_id: collectionId, payload, next_attempt_at: nextAttemptAt }).returning("id");
      return Number(row.id);
    },
    async byId(id, opts = {}) {
      const b = q("pending_steps").where({ id }).first(COLUMNS);
      if (opts.lock) b.forUpdate();
      const row = (await b) as StepRow | undefined;
      return row && stepOf(row);
    },
    async openOn(collectionId) {
      const row = (await q("pending_steps").where({ collection_id: collectionId }).orderBy("id").first(COLUMNS)) as StepRow | undefined;
      return row && stepOf(row);
    },
    async settle(id, state) {
      return (await q("pending_steps").where({ id, state }).delete()) > 0;
    },
    async markCompensating(id) {
      await q("pending_steps").where({ id }).update({ state: "compensating", updated_at: new Date() });
    },
    async retryLater(id, attempts, nextAttemptAt, error) {
      await q("pending_steps").where({ id }).update({ attempts, next_attempt_at: nextAttemptAt, last_error: error.slice(0, 2000), updated_at: new Date() });
    },
    async due(now, limit) {
      const rows = (await q("pending_steps").where("next_attempt_at", "<=", now).orderBy("id").limit(limit).select(COLUMNS)) as StepRow[];
      return rows.map(stepOf);
    },
  };
}
