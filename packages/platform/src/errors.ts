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

/** HTTP status of each code (the contract's Errors table, completed by conventions.md). */
export const STATUS_OF: Record<ErrorCode, number> = {
  unauthorized: 401,
  insufficient_scope: 403,
  forbidden: 403,
  insufficient_permission: 403,
  not_found: 404,
  invalid_request: 400,
  confirmation_required: 400,
  duplicate_collection_name: 409,
  cycle_detected: 409,
  publish_handle_locked: 409,
  slug_taken: 409,
  collection_not_empty: 409,
  idempotency_key_reused: 409,
  restore_window_expired: 410,
  rate_limited: 429,
  payload_too_large: 413,
  server_error: 500,
  not_implemented: 501,
  unavailable: 503,
  alias_limit_reached: 409,
  name_reserved: 400,
  secret_material_detected: 400,
  webhook_url_not_https: 400,
  webhook_url_has_credentials: 400,
  webhook_url_blocked_host: 400,
  webhook_url_service_host: 400,
  conflict: 409,
};

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

const CONNECT_CODE_OF_STATUS: Record<number, Code> = {
  400: Code.InvalidArgument,
  401: Code.Unauthenticated,
  403: Code.PermissionDenied,
  404: Code.NotFound,
  409: Code.AlreadyExists,
  410: Code.FailedPrecondition,
  413: Code.ResourceExhausted,
  429: Code.ResourceExhausted,
  501: Code.Unimplemented,
  503: Code.Unavailable,
};

/** AppError (or anything thrown) to a ConnectError that carries the contract detail. */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const app = err instanceof AppError ? err : new AppError("server_error", "Internal error; safe to retry with exponential backoff.");
  const ce = new ConnectError(app.detail, CONNECT_CODE_OF_STATUS[app.status] ?? Code.Internal, undefined, [
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
  const ce = ConnectError.from(err);
  const [detail] = ce.findDetails(ErrorDetailSchema);
  if (detail) {
    return new AppError(detail.code as ErrorCode, detail.detail, (detail.extra ?? {}) as ErrorExtra, detail.httpStatus);
  }
  switch (ce.code) {
    case Code.Unimplemented:
      return new AppError("not_implemented", "This operation is not implemented by this server yet.");
    case Code.InvalidArgument:
      return new AppError("invalid_request", ce.rawMessage);
    case Code.Unavailable:
    case Code.DeadlineExceeded:
      return new AppError("unavailable", "A backing service is unavailable; safe to retry with exponential backoff.");
    default:
      return new AppError("server_error", "Internal error; safe to retry with exponential backoff.");
  }
}
