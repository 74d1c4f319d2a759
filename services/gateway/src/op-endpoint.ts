/**
 * POST /functions/v1/thirdparty-v1: the single JSON op endpoint. In order: API key, body size,
 * JSON object, op lookup, bearer token, admin and scope checks, rate limit, schema validation,
 * idempotency, dispatch over Connect, and the contract's error shape for every failure.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { fromJson, type JsonValue, type Message } from "@bufbuild/protobuf";
import type { StoredObject } from "@cms/contracts/common/v1/common_pb";
import { createContextValues } from "@connectrpc/connect";
import { AppError, actAsKey, authorizeOperation, fromConnectError, type Caller, type Clients, type Logger } from "@cms/platform";
import { bearerOf, sha256Hex, type ApiKeyChecker, type TokenResolver } from "./access.js";
import type { RateLimiter } from "./rate-limit.js";
import { canonicalJson, type IdempotencyStore } from "./idempotency.js";
import { validationError, type OpEntry, type OpRegistry } from "./registry.js";
import type { MetaHandler } from "./meta.js";
import { objectRefOf, type ObjectRef, type ObjectStreamer } from "./download-routes.js";
import { renderJson } from "./render.js";

export const OP_PATH = "/functions/v1/thirdparty-v1";

export interface OpEndpointDeps {
  log: Logger;
  registry: OpRegistry;
  clients: Clients;
  tokens: TokenResolver;
  apiKeys: ApiKeyChecker;
  rateLimiter: RateLimiter;
  idempotency: IdempotencyStore;
  meta: Record<string, MetaHandler>;
  maxBodyBytes: number;
  callTimeoutMs?: number;
  /** Streams the stored object a streams_object operation (media.download) answers with. */
  streamObject?: ObjectStreamer;
}

/** What dispatching an operation produced, before it is written to the wire. */
export interface OpOutcome { status: number; body: string }

/** An outcome as the endpoint answers it: JSON, or the stored object of a streams_object op. */
type Answer = OpOutcome & { headers?: Record<string, string>; object?: ObjectRef };

/** Rendered JSON of messages answered more than once (meta answers built once). */
const renderedOnce = new WeakMap<Message, string>();

export function sendJson(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body), ...headers });
  res.end(body);
}

export function errorOutcome(err: unknown, log: Logger): OpOutcome {
  const app = err instanceof AppError ? err : fromConnectError(err);
  if (app.status >= 500 && app.code !== "not_implemented") log.error({ err }, "operation failed");
  return { status: app.status, body: JSON.stringify(app.toBody()) };
}

async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (declared > limit) throw new AppError("payload_too_large", `The request body exceeds ${limit} bytes.`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new AppError("payload_too_large", `The request body exceeds ${limit} bytes.`);
    chunks.push(chunk as Buffer);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

function parseObject(raw: Buffer): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new AppError("invalid_request", "The request body is not valid JSON.");
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new AppError("invalid_request", "The request body must be a JSON object with a string field \"op\".");
  }
  return body as Record<string, unknown>;
}

export function createOpEndpoint(deps: OpEndpointDeps) {
  const { registry, clients, tokens, apiKeys, rateLimiter, idempotency, meta, log } = deps;
  const timeoutMs = deps.callTimeoutMs ?? 60_000;

  async function dispatch(op: OpEntry, fields: Record<string, unknown>, caller: Caller | undefined): Promise<Answer> {
    if (op.owner === "gateway") {
      const handler = meta[op.name];
      if (!handler) throw new AppError("not_implemented", `${op.name} is not implemented by this gateway.`);
      const answer = handler(fields, caller);
      let body = renderedOnce.get(answer);
      if (body === undefined) {
        body = renderJson(op.method.output, answer);
        renderedOnce.set(answer, body);
      }
      return { status: 200, body };
    }
    let message;
    try {
      message = fromJson(op.method.input, fields as JsonValue, { ignoreUnknownFields: false });
    } catch (err) {
      throw new AppError("invalid_request", `The request does not match ${op.name}: ${(err as Error).message}`);
    }
    const client = clients.get(op.service) as unknown as Record<string, (m: unknown, o: unknown) => Promise<Message>>;
    // The service gets the caller as a signed assertion (platform authn.ts), never as a plain header.
    const contextValues = createContextValues();
    if (caller) contextValues.set(actAsKey, caller);
    let res: Message;
    try {
      res = await client[op.method.localName]!(message, { contextValues, timeoutMs });
    } catch (err) {
      throw fromConnectError(err);
    }
    if (op.streamsObject) {
      // The service named the object; the bytes go from the store to the client, not as JSON.
      const object = (res as Message & { object?: StoredObject }).object;
      if (object) return { status: 200, body: "", object: objectRefOf(object) };
    }
    return { status: 200, body: renderJson(op.method.output, res) };
  }

  async function run(req: IncomingMessage, res: ServerResponse): Promise<Answer> {
    const apikey = req.headers.apikey;
    if (!(await apiKeys.check(Array.isArray(apikey) ? apikey[0] : apikey))) {
      throw new AppError("unauthorized", apikey ? "The apikey header is not a valid gateway API key." : "Missing gateway API key: send it in the \"apikey\" header.");
    }
    const body = parseObject(await readBody(req, deps.maxBodyBytes));
    const name = body.op;
    if (typeof name !== "string" || !name) {
      throw new AppError("invalid_request", "The request body needs a string field \"op\" naming the operation.", { field: "op" });
    }
    const op = registry.get(name);
    if (!op) {
      throw new AppError("invalid_request", `Unknown operation "${name}". operations.list gives every name.`, { field: "op", did_you_mean: registry.nearest(name) });
    }
    const token = bearerOf(req.headers.authorization);
    let caller: Caller | undefined;
    if (token) {
      caller = await tokens.resolve(token);
      if (!caller) throw new AppError("unauthorized", "The access token is invalid, expired or revoked.");
    }
    authorizeOperation(op, caller);

    const rateKey = caller ? `u:${caller.userId}` : `ip:${req.socket.remoteAddress ?? "?"}`;
    const rate = await rateLimiter.hit(rateKey);
    // On the response itself: every answer from here on carries them, errors and the 429 included.
    res.setHeader("x-ratelimit-limit", String(rate.limit));
    res.setHeader("x-ratelimit-remaining", String(rate.remaining));
    if (!rate.allowed) {
      const retry = String(Math.max(1, Math.ceil(rate.resetMs / 1000)));
      res.setHeader("retry-after", retry);
      throw new AppError("rate_limited", `Rate limit of ${rate.limit} requests per minute exceeded; retry in ${retry} s.`, { retry_after_seconds: Number(retry) });
    }

    const { op: _op, ...fields } = body;
    if (!op.validate(fields)) throw validationError(op, op.validate.errors![0]!);

    const key = op.mutating ? fields.idempotency_key : undefined;
    delete fields.idempotency_key;
    if (typeof key === "string" && caller) {
      const claim = await idempotency.claim(caller.userId, op.name, key, sha256Hex(canonicalJson(body)));
      if (claim.kind === "replay") return { ...claim.response, headers: { "idempotent-replayed": "true" } };
      let outcome: OpOutcome;
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
