/**
 * POST /functions/v1/thirdparty-v1: the single JSON op endpoint. In order: API key, body size,
 * JSON object, op lookup, bearer token, admin and scope checks, rate limit (the admission chain,
 * with the body and op read between the key and the token), schema validation, idempotency,
 * dispatch, and the contract's error shape for every failure.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { AppError, authorizeOperation, sha256Hex, type Caller, type Logger } from "@cms/platform";
import type { Dispatch } from "../app/dispatch.js";
import { validationError, type OpEntry, type OpRegistry } from "../app/registry.js";
import { canonicalJson } from "../domain/canonical-json.js";
import { parseRequestBody } from "../domain/request-body.js";
import type { IdempotencyStore } from "../store/idempotency-store.js";
import type { Admit } from "./admission.js";
import { errorOutcome, sendJson, type JsonOutcome } from "./answers.js";
import { objectRefOf, type ObjectRef, type ObjectStreamer } from "./object-stream.js";

/** The op endpoint's path. */
export const OP_PATH = "/functions/v1/thirdparty-v1";

/** What the op endpoint needs. */
export interface OpEndpointDeps {
  log: Logger;
  registry: OpRegistry;
  admit: Admit;
  dispatch: Dispatch;
  idempotency: IdempotencyStore;
  maxBodyBytes: number;
  /** Streams the stored object a streams_object operation (media.download) answers with. */
  streamObject?: ObjectStreamer;
}

/** An outcome as the endpoint answers it: JSON, or the stored object of a streams_object op. */
type Answer = JsonOutcome & { headers?: Record<string, string>; object?: ObjectRef };

async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (declared > limit) throw new AppError("payload_too_large", `The request body exceeds ${limit} bytes.`);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > limit) throw new AppError("payload_too_large", `The request body exceeds ${limit} bytes.`);
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    if (err instanceof AppError) throw err;
    // The client stopped sending before the end (a body shorter than its Content-Length).
    throw new AppError("invalid_request", `The request body ended after ${size} bytes, before its end (Content-Length ${req.headers["content-length"] ?? "not given"}).`);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/** The op endpoint's request handler. */
export function createOpEndpoint(deps: OpEndpointDeps) {
  const { registry, admit, idempotency, log } = deps;

  /** The body and its operation: read between the API key and the token, so their errors come first. */
  async function requested(req: IncomingMessage): Promise<{ body: Record<string, unknown>; op: OpEntry }> {
    const body = parseRequestBody(await readBody(req, deps.maxBodyBytes));
    const name = body.op;
    if (typeof name !== "string" || !name) {
      throw new AppError("invalid_request", "The request body needs a string field \"op\" naming the operation.", { field: "op" });
    }
    const op = registry.get(name);
    if (!op) {
      throw new AppError("invalid_request", `Unknown operation "${name}". operations.list gives every name.`, { field: "op", did_you_mean: registry.nearest(name) });
    }
    return { body, op };
  }

  async function dispatch(op: OpEntry, fields: Record<string, unknown>, caller: Caller | undefined): Promise<Answer> {
    const { object, ...outcome } = await deps.dispatch(op, fields, caller);
    return object ? { ...outcome, object: objectRefOf(object) } : outcome;
  }

  async function run(req: IncomingMessage, res: ServerResponse): Promise<Answer> {
    const { caller, target: { body, op } } = await admit(req, res, {
      target: () => requested(req),
      authorize: (who, { op }) => authorizeOperation(op, who),
    });

    const { op: _op, ...fields } = body;
    if (!op.validate(fields)) throw validationError(op, op.validate.errors![0]!);

    const key = op.mutating ? fields.idempotency_key : undefined;
    delete fields.idempotency_key;
    if (typeof key === "string" && caller) {
      const claim = await idempotency.claim(caller.userId, op.name, key, sha256Hex(canonicalJson(body)));
      if (claim.kind === "replay") return { ...claim.response, headers: { "idempotent-replayed": "true" } };
      let outcome: Answer;
      try {
        outcome = await dispatch(op, fields, caller);
      } catch (err) {
        outcome = errorOutcome(err, log);
      }
      if (outcome.status >= 500) await claim.release();
      else await claim.complete(outcome);
      return outcome;
    }
    return dispatch(op, fields, caller);
  }

  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let outcome: Answer;
    try {
      outcome = await run(req, res);
      if (outcome.object && deps.streamObject) {
        await deps.streamObject(req, res, outcome.object, { disposition: "attachment", headers: outcome.headers });
        return;
      }
    } catch (err) {
      outcome = errorOutcome(err, log);
      if (outcome.status === 413) res.setHeader("connection", "close");
      if (res.headersSent) { res.destroy(); return; }
    }
    sendJson(res, outcome.status, outcome.body, outcome.headers);
  };
}
