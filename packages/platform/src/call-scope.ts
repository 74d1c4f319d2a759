/**
 * The call a service is handling in this async context: its verified principal, the service
 * handling it, and the signal that ends it (the caller's deadline passed, or the caller went
 * away). Set once per call by the authentication interceptor (authn.ts); read by the calls the
 * handler makes (on the same user's behalf) and by the unit of work, which commits nothing for a
 * call that has ended.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Principal } from "./caller.js";

export interface CallScope {
  principal: Principal;
  service: string;
  signal: AbortSignal;
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
 * Whether the call being handled has ended for its caller. Its caller has been answered already
 * (deadline_exceeded, which the gateway turns into a 503 "safe to retry") or is gone, so a change
 * committed now would be one the caller was told did not happen, and its retry would make it twice.
 */
export function callHasEnded(): boolean {
  return handling.getStore()?.signal.aborted === true;
}
