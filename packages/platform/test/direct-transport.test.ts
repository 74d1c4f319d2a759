/**
 * The all-in-one process's in-process transport: client interceptors, then server interceptors,
 * then the handler, in that order; the handler knows the call's deadline; failures reach the
 * caller as ConnectErrors with their code, or as a cancellation once the caller's signal aborted;
 * a call past its deadline is answered deadline_exceeded at once and its handler's signal aborts.
 */
import test from "ava";
import { Code, ConnectError, createClient, createRouterTransport, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { createDirectTransport } from "../src/direct-transport.ts";
import { boundedByCall, callDeadlineKey, runInCallScope } from "../src/call-scope.ts";

function transportWith(handler: (apikey: string, ctx: { timeoutMs(): number | undefined; header: Headers; signal: AbortSignal; deadline: number | undefined }) => Promise<boolean>, order: string[] = []) {
  const tag = (name: string): Interceptor => (next) => async (req) => { order.push(name); return next(name === "client-2" ? { ...req } : req); };
  const routes = (r: import("@connectrpc/connect").ConnectRouter) => r.service(AuthService, {
    async checkApiKey(req: { apikey: string }, ctx: HandlerContext) { order.push("handler"); return { valid: await handler(req.apikey, { timeoutMs: ctx.timeoutMs, header: ctx.requestHeader, signal: ctx.signal, deadline: ctx.values.get(callDeadlineKey) }) }; },
  } as never);
  return createDirectTransport({
    routes, clientInterceptors: [tag("client-1"), tag("client-2")], serverInterceptors: [tag("server-1")],
    streams: createRouterTransport(routes),
  });
}

test("interceptors run client first, then server, then the handler, with the deadline known", async (t) => {
  const order: string[] = [];
  let left: number | undefined;
  let deadline: number | undefined;
  const client = createClient(AuthService, transportWith(async (key, ctx) => { left = ctx.timeoutMs(); deadline = ctx.deadline; return key === "k"; }, order));
  const asked = Date.now();
  t.true((await client.checkApiKey({ apikey: "k" }, { timeoutMs: 5000 })).valid);
  t.deepEqual(order, ["client-1", "client-2", "server-1", "handler"]);
  t.true(left !== undefined && left > 4000 && left <= 5000, String(left));
  // The deadline is in the context values too, where the authentication interceptor puts it in the call's scope.
  t.true(deadline !== undefined && deadline >= asked + 5000 && deadline <= Date.now() + 5000, String(deadline));
  t.false((await client.checkApiKey({ apikey: "x" })).valid);
  t.is(deadline, undefined, "a call without a deadline has none");
});

test("a handler's failure is a ConnectError with its code; an aborted signal is a cancellation", async (t) => {
  const client = createClient(AuthService, transportWith(async (key) => {
    if (key === "boom") throw new ConnectError("no such key", Code.NotFound);
    if (key === "plain") throw new Error("plain failure");
    return true;
  }));
  const err = await t.throwsAsync(client.checkApiKey({ apikey: "boom" }));
  t.true(err instanceof ConnectError);
  t.is((err as ConnectError).code, Code.NotFound);
  const plain = await t.throwsAsync(client.checkApiKey({ apikey: "plain" }));
  t.true(plain instanceof ConnectError);
  // A call that fails once its caller gave up is a cancellation, whatever the handler threw.
  const abort = new AbortController();
  abort.abort();
  const cancelled = await t.throwsAsync(client.checkApiKey({ apikey: "plain" }, { signal: abort.signal }));
  t.is((cancelled as ConnectError).code, Code.Canceled);
});

/** Resolves once `signal` aborts, with its reason, or after `ms` with "never aborted". */
function abortedWithin(signal: AbortSignal, ms: number): Promise<unknown> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve("never aborted"), ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(signal.reason); }, { once: true });
  });
}

test("a call past its deadline is answered deadline_exceeded at the deadline, and its handler's signal aborts", async (t) => {
  let handlerSignal: AbortSignal | undefined;
  let handlerDone = false;
  const client = createClient(AuthService, transportWith(async (_key, ctx) => {
    handlerSignal = ctx.signal;
    // A handler that goes on past the deadline (a download, a statement waiting for a lock).
    await abortedWithin(ctx.signal, 5_000);
    await new Promise((r) => setTimeout(r, 300));
    handlerDone = true;
    return true;
  }));
  const started = Date.now();
  const err = await t.throwsAsync(client.checkApiKey({ apikey: "k" }, { timeoutMs: 150 }));
  const waited = Date.now() - started;
  t.is((err as ConnectError).code, Code.DeadlineExceeded);
  t.true(waited >= 140 && waited < 2_000, `answered after ${waited} ms`);
  t.false(handlerDone, "answered without waiting for the handler");
  t.true(handlerSignal!.aborted);
  t.is(ConnectError.from(handlerSignal!.reason).code, Code.DeadlineExceeded);
  // A call that ends in time leaves its handler's signal as it was.
  let inTime: AbortSignal | undefined;
  const quick = createClient(AuthService, transportWith(async (_key, ctx) => { inTime = ctx.signal; return true; }));
  t.true((await quick.checkApiKey({ apikey: "k" }, { timeoutMs: 150 })).valid);
  t.is(await abortedWithin(inTime!, 300), "never aborted");
});

test("a caller's abort during a call with a deadline cancels it and aborts its handler's signal", async (t) => {
  let handlerSignal: AbortSignal | undefined;
  const client = createClient(AuthService, transportWith(async (_key, ctx) => {
    handlerSignal = ctx.signal;
    await abortedWithin(ctx.signal, 5_000);
    return true;
  }));
  const caller = new AbortController();
  setTimeout(() => caller.abort(), 50);
  const err = await t.throwsAsync(client.checkApiKey({ apikey: "k" }, { timeoutMs: 10_000, signal: caller.signal }));
  t.is((err as ConnectError).code, Code.Canceled);
  t.true(handlerSignal!.aborted);
});

test("a call made while another is handled, with its signal and deadline (boundedByCall), runs within that call: the handler knows the deadline and ends with it", async (t) => {
  let seen: { left: number | undefined; deadline: number | undefined; signal: AbortSignal } | undefined;
  const bounded = boundedByCall(transportWith(async (_key, ctx) => {
    seen = { left: ctx.timeoutMs(), deadline: ctx.deadline, signal: ctx.signal };
    await abortedWithin(ctx.signal, 5_000);
    return true;
  }));
  const client = createClient(AuthService, bounded);
  const handled = new AbortController();
  const deadline = Date.now() + 2_000;
  const nested = runInCallScope({ principal: { internal: true }, service: "test", signal: handled.signal, deadline }, () => client.checkApiKey({ apikey: "k" }));
  for (let i = 0; i < 50 && !seen; i++) await new Promise((r) => setTimeout(r, 10));
  t.is(seen!.deadline, deadline, "the deadline of the call being handled");
  t.true(seen!.left !== undefined && seen!.left > 1_000 && seen!.left <= 2_000, String(seen!.left));
  t.false(seen!.signal.aborted);
  handled.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
  t.true(seen!.signal.aborted, "it ends when the call being handled ends");
  t.true((await nested).valid, "the handler's answer still reaches the handler that asked");
  // A shorter deadline of its own is its own: answered deadline_exceeded then.
  const short = runInCallScope({ principal: { internal: true }, service: "test", signal: new AbortController().signal, deadline: Date.now() + 5_000 }, () => client.checkApiKey({ apikey: "k" }, { timeoutMs: 100 }));
  t.is(((await t.throwsAsync(short)) as ConnectError).code, Code.DeadlineExceeded);
});
