/**
 * One admitted call of an operation, the same for every surface that offers the operations (the
 * JSON op endpoint and the MCP tools): the request schema, then the idempotency record of a
 * mutating call that carries idempotency_key, then dispatch. A surface admits the caller first
 * (token, scopes, rate limit) and renders the outcome in its own way; what an operation accepts,
 * refuses and answers is decided here once.
 */
import type { StoredObject } from "@cms/contracts/common/v1/common_pb";
import { fromConnectError, sha256Hex, type Caller, type Logger } from "@cms/platform";
import { canonicalJson } from "../domain/canonical-json.js";
import type { IdempotencyStore } from "../store/idempotency-store.js";
import type { Dispatch } from "./dispatch.js";
import { validationError, type OpEntry } from "./registry.js";

/** What a call came to: status and JSON body (an error's too), or the object a streams_object op names. */
export interface Outcome { status: number; body: string; headers?: Record<string, string>; object?: StoredObject }

/** The code an outcome counts under in the op metrics and spans: "ok", or the contract's error code. */
export function outcomeCode(outcome: Pick<Outcome, "status" | "body">): string {
  if (outcome.status < 400) return "ok";
  try {
    const code = (JSON.parse(outcome.body) as { error?: unknown }).error;
    return typeof code === "string" ? code : "error";
  } catch {
    return "error";
  }
}

/**
 * Runs an operation for an admitted caller; `fields` are the request's fields without `op`
 * (idempotency_key included). Refusals before the run (schema, a reused key) are thrown as an
 * AppError; a failure inside a keyed run is its stored outcome, so that a replay answers the same.
 */
export type RunOperation = (op: OpEntry, fields: Record<string, unknown>, caller: Caller | undefined) => Promise<Outcome>;

/**
 * The outcome of a failure, for every surface: an AppError as it is, a Connect error from a
 * service mapped back to its code, anything else an internal error (a 5xx logged, its cause not
 * leaked).
 */
export function failureOutcome(err: unknown, log: Logger): Pick<Outcome, "status" | "body"> {
  const app = fromConnectError(err);
  if (app.status >= 500 && app.code !== "not_implemented") log.error({ err }, "operation failed");
  return { status: app.status, body: JSON.stringify(app.toBody()) };
}

/** The runner over the dispatcher and the idempotency records. */
export function createOperationRunner(deps: { dispatch: Dispatch; idempotency: IdempotencyStore; log: Logger }): RunOperation {
  const { dispatch, idempotency, log } = deps;
  return async function run(op, input, caller) {
    const fields = { ...input };
    if (!op.validate(fields)) throw validationError(op, op.validate.errors![0]!);

    const key = op.mutating ? fields.idempotency_key : undefined;
    delete fields.idempotency_key;
    if (typeof key === "string" && caller) {
      // The hash covers the whole request as the JSON endpoint receives it (op and key included),
      // so a replay matches whichever surface made the first call.
      const claim = await idempotency.claim(caller.userId, op.name, key, sha256Hex(canonicalJson({ ...input, op: op.name })));
      if (claim.kind === "replay") return { ...claim.response, headers: { "idempotent-replayed": "true" } };
      let outcome: Outcome;
      try {
        outcome = await dispatch(op, fields, caller);
      } catch (err) {
        outcome = failureOutcome(err, log);
      }
      if (outcome.status >= 500) await claim.release();
      else await claim.complete(outcome);
      return outcome;
    }
    return dispatch(op, fields, caller);
  };
}
