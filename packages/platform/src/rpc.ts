/**
 * Connect plumbing shared by every service: server interceptors (tracing, request validation
 * with protovalidate, error mapping) and the rule that tells which service owns a proto service.
 */
import type { DescService } from "@bufbuild/protobuf";
import { pathToString } from "@bufbuild/protobuf/reflect";
import { configureTextEncoding, getTextEncoding } from "@bufbuild/protobuf/wire";
import { createValidator } from "@bufbuild/protovalidate";
import type { Interceptor } from "@connectrpc/connect";
import { ConnectError } from "@connectrpc/connect";
import { AppError, toConnectError } from "./errors.js";
import { serverTracing, clientTracing } from "./telemetry.js";
import type { Logger } from "./logger.js";
import type { ServiceName } from "./config.js";

const validator = createValidator();

/**
 * protobuf-es checks that strings are well-formed UTF-16 before encoding them; its portable check
 * costs ~13 ms per MiB, which base64 chunks of several MiB pay on every hop. Node has a native
 * one. Called by the launcher (a process-wide setting, not a side effect of importing).
 */
export function useNativeUtf8Check(): void {
  configureTextEncoding({ ...getTextEncoding(), checkUtf8: (text: string) => (text as string & { isWellFormed(): boolean }).isWellFormed() });
}

/** Rejects a request that breaks its message's buf.validate rules (internal callers included). */
export const validateRequests: Interceptor = (next) => async (req) => {
  if (!req.stream) {
    const result = validator.validate(req.method.input, req.message);
    if (result.kind === "invalid") {
      const v = result.violations[0]!;
      const field = pathToString(v.field);
      throw new AppError("invalid_request", `Field "${field}" ${v.message}.`, { field });
    }
    if (result.kind === "error") throw result.error;
  }
  return next(req);
};

/** Every thrown value leaves a handler as a ConnectError carrying the contract's error. */
export function mapErrors(log: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (!(err instanceof AppError) && !(err instanceof ConnectError)) {
        log.error({ err, rpc: `${req.service.typeName}/${req.method.name}` }, "unhandled error in handler");
      }
      throw toConnectError(err);
    }
  };
}

/** Server side of every service port and of the in-process router: trace, map errors, authenticate, validate. */
export function serverInterceptors(log: Logger, authenticate: Interceptor): Interceptor[] {
  return [serverTracing, mapErrors(log), authenticate, validateRequests];
}

/** Client side of every call to a service: trace, then sign the caller assertion. */
export function clientInterceptors(assert: Interceptor): Interceptor[] {
  return [clientTracing, assert];
}

export { ownerOf } from "./config.js";
