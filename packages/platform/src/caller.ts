/**
 * Who is calling. The gateway authenticates the bearer token and passes the resolved caller
 * to services in one request header; services read it through callerOf(). Internal service
 * ports are reachable only inside the cluster (deploy/k8s network policy), so the header is
 * trusted there.
 */
import type { HandlerContext } from "@connectrpc/connect";
import { AppError } from "./errors.js";

export const CALLER_HEADER = "x-cms-caller";

export interface Caller {
  userId: string;
  username: string;
  plan: "free" | "paid" | "founding";
  isAdmin: boolean;
  scopes: string[];
  tokenId: string;
}

export function encodeCaller(caller: Caller | undefined): string | undefined {
  return caller ? Buffer.from(JSON.stringify(caller)).toString("base64url") : undefined;
}

/** The caller, or undefined for an anonymous call. */
export function callerOf(ctx: HandlerContext): Caller | undefined {
  const raw = ctx.requestHeader.get(CALLER_HEADER);
  if (!raw) return undefined;
  return JSON.parse(Buffer.from(raw, "base64url").toString("utf8")) as Caller;
}

/** The caller of an operation that needs a signed-in user. */
export function requireCaller(ctx: HandlerContext): Caller {
  const c = callerOf(ctx);
  if (!c) throw new AppError("unauthorized", "This operation needs a bearer access token.");
  return c;
}

export function hasScope(caller: Caller | undefined, scope: string): boolean {
  return Boolean(caller?.scopes.includes(scope));
}

/** For scopes a service requires only in some cases (conditional_scopes in the proto). */
export function requireScope(caller: Caller, scope: string, why: string): void {
  if (!caller.scopes.includes(scope)) {
    throw new AppError("insufficient_scope", `The token lacks the ${scope} scope, needed ${why}.`, { need: scope });
  }
}
