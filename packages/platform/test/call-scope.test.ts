/**
 * The bound of a call made while another is handled (boundedByCall): it ends with the call being
 * handled and carries what is left of its deadline; outside any call it gets the default bound;
 * a shorter deadline of its own is kept.
 */
import test from "ava";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { boundedByCall, callHasEnded, outsideCall, runInCallScope, type CallScope } from "../src/call-scope.ts";

interface Seen { signal: AbortSignal | undefined; timeoutMs: number | undefined }

/** A transport that records what its unary calls were given and answers nothing else. */
function recording(): { transport: Transport; seen: Seen[] } {
  const seen: Seen[] = [];
  const transport = {
    async unary(_method: unknown, signal: AbortSignal | undefined, timeoutMs: number | undefined) {
      seen.push({ signal, timeoutMs });
      return { message: {} };
    },
    stream: () => { throw new Error("no streams here"); },
  } as unknown as Transport;
  return { transport, seen };
}

const checkApiKey = AuthService.method.checkApiKey;
const call = (t: Transport, opts: { signal?: AbortSignal; timeoutMs?: number } = {}) => t.unary(checkApiKey, opts.signal, opts.timeoutMs, undefined, { apikey: "k" }, undefined);
const scope = (signal: AbortSignal, deadline?: number): CallScope => ({ principal: { internal: true }, service: "test", signal, deadline });

test("outside any call, a call gets the default bound unless it sets a shorter one", async (t) => {
  const { transport, seen } = recording();
  const bounded = boundedByCall(transport, 1234);
  await call(bounded);
  await call(bounded, { timeoutMs: 500 });
  await call(bounded, { timeoutMs: 5000 });
  t.deepEqual(seen.map((s) => s.timeoutMs), [1234, 500, 1234]);
  t.is(seen[0]!.signal, undefined);
});

test("while a call is handled, a call it makes carries what is left of its deadline and ends with it", async (t) => {
  const { transport, seen } = recording();
  const bounded = boundedByCall(transport, 60_000);
  const handled = new AbortController();
  await runInCallScope(scope(handled.signal, Date.now() + 2000), () => call(bounded));
  const { signal, timeoutMs } = seen[0]!;
  t.true(timeoutMs !== undefined && timeoutMs > 1500 && timeoutMs <= 2000, String(timeoutMs));
  t.false(signal!.aborted);
  handled.abort(new ConnectError("the caller went away", Code.Canceled));
  t.true(signal!.aborted, "the call made ends when the call being handled ends");
  // Its own shorter deadline is kept.
  await runInCallScope(scope(new AbortController().signal, Date.now() + 2000), () => call(bounded, { timeoutMs: 300 }));
  t.is(seen[1]!.timeoutMs, 300);
});

test("a call made with a signal of its own ends with either", async (t) => {
  const { transport, seen } = recording();
  const bounded = boundedByCall(transport, 60_000);
  const handled = new AbortController();
  const own = new AbortController();
  await runInCallScope(scope(handled.signal), () => call(bounded, { signal: own.signal }));
  const { signal, timeoutMs } = seen[0]!;
  t.is(timeoutMs, 60_000, "a handled call without a known deadline: the default bound");
  t.false(signal!.aborted);
  own.abort();
  t.true(signal!.aborted);
  await runInCallScope(scope(handled.signal), () => call(bounded, { signal: new AbortController().signal }));
  handled.abort();
  t.true(seen[1]!.signal!.aborted);
});

test("a call made once the handled call ended, or past its deadline, fails without being sent", async (t) => {
  const { transport, seen } = recording();
  const bounded = boundedByCall(transport, 60_000);
  const ended = new AbortController();
  ended.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
  const afterEnd = await t.throwsAsync(runInCallScope(scope(ended.signal), () => call(bounded)));
  t.is((afterEnd as ConnectError).code, Code.DeadlineExceeded, "the handled call's own reason");
  const late = await t.throwsAsync(runInCallScope(scope(new AbortController().signal, Date.now() - 1), () => call(bounded)));
  t.is((late as ConnectError).code, Code.DeadlineExceeded);
  t.is(seen.length, 0);
});

test("outside the call being handled, what a handler owes after its call ended commits and calls on, bounded as a job's calls", async (t) => {
  const { transport, seen } = recording();
  const bounded = boundedByCall(transport, 1234);
  const ended = new AbortController();
  ended.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
  await runInCallScope(scope(ended.signal), async () => {
    t.true(callHasEnded());
    await outsideCall(async () => {
      t.false(callHasEnded(), "a unit of work would commit");
      await call(bounded);
    });
    t.true(callHasEnded(), "the handler's own context is unchanged");
  });
  t.is(seen.length, 1);
  t.is(seen[0]!.timeoutMs, 1234);
  t.is(seen[0]!.signal, undefined, "not ended with the handled call");
});
