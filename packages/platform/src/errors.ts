/**
 * One error type for the whole system. An AppError carries the contract's error code, the HTTP
 * status the gateway answers with, a human sentence and the extra fields named for that code.
 * Between services it travels as a ConnectError with a common.v1.ErrorDetail attached; the
 * gateway turns it back into the contract's body. Unknown failures become server_error without
 * leaking their message.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import type { JsonObject } from "@bufbuild/protobuf";
import { ErrorDetailSchema } from "@cms/contracts/common/v1/common_pb";

export type ErrorCode =
  | "unauthorized"
  | "insufficient_scope"
  | "forbidden"
  | "insufficient_permission"
  | "not_found"
  | "invalid_request"
  | "confirmation_required"
  | "duplicate_collection_name"
  | "cycle_detected"
  | "publish_handle_locked"
  | "slug_taken"
  | "collection_not_empty"
  | "idempotency_key_reused"
  | "restore_window_expired"
  | "rate_limited"
  | "payload_too_large"
  | "server_error"
  | "not_implemented"
  | "unavailable"
  | "alias_limit_reached"
  | "name_reserved"
  | "secret_material_detected"
  | "webhook_url_not_https"
  | "webhook_url_has_credentials"
  | "webhook_url_blocked_host"
  | "webhook_url_service_host"
  | "conflict";

/**
 * Each code's HTTP status (the contract's Errors table, completed by conventions.md) and the
 * gRPC status internal callers see, in one table.
 */
export const ERROR_CODES: Record<ErrorCode, { http: number; grpc: Code }> = {
  unauthorized: { http: 401, grpc: Code.Unauthenticated },
  insufficient_scope: { http: 403, grpc: Code.PermissionDenied },
  forbidden: { http: 403, grpc: Code.PermissionDenied },
  insufficient_permission: { http: 403, grpc: Code.PermissionDenied },
  not_found: { http: 404, grpc: Code.NotFound },
  invalid_request: { http: 400, grpc: Code.InvalidArgument },
  confirmation_required: { http: 400, grpc: Code.InvalidArgument },
  duplicate_collection_name: { http: 409, grpc: Code.AlreadyExists },
  cycle_detected: { http: 409, grpc: Code.FailedPrecondition },
  publish_handle_locked: { http: 409, grpc: Code.FailedPrecondition },
  slug_taken: { http: 409, grpc: Code.AlreadyExists },
  collection_not_empty: { http: 409, grpc: Code.FailedPrecondition },
  idempotency_key_reused: { http: 409, grpc: Code.AlreadyExists },
  restore_window_expired: { http: 410, grpc: Code.FailedPrecondition },
  rate_limited: { http: 429, grpc: Code.ResourceExhausted },
  payload_too_large: { http: 413, grpc: Code.ResourceExhausted },
  server_error: { http: 500, grpc: Code.Internal },
  not_implemented: { http: 501, grpc: Code.Unimplemented },
  unavailable: { http: 503, grpc: Code.Unavailable },
  alias_limit_reached: { http: 409, grpc: Code.ResourceExhausted },
  name_reserved: { http: 400, grpc: Code.InvalidArgument },
  secret_material_detected: { http: 400, grpc: Code.InvalidArgument },
  webhook_url_not_https: { http: 400, grpc: Code.InvalidArgument },
  webhook_url_has_credentials: { http: 400, grpc: Code.InvalidArgument },
  webhook_url_blocked_host: { http: 400, grpc: Code.InvalidArgument },
  webhook_url_service_host: { http: 400, grpc: Code.InvalidArgument },
  conflict: { http: 409, grpc: Code.Aborted },
};

/** HTTP status of each code. */
export const STATUS_OF = Object.fromEntries(Object.entries(ERROR_CODES).map(([code, s]) => [code, s.http])) as Record<ErrorCode, number>;

export type ErrorExtra = Record<string, unknown>;

export class AppError extends Error {
  override name = "AppError";
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly extra: ErrorExtra = {},
    status?: number,
  ) {
    super(`${code}: ${detail}`);
    this.status = status ?? STATUS_OF[code];
  }

  /** The contract's error body: {"error": code, "detail": ..., ...extra}. */
  toBody(): Record<string, unknown> {
    return { error: this.code, detail: this.detail, ...this.extra };
  }
}

/** Shorthands for the common cases, so call sites read like the contract. */
export const errors = {
  invalid: (detail: string, field?: string, extra: ErrorExtra = {}) =>
    new AppError("invalid_request", detail, field === undefined ? extra : { field, ...extra }),
  notFound: (detail: string, extra: ErrorExtra = {}) => new AppError("not_found", detail, extra),
  forbidden: (detail: string) => new AppError("forbidden", detail),
  unauthorized: (detail: string) => new AppError("unauthorized", detail),
  notImplemented: (op: string) =>
    new AppError("not_implemented", `The operation ${op} is declared in the contract but not implemented by this server yet.`),
};

/** The contract's 503 for a dependency that went away or ran out of room: the one sentence every such failure answers. */
const unavailable = () => new AppError("unavailable", "A backing service is unavailable; safe to retry with exponential backoff.");

