/**
 * Connect plumbing shared by every service: server interceptors (tracing, request validation
 * with protovalidate, error mapping) and the rule that tells which service owns a proto service.
 */
import { ScalarType, getOption, hasOption, type DescMessage } from "@bufbuild/protobuf";
import { field as fieldOption } from "@cms/contracts/common/v1/options_pb";
import { pathToString } from "@bufbuild/protobuf/reflect";
import { createValidator } from "@bufbuild/protovalidate";
import type { Interceptor } from "@connectrpc/connect";
import { ConnectError } from "@connectrpc/connect";
import { AppError, toConnectError } from "./errors.js";
import { serverTracing, clientTracing } from "./telemetry.js";
import type { Logger } from "./logger.js";
import type { ServiceName } from "./config.js";

const validator = createValidator();

/** The defaults a request message declares ((common.v1.field).default_json), read once per message type. */
const defaultsOf = new WeakMap<DescMessage, Array<[string, unknown]>>();
function declaredDefaults(message: DescMessage): Array<[string, unknown]> {
  let list = defaultsOf.get(message);
  if (list) return list;
  list = [];
  for (const field of message.fields) {
    // Lists have no "omitted" distinct from empty: their defaults stay documentation.
    if (field.fieldKind !== "scalar" && field.fieldKind !== "enum") continue;
    if (field.presence !== 1 /* EXPLICIT */ || !hasOption(field, fieldOption)) continue;
    const json = getOption(field, fieldOption).defaultJson;
    if (!json) continue;
    let value: unknown = JSON.parse(json);
    if (field.fieldKind === "scalar" && [ScalarType.INT64, ScalarType.UINT64, ScalarType.SINT64, ScalarType.FIXED64, ScalarType.SFIXED64].includes(field.scalar)) value = BigInt(value as number);
    list.push([field.localName, value]);
  }
  defaultsOf.set(message, list);
  return list;
}

/**
 * Fills in the defaults the request message declares for fields the caller omitted, once, as
 * the request arrives: handlers never repeat a default, and direct callers get the same ones as
 * the JSON endpoint.
 */
export const applyDefaults: Interceptor = (next) => async (req) => {
  if (!req.stream) {
    const message = req.message as unknown as Record<string, unknown>;
    for (const [name, value] of declaredDefaults(req.method.input)) if (message[name] === undefined) message[name] = value;
  }
  return next(req);
};

/**
 * The request with `keys` known to be set: fields that declare a default, filled in by
 * applyDefaults. A missing one is a bug (no default declared), not bad input.
 */
export function defaulted<T extends object, K extends keyof T>(req: T, ...keys: K[]): T & { [P in K]-?: Exclude<T[P], undefined> } {
  for (const k of keys) {
    if (req[k] === undefined) throw new Error(`${String(k)} has no default: declare (common.v1.field).default_json on the request field`);
  }
  return req as T & { [P in K]-?: Exclude<T[P], undefined> };
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

/**
 * The unary handlers running in this process. A handler can run on after its caller was
 * answered (its deadline passed, its caller went away) and still need its pool: a create whose
 * media step failed undoes its collection then. A stop waits for them before it closes the
 * pools; streams (health's Watch, reflection) are not counted, they end with their connection.
 */
export interface RunningHandlers {
  /** Counts each unary call from its start to its handler's end. */
  interceptor: Interceptor;
  count(): number;
  /** Resolves once none runs, or after `ms`: whether none runs. */
  settled(ms: number): Promise<boolean>;
}

export function runningHandlers(): RunningHandlers {
  let running = 0;
  let waiters: Array<() => void> = [];
  const interceptor: Interceptor = (next) => async (req) => {
    if (req.stream) return next(req);
    running++;
    try {
      return await next(req);
    } finally {
      if (--running === 0) {
        for (const wake of waiters) wake();
        waiters = [];
      }
    }
  };
  return {
    interceptor,
    count: () => running,
    settled(ms) {
      if (running === 0) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(running === 0), ms);
        waiters.push(() => { clearTimeout(timer); resolve(true); });
      });
    },
  };
}

/**
 * Server side of every service port and of the in-process router: count, trace, map errors,
 * authenticate, validate.
 */
export function serverInterceptors(log: Logger, authenticate: Interceptor, running: RunningHandlers): Interceptor[] {
  return [running.interceptor, serverTracing, mapErrors(log), authenticate, validateRequests, applyDefaults];
}

/** Client side of every call to a service: trace, then sign the caller assertion. */
export function clientInterceptors(assert: Interceptor): Interceptor[] {
  return [clientTracing, assert];
}

export { ownerOf } from "./config.js";
