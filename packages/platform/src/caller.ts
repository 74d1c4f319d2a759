/**
 * Who is calling a service, as the service's authentication interceptor (authn.ts) established
 * it: a user (from a signed assertion of a process of this system, or from the user's access
 * token presented directly), a service of this system acting as itself, or an external service
 * with a credential of its own. Handlers read it through callerOf()/requireCaller(); nothing in
 * a request header is trusted without verification.
 */
import { createContextKey, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import { AppError } from "./errors.js";

/** A user acting through a token. */
export interface Caller {
  userId: string;
  username: string;
  plan: "free" | "paid" | "founding";
  isAdmin: boolean;
  scopes: string[];
  tokenId: string;
  /**
   * The resource the token is bound to (RFC 8707), e.g. "{MCP_URL}/mcp"; empty or unset for a
   * token without one. Known where the token was introspected; not carried between processes.
   */
  audience?: string;
}

export interface Principal {
  /** The user the call acts for; undefined for a service acting as itself (and anonymous op calls). */
  user?: Caller;
  /** The service acting, or vouching for the user: a module of this system, or an external service's name. */
  service?: string;
  /** Established by an assertion signed with this system's key, i.e. by a process of this system. */
  internal: boolean;
  /** The service that passed the user's assertion on (a service-to-service call on the user's behalf). */
  forwardedBy?: string;
}

/** The verified principal of the call being handled (set by the authentication interceptor). */
export const principalKey = createContextKey<Principal | undefined>(undefined, { description: "verified caller" });

/**
 * A call option for clients (`contextValues`): sign the outgoing call for this user. The gateway
 * sets it when it dispatches an operation; inside a handler, calls carry the handled call's
 * user onward without it.
 */
export const actAsKey = createContextKey<Caller | undefined>(undefined, { description: "act as user" });

export function principalOf(ctx: { values: ContextValues }): Principal | undefined {
  return ctx.values.get(principalKey);
}

/** The calling user, or undefined for an anonymous call (or a service acting as itself). */
export function callerOf(ctx: HandlerContext): Caller | undefined {
  return principalOf(ctx)?.user;
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

/** What an operation requires of its caller (from its (common.v1.op) option). */
export interface OperationAccess {
  name: string;
  scopes: readonly string[];
  anonymous: boolean;
  adminOnly: boolean;
}

/**
 * The operation's own access rules, the same at the gateway and at a service called directly:
 * a user unless the operation is anonymous, administrators for admin-only operations, and every
 * scope the operation names.
 */
export function authorizeOperation(op: OperationAccess, caller: Caller | undefined): void {
  if (!caller) {
    if (op.anonymous) return;
    throw new AppError("unauthorized", "Missing access token: send \"Authorization: Bearer <access token>\".");
  }
  if (op.adminOnly && !caller.isAdmin) throw new AppError("forbidden", `${op.name} is for administrators only.`);
  const missing = op.scopes.filter((s) => !caller.scopes.includes(s));
  if (missing.length) {
    throw new AppError("insufficient_scope", `The token lacks the scope${missing.length > 1 ? "s" : ""} ${missing.join(", ")} required by ${op.name}.`, {
      need: missing.length === 1 ? missing[0] : missing,
    });
  }
}
