/**
 * POST /functions/v1/thirdparty-v1: the single JSON op endpoint. In order: API key, body size,
 * JSON object, op lookup, bearer token, admin and scope checks, rate limit (the admission chain,
 * with the body and op read between the key and the token), then the operation runner (schema
 * validation, idempotency, dispatch; app/run-operation.ts), and the contract's error shape for
 * every failure.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { SpanStatusCode, trace } from "@opentelemetry/api";
import { AppError, authorizeOperation, recordOp, secondsSince, type Logger } from "@cms/platform";
import type { OpEntry, OpRegistry } from "../app/registry.js";
import { failureOutcome, outcomeCode, type Outcome, type RunOperation } from "../app/run-operation.js";
import { parseRequestBody } from "../domain/request-body.js";
import type { Admit } from "./admission.js";
import { sendJson } from "./answers.js";
import { readBody, type BodyBounds } from "./read-body.js";
import { objectRefOf, type ObjectRef, type ObjectStreamer } from "./object-stream.js";

/** The op endpoint's path. */
export const OP_PATH = "/functions/v1/thirdparty-v1";

/** What the op endpoint needs. */
export interface OpEndpointDeps {
  log: Logger;
  registry: OpRegistry;
  admit: Admit;
  /** Schema, idempotency and dispatch of an admitted call (shared with the MCP tools). */
  run: RunOperation;
  bodyBounds: BodyBounds;
  /** Streams the stored object a streams_object operation (media.download) answers with. */
  streamObject?: ObjectStreamer;
}

/** An outcome as the endpoint answers it: JSON, or the stored object of a streams_object op. */
type Answer = Omit<Outcome, "object"> & { object?: ObjectRef };

/** What the span and the metrics of one op request say about it, filled in as it is learnt. */
interface OpFacts { op?: string; userId?: string }

/**
 * Names the request's SERVER span `op <name>` with the op, user, status and error code, and
 * counts the op (RED: requests by outcome code, duration). Requests whose op is unknown or
 * missing count under "unknown", so the label keeps a bounded set of values.
 */
function observeOp(facts: OpFacts, outcome: Pick<Outcome, "status" | "body">, started: number): void {
  const op = facts.op ?? "unknown";
  const code = outcomeCode(outcome);
  const span = trace.getActiveSpan();
  if (span) {
    span.updateName(`op ${op}`);
    span.setAttribute("cms.op", op);
    if (facts.userId) span.setAttribute("enduser.id", facts.userId);
    span.setAttribute("http.response.status_code", outcome.status);
    if (code !== "ok") {
      span.setAttribute("cms.error_code", code);
      span.setAttribute("error.type", code);
    }
    if (outcome.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  }
  recordOp(op, code, secondsSince(started));
}

/** The op endpoint's request handler. */
export function createOpEndpoint(deps: OpEndpointDeps) {
  const { registry, admit, log } = deps;

  /** The body and its operation: read between the API key and the token, so their errors come first. */
  async function requested(req: IncomingMessage, facts: OpFacts): Promise<{ body: Record<string, unknown>; op: OpEntry }> {
    const body = parseRequestBody(await readBody(req, deps.bodyBounds));
    const name = body.op;
    if (typeof name !== "string" || !name) {
      throw new AppError("invalid_request", "The request body needs a string field \"op\" naming the operation.", { field: "op" });
    }
    const op = registry.get(name);
    if (op) facts.op = op.name;
    if (!op) {
      throw new AppError("invalid_request", `Unknown operation "${name}". operations.list gives every name.`, { field: "op", did_you_mean: registry.nearest(name) });
    }
    return { body, op };
  }

  async function run(req: IncomingMessage, res: ServerResponse, facts: OpFacts): Promise<Answer> {
    const { caller, target: { body, op } } = await admit(req, res, {
      target: () => requested(req, facts),
      authorize: (who, { op }) => {
        if (who) facts.userId = who.userId;
        return authorizeOperation(op, who);
      },
    });
    const { op: _op, ...fields } = body;
    const { object, ...outcome } = await deps.run(op, fields, caller);
    return object ? { ...outcome, object: objectRefOf(object) } : outcome;
  }

  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const facts: OpFacts = {};
    let outcome: Answer;
    try {
      outcome = await run(req, res, facts);
      if (outcome.object && deps.streamObject) {
        try {
          await deps.streamObject(req, res, outcome.object, { disposition: "attachment", headers: outcome.headers });
        } finally {
          observeOp(facts, { status: res.statusCode, body: "" }, started);
        }
        return;
      }
    } catch (err) {
      outcome = failureOutcome(err, log);
      if (outcome.status === 413) res.setHeader("connection", "close");
      if (res.headersSent) { observeOp(facts, outcome, started); res.destroy(); return; }
    }
    observeOp(facts, outcome, started);
    sendJson(res, outcome.status, outcome.body, outcome.headers);
  };
}
