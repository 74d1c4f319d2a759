/**
 * The in-process transport of the all-in-one target: a unary call runs the client interceptors,
 * then the server interceptors and the service's handler, with the request and response
 * messages handed over as objects. Connect's own router transport does the same through the
 * protocol, encoding every message to bytes and back; for answers of a hundred collections that
 * encoding cost more than the handler's query. The handlers, the interceptors (tracing, error
 * mapping, caller assertions, validation) and the message types are the same as between
 * processes; only the bytes are skipped. Streaming calls go to `streams` (the router transport).
 *
 * Messages cross by reference: a handler must not change the request it was given, and a caller
 * must not change the response it got (neither does here).
 */
import {
  Code, ConnectError, createContextValues, createServiceImplSpec,
  type ConnectRouter, type ContextValues, type HandlerContext, type Interceptor, type MethodImplSpec, type Transport, type UnaryRequest, type UnaryResponse,
} from "@connectrpc/connect";
import { getAbortSignalReason, invokeUnaryImplementation } from "@connectrpc/connect/protocol";
import { create } from "@bufbuild/protobuf";
import type { DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { callDeadlineKey, currentCall } from "./call-scope.js";

export interface DirectTransportOptions {
  /** Registers the services of this process, as for a ConnectRouter. */
  routes: (router: ConnectRouter) => void;
  serverInterceptors: Interceptor[];
  clientInterceptors: Interceptor[];
  /** Carries what is not a unary call of a registered service. */
  streams: Transport;
}

/** Collects the implementations a routes function registers, by "<service>/<method>". */
export function collectImplementations(routes: (router: ConnectRouter) => void): Map<string, MethodImplSpec> {
  const specs = new Map<string, MethodImplSpec>();
  const router = {
    handlers: [],
    service(service: DescService, impl: Record<string, unknown>) {
      const spec = createServiceImplSpec(service, impl as never);
      for (const m of Object.values(spec.methods)) specs.set(`${service.typeName}/${m.method.name}`, m as MethodImplSpec);
      return router;
    },
    rpc() {
      throw new Error("the direct transport takes services registered with router.service()");
    },
  };
  routes(router as unknown as ConnectRouter);
  return specs;
}

/** The signal of a call made without one: nothing aborts it. */
export const NEVER_ABORTED = new AbortController().signal;

/** One unary call, from its request to its response. */
export type UnaryCall = (req: UnaryRequest) => Promise<UnaryResponse>;

/**
 * The interceptors wrapped around `last` once, first interceptor outermost (as Connect's
 * applyInterceptors, which it does not export, does on every call).
 */
export function chainInterceptors(interceptors: Interceptor[], last: UnaryCall): UnaryCall {
  return interceptors.reduceRight<UnaryCall>((next, i) => i(next as never) as never, last);
}

/**
 * A unary handler's context without connect's two deadline timers and four abort controllers:
 * the deadline (epoch ms) is known to the handler through timeoutMs() (and to its call's scope
 * through callDeadlineKey), and the signal is the one given. The server side gets context values
 * of its own, as on another process.
 */
export function unaryHandlerContext(method: DescMethod, init: { protocolName: string; url: string; signal: AbortSignal; deadline?: number; requestHeader: Headers }): HandlerContext {
  const { deadline } = init;
  const values = createContextValues();
  if (deadline !== undefined) values.set(callDeadlineKey, deadline);
  return {
    service: method.parent, method, protocolName: init.protocolName, requestMethod: "POST", url: init.url,
    signal: init.signal, timeoutMs: deadline === undefined ? noTimeout : () => deadline - Date.now(),
    requestHeader: init.requestHeader, responseHeader: new Headers(), responseTrailer: new Headers(), values,
  } as HandlerContext;
}

/**
 * Connect's runUnaryCall and createHandlerContext give each call two deadline timers, four abort
 * controllers and their listeners, and an AbortError built when the call ends: more than the
 * rest of the hop in process. Here a call without a deadline runs the client interceptors and then
 * the server side over the caller's signal (if any) as it is. A call with one gets one timer and
 * one controller, as on a service port (connect-unary.ts): at the deadline its caller is answered
 * deadline_exceeded and the handler's signal aborts, so that what it still does stops (a download
 * in progress) or commits nothing (the unit of work), as in split mode. A call a handler makes to
 * another service within its own call's deadline and signal (call-scope.ts, boundedByCall) runs
 * over that signal, which ends it at that deadline. Failures reach the caller as ConnectErrors
 * exactly as runUnaryCall makes them.
 */
export function createDirectTransport(opts: DirectTransportOptions): Transport {
  const specs = collectImplementations(opts.routes);

  /** The server side of a call: the handler context, the server interceptors, the handler. */
  const serve = async (req: UnaryRequest): Promise<UnaryResponse> => {
    const spec = specs.get(`${req.service.typeName}/${req.method.name}`) as MethodImplSpec<DescMessage, DescMessage> & { kind: "unary" };
    const context = unaryHandlerContext(req.method, { protocolName: "in-process", url: req.url, signal: req.signal, deadline: deadlines.get(req.header), requestHeader: req.header });
    const message = await invokeUnaryImplementation(spec, context, req.message, opts.serverInterceptors);
    return { stream: false, service: req.service, method: req.method, header: context.responseHeader, trailer: context.responseTrailer, message } as UnaryResponse;
  };
  /**
   * Deadlines (epoch ms) of the calls under way that have one, by the call's header object:
   * interceptors may pass a copy of the request on, but with the same headers.
   */
  const deadlines = new WeakMap<Headers, number>();
  const call = chainInterceptors(opts.clientInterceptors, serve);

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const spec = specs.get(`${method.parent.typeName}/${method.name}`);
      if (spec?.kind !== "unary") return opts.streams.unary(method, signal, timeoutMs, header, input, contextValues);
      // A call a handler makes with the signal of its own call, and no shorter deadline than that
      // call's (boundedByCall gives it both): that signal ends it at the deadline, with the timer of
      // the call being handled, whose caller is answered then. It needs no timer of its own.
      const handled = currentCall();
      const inherited = timeoutMs !== undefined && handled?.deadline !== undefined && signal === handled.signal && Date.now() + timeoutMs >= handled.deadline;
      if (timeoutMs === undefined || inherited) {
        const req = inProcessRequest(method, header, input, contextValues, signal ?? NEVER_ABORTED);
        if (inherited) deadlines.set(req.header, handled!.deadline!);
        try {
          return await call(req) as never;
        } catch (reason) {
          throw failure(req.signal, reason);
        }
      }
      // Ended by the deadline or by the caller's abort, whichever comes first: the caller is
      // answered at once, and the handler's signal says why.
      if (signal?.aborted) throw ConnectError.from(getAbortSignalReason(signal), Code.Canceled);
      const ends = new AbortController();
      let stop!: (error: ConnectError) => void;
      const ended = new Promise<never>((_, reject) => { stop = (error) => { ends.abort(error); reject(error); }; });
      const onCallerAbort = () => stop(ConnectError.from(getAbortSignalReason(signal!), Code.Canceled));
      signal?.addEventListener("abort", onCallerAbort);
      const timer = setTimeout(() => stop(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeoutMs);
      const req = inProcessRequest(method, header, input, contextValues, ends.signal);
      deadlines.set(req.header, Date.now() + timeoutMs);
      try {
        return await Promise.race([call(req), ended]) as never;
      } catch (reason) {
        throw failure(ends.signal, reason);
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onCallerAbort);
      }
    },
    stream: (...args) => opts.streams.stream(...args),
  };
}

const noTimeout = () => undefined;

/** The request of an in-process unary call, as a transport's `unary` is given it. */
function inProcessRequest(method: DescMethod, header: HeadersInit | undefined, input: unknown, contextValues: ContextValues | undefined, signal: AbortSignal): UnaryRequest {
  return {
    stream: false, service: method.parent, method, requestMethod: "POST", url: `in-process:/${method.parent.typeName}/${method.name}`,
    header: new Headers(header), contextValues: contextValues ?? createContextValues(), message: create(method.input, input as never), signal,
  } as UnaryRequest;
}

/** What the caller of an in-process call is told: the deadline's own ConnectError, a cancellation, or the failure. */
function failure(callSignal: AbortSignal, reason: unknown): ConnectError {
  return callSignal.aborted ? ConnectError.from(getAbortSignalReason(callSignal), Code.Canceled) : ConnectError.from(reason);
}
