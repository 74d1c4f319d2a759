/**
 * The call a service is handling in this async context: its verified principal, the service
 * handling it, the signal that ends it (the caller's deadline passed, or the caller went away)
 * and its deadline when known. Set once per call by the authentication interceptor (authn.ts);
 * read by the calls the handler makes (on the same user's behalf, within what is left of its
 * deadline, ended with it: boundedByCall) and by the unit of work, which commits nothing for a
 * call that has ended.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { IncomingHttpHeaders } from "node:http2";
import { Code, ConnectError, createContextKey, createContextValues, type ContextValues, type Transport } from "@connectrpc/connect";
import { headerTimeout as connectTimeoutHeader, parseTimeout as parseConnectTimeout } from "@connectrpc/connect/protocol-connect";
import { headerTimeout as grpcTimeoutHeader, parseTimeout as parseGrpcTimeout } from "@connectrpc/connect/protocol-grpc";
import type { Principal } from "./caller.js";

export interface CallScope {
  principal: Principal;
  service: string;
  signal: AbortSignal;
  /** When the caller stops waiting (epoch ms); undefined when the call came without a deadline or over a protocol path that does not say. */
  deadline?: number;
}

/**
 * How long a call between services may take when nothing shorter bounds it: the gateway's
 * deadline on the operations it dispatches, and the bound of a call a job or a consumer makes.
 */
export const CALL_TIMEOUT_MS = 60_000;

/**
 * The deadline (epoch ms) of the call whose handler context carries it: set by this system's
 * unary paths (the in-process transport and the service ports' fast path), read by the
 * authentication interceptor into the call's scope.
 */
export const callDeadlineKey = createContextKey<number | undefined>(undefined, { description: "deadline of the call being handled (epoch ms)" });

const CONNECT_TIMEOUT = connectTimeoutHeader.toLowerCase();
const GRPC_TIMEOUT = grpcTimeoutHeader.toLowerCase();

/**
 * The context values of a call connect-node's handler takes (gRPC, gRPC-Web, Connect's JSON and
 * streams): its deadline, from the protocol's timeout header, as the unary paths set it. A header
 * that does not parse sets none (the handler refuses the call itself).
 */
export function deadlineValues(req: { headers: IncomingHttpHeaders }): ContextValues {
  const values = createContextValues();
  const connect = req.headers[CONNECT_TIMEOUT];
  const grpc = req.headers[GRPC_TIMEOUT];
  const { timeoutMs } = typeof connect === "string" ? parseConnectTimeout(connect, Number.MAX_SAFE_INTEGER)
    : typeof grpc === "string" ? parseGrpcTimeout(grpc, Number.MAX_SAFE_INTEGER) : {};
  if (timeoutMs !== undefined) values.set(callDeadlineKey, Date.now() + timeoutMs);
  return values;
}

const handling = new AsyncLocalStorage<CallScope>();

export function runInCallScope<T>(scope: CallScope, fn: () => T): T {
  return handling.run(scope, fn);
}

/** The call being handled in this async context; undefined in jobs, consumers and relays. */
export function currentCall(): CallScope | undefined {
  return handling.getStore();
}

/**
 * Runs `fn` outside the call being handled, as a job runs: its unit of work commits and its
 * calls go on after the call ended, bounded by CALL_TIMEOUT_MS. For what a service owes whatever
 * became of its caller, such as undoing a change its caller was told did not happen.
 */
export function outsideCall<T>(fn: () => T): T {
  return handling.exit(fn);
}

/**
 * Whether the call being handled has ended for its caller. Its caller has been answered already
 * (deadline_exceeded, which the gateway turns into a 503 "safe to retry") or is gone, so a change
 * committed now would be one the caller was told did not happen, and its retry would make it twice.
 */
export function callHasEnded(): boolean {
  return handling.getStore()?.signal.aborted === true;
}

/**
 * A transport whose unary calls are bounded by the call being handled in the async context
 * that makes them: such a call ends when that call ends (its signal) and carries what is left of
 * its deadline, so a service two hops down stops, and commits nothing, once the first caller was
 * answered; it never outlives the operation that asked for it. A call made outside any call (a
 * job, a consumer, the gateway's own) gets CALL_TIMEOUT_MS unless it sets a shorter deadline.
 * Streaming calls are passed on as they are.
 */
export function boundedByCall(inner: Transport, defaultTimeoutMs = CALL_TIMEOUT_MS): Transport {
  return {
    unary(method, signal, timeoutMs, header, input, contextValues) {
      const current = handling.getStore();
      let bound = defaultTimeoutMs;
      if (current) {
        if (current.signal.aborted) return Promise.reject(ConnectError.from(current.signal.reason, Code.Canceled));
        if (current.deadline !== undefined) bound = current.deadline - Date.now();
        if (bound <= 0) return Promise.reject(new ConnectError("the call being handled is past its deadline", Code.DeadlineExceeded));
        signal = signal ? AbortSignal.any([signal, current.signal]) : current.signal;
      }
      return inner.unary(method, signal, timeoutMs === undefined || timeoutMs <= 0 ? bound : Math.min(timeoutMs, bound), header, input, contextValues);
    },
    stream: (...args) => inner.stream(...args),
  };
}
