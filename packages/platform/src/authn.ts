/**
 * Authentication between processes, on both sides of every Connect call.
 *
 * Server side (authenticateCalls): a call is accepted with a caller assertion signed by a process
 * of this system and addressed to this service, or with a bearer token of an internal caller
 * outside the system (a user's access token, or a service credential). Public operations are
 * then checked against their own access rules (scopes, admin-only, anonymous); internal RPCs are
 * for processes of this system only. The verified principal is available to handlers
 * (callerOf) and to the calls they make (carried onward as the same user).
 *
 * Client side (assertCalls): every outgoing call carries an assertion: for the user named by
 * the call option actAsKey (the gateway dispatching an operation), else for the user of the call
 * being handled (a service-to-service call on the user's behalf), else for the calling service
 * itself.
 */
import { getOption, hasOption, type DescMethod } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { op as opOption, type Operation } from "@cms/contracts/common/v1/options_pb";
import { ASSERTION_HEADER, type AssertionSigner, type AssertionSubject, type AssertionVerifier } from "./assertions.js";
import { callDeadlineKey, currentCall, runInCallScope } from "./call-scope.js";
import { actAsKey, authorizeOperation, principalKey, type Principal } from "./caller.js";
import { ownerOf } from "./config.js";
import { AppError } from "./errors.js";
import type { TokenResolver } from "./tokens.js";
import { inUnitOfWork } from "./unit-of-work.js";

/** Services that answer anyone who can reach the port: health checks (probes) and reflection (grpcurl). */
const OPEN_SERVICES = new Set(["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]);

function bearer(header: string | null): string | undefined {
  const m = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  return m?.[1];
}

/** The (common.v1.op) option of each method, read once (decoding an option is not free). */
const opOptions = new WeakMap<DescMethod, Operation | null>();
function opOf(method: DescMethod) {
  let op = opOptions.get(method);
  if (op === undefined) opOptions.set(method, (op = hasOption(method, opOption) ? getOption(method, opOption) : null));
  return op ?? undefined;
}

/** The method's own rule for this principal. */
export function authorizeCall(method: DescMethod, principal: Principal): void {
  const op = opOf(method);
  if (!op) {
    if (!principal.internal) {
      throw new AppError("forbidden", `${method.parent.typeName}/${method.name} is internal to this system; call its public operations instead.`);
    }
    return;
  }
  // A user passed on by a service was checked where the operation was called.
  if (principal.forwardedBy) return;
  authorizeOperation({ name: op.name, scopes: op.scopes, anonymous: op.anonymous, adminOnly: op.adminOnly }, principal.user);
}

export function authenticateCalls(opts: { verifier: AssertionVerifier; tokens?: TokenResolver }): Interceptor {
  return (next) => async (req) => {
    if (OPEN_SERVICES.has(req.service.typeName)) return next(req);
    const audience = ownerOf(req.service);
    let principal: Principal | undefined;
    const assertion = req.header.get(ASSERTION_HEADER);
    if (assertion) {
      principal = await opts.verifier.verify(assertion, audience);
    } else {
      const token = bearer(req.header.get("authorization"));
      if (!token || !opts.tokens) {
        throw new AppError("unauthorized", `${req.service.typeName} needs a caller: a signed assertion from a process of this system, or "Authorization: Bearer <user access token or service credential>".`);
      }
      principal = await opts.tokens.resolve(token);
      if (!principal) throw new AppError("unauthorized", "The bearer token is invalid, expired or revoked.");
      // A token bound to a resource (RFC 8707) works only there, and a service port is not it.
      if (principal.user?.audience) throw new AppError("unauthorized", `This access token is bound to ${principal.user.audience} and works only there.`);
    }
    authorizeCall(req.method, principal);
    req.contextValues.set(principalKey, principal);
    return runInCallScope({ principal, service: audience, signal: req.signal, deadline: req.contextValues.get(callDeadlineKey) }, () => next(req));
  };
}

export function assertCalls(opts: { signer: AssertionSigner; identity: string }): Interceptor {
  return (next) => async (req) => {
    if (inUnitOfWork()) {
      // A bug, not a request error: commit first, then call (or continue through the outbox).
      throw new Error(`${req.service.typeName}/${req.method.name} called inside a unit of work; remote calls must not hold a database transaction open`);
    }
    const current = currentCall();
    const service = current?.service ?? opts.identity;
    const explicit = req.contextValues.get(actAsKey);
    let subject: AssertionSubject;
    if (explicit) subject = { user: explicit, service };
    else if (current?.principal.user) subject = { user: current.principal.user, service, forwarded: true };
    else subject = { service };
    req.header.set(ASSERTION_HEADER, await opts.signer.sign(subject, ownerOf(req.service)));
    return next(req);
  };
}