/**
 * SQLSTATEs of a lost or refused database connection, an engine shutting down or a failover, of
 * class 53, insufficient resources (a full disk, out of memory, too many connections), and of a
 * lock not had within the session's lock_timeout (55P03, another session holding the row): the
 * database cannot take the statement now, and an operator's or time's fix makes the same one work.
 */
const TRANSIENT_SQLSTATE = /^(08...|57P0[1-4]|53...|25006|55P03)$/;
/**
 * Node errors of a peer that went away or never answered, of a full disk or quota under the file
 * store, and of a process (or system) out of file descriptors for the moment: every connection
 * and file it holds counts, and they are given back as requests end.
 */
const TRANSIENT_ERRNO = new Set([
  "ENOSPC", "EDQUOT", "EMFILE", "ENFILE",
  "ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "ECONNABORTED", "UND_ERR_SOCKET", "UND_ERR_CONNECT_TIMEOUT",
  // An HTTP/2 connection to a service that died or went away mid-call.
  "ERR_HTTP2_STREAM_ERROR", "ERR_HTTP2_SESSION_ERROR", "ERR_HTTP2_GOAWAY_SESSION", "ERR_HTTP2_INVALID_SESSION", "ERR_HTTP2_STREAM_CANCEL", "ERR_STREAM_PREMATURE_CLOSE",
]);
/** What the pg driver and knex say when a connection dies or none can be had (they set no code). */
const TRANSIENT_MESSAGE = new RegExp([
  "Connection terminated", "connection error and is not queryable", "Client was closed and is not queryable", "timeout exceeded when trying to connect",
  "Timeout acquiring a connection", "terminating connection due to administrator command", "the database system is (starting up|shutting down|in recovery mode)",
  "Connection ended unexpectedly", "socket hang up",
  // connect-node's words for a peer that died mid-call (its process killed, its session gone).
  "http/2 stream closed with error code", "expected open session, but it is", "received GOAWAY", "connection aborted", "sentinel completed early", "premature close",
  // The S3 client's connection timeout (its answer's timeout has the code ETIMEDOUT).
  "did not establish a connection with the server within",
].join("|"), "i");

/**
 * Whether a failure is a dependency going away (a database connection terminated, the engine
 * restarting, a pool that cannot connect, a peer resetting the socket) or out of room (a full
 * disk under the file store or the database) rather than a bug: such a
 * failure is the contract's 503 `unavailable`, safe to retry, never a 500 carrying a driver's
 * message. Looks through `cause` chains (knex and Connect wrap the driver's error).
 */
export function isTransientFailure(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, message, name } = e as { code?: unknown; message?: unknown; name?: unknown };
    if (typeof code === "string" && (TRANSIENT_SQLSTATE.test(code) || TRANSIENT_ERRNO.has(code))) return true;
    if (name === "KnexTimeoutError") return true;
    if (typeof message === "string" && TRANSIENT_MESSAGE.test(message)) return true;
  }
  return false;
}

/** AppError (or anything thrown) to a ConnectError that carries the contract detail. */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const app = err instanceof AppError ? err
    : isTransientFailure(err) ? unavailable()
    : new AppError("server_error", "Internal error; safe to retry with exponential backoff.");
  const ce = new ConnectError(app.detail, ERROR_CODES[app.code]?.grpc ?? Code.Internal, undefined, [
    {
      desc: ErrorDetailSchema,
      value: create(ErrorDetailSchema, {
        code: app.code,
        httpStatus: app.status,
        detail: app.detail,
        extra: app.extra as JsonObject,
      }),
    },
  ], err);
  return ce;
}

/** A ConnectError (from a client call) back to an AppError with the contract's code. */
export function fromConnectError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (!(err instanceof ConnectError) && isTransientFailure(err)) {
    return unavailable();
  }
  const ce = ConnectError.from(err);
  const [detail] = ce.findDetails(ErrorDetailSchema);
  if (detail) {
    return new AppError(detail.code as ErrorCode, detail.detail, (detail.extra ?? {}) as ErrorExtra, detail.httpStatus);
  }
  // Every error a service answers carries an ErrorDetail (toConnectError); one without it comes
  // from the transport. Aborted is connect-node's code for a reset connection; the messages and
  // causes say when the peer died or went away mid-call.
  if (ce.code === Code.Aborted || isTransientFailure(ce)) {
    return unavailable();
  }
  switch (ce.code) {
    case Code.Unimplemented:
      return new AppError("not_implemented", "This operation is not implemented by this server yet.");
    case Code.InvalidArgument:
      return new AppError("invalid_request", ce.rawMessage);
    case Code.Unavailable:
      return unavailable();
    case Code.DeadlineExceeded:
      // The service is up but did not answer in time (waiting for a row, a slow source_url).
      return new AppError("unavailable", "The operation did not finish within its time limit; safe to retry with exponential backoff.");
    default:
      return new AppError("server_error", "Internal error; safe to retry with exponential backoff.");
  }
}
