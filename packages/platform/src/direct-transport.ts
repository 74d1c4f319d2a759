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
  createContextValues, createHandlerContext, createServiceImplSpec, type ConnectRouter, type Interceptor, type MethodImplSpec, type Transport,
} from "@connectrpc/connect";
import { invokeUnaryImplementation, runUnaryCall } from "@connectrpc/connect/protocol";
import type { DescMessage, DescService } from "@bufbuild/protobuf";

export interface DirectTransportOptions {
  /** Registers the services of this process, as for a ConnectRouter. */
  routes: (router: ConnectRouter) => void;
  serverInterceptors: Interceptor[];
  clientInterceptors: Interceptor[];
  /** Carries what is not a unary call of a registered service. */
  streams: Transport;
}

/** Collects the implementations a routes function registers. */
function collect(routes: (router: ConnectRouter) => void): Map<string, MethodImplSpec> {
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

/** The reason a handler's signal is aborted with once its call is over. */
const CALL_ENDED = Object.freeze(new Error("the call has ended"));

export function createDirectTransport(opts: DirectTransportOptions): Transport {
  const specs = collect(opts.routes);
  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const spec = specs.get(`${method.parent.typeName}/${method.name}`);
      if (spec?.kind !== "unary") return opts.streams.unary(method, signal, timeoutMs, header, input, contextValues);
      return runUnaryCall({
        interceptors: opts.clientInterceptors,
        signal,
        timeoutMs,
        req: {
          stream: false,
          service: method.parent,
          method,
          requestMethod: "POST",
          url: `in-process:/${method.parent.typeName}/${method.name}`,
          header: new Headers(header),
          contextValues: contextValues ?? createContextValues(),
          message: input,
        },
        next: async (req) => {
          // The server side gets its own context values, as it would on another process.
          const context = createHandlerContext({
            service: method.parent, method, protocolName: "in-process", requestMethod: "POST", url: req.url,
            requestSignal: req.signal, requestHeader: req.header, timeoutMs,
          });
          try {
            const message = await invokeUnaryImplementation(spec as MethodImplSpec<DescMessage, DescMessage> & { kind: "unary" }, context, req.message, opts.serverInterceptors);
            return { stream: false, service: method.parent, method, header: context.responseHeader, trailer: context.responseTrailer, message } as never;
          } finally {
            // Ends the handler's signal; a shared reason spares building an AbortError (and its
            // stack) on every call.
            context.abort(CALL_ENDED);
          }
        },
      });
    },
    stream: (...args) => opts.streams.stream(...args),
  };
}
