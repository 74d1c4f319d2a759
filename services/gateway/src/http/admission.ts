/**
 * Who gets in, in one order for every surface: the gateway API key (unless the route takes a
 * bearer token alone), then the bearer token, then
 * the route's own rule (an operation's admin flag and scopes, the media proxy's media:read), then
 * the per-user rate limit (per address for anonymous calls). The op endpoint, the media proxy and
 * any later surface go through this one chain, so that each refuses with the same codes, details
 * and headers: once a request is counted, every answer carries x-ratelimit-limit and
 * x-ratelimit-remaining, and a 429 carries retry-after.
 */
import type { IncomingHttpHeaders } from "node:http";
import { AppError, type Caller } from "@cms/platform";
import type { ApiKeyChecker, TokenResolver } from "../app/access.js";
import type { RateLimiter } from "../store/rate-limit-store.js";

/** What admission reads of a request (a node:http IncomingMessage, or a fake in tests). */
export interface AdmissionRequest { headers: IncomingHttpHeaders; socket: { remoteAddress?: string } }

/** Where admission puts its headers (a node:http ServerResponse, or a fake in tests). */
export interface HeaderSink { setHeader(name: string, value: string): unknown }

/** The checks admission asks: API keys and tokens (through auth) and the rate limiter. */
export interface Gatekeepers {
  apiKeys: ApiKeyChecker;
  tokens: TokenResolver;
  rateLimiter: RateLimiter;
  /** The JSON endpoint's URL: a token bound (RFC 8707) to another resource, such as the MCP endpoint, is refused. */
  resource?: () => string;
}

/** A route's part of the chain. */
export interface AdmissionRule<T> {
  /**
   * The route takes a bearer token alone, without the gateway API key (the MCP endpoint: a
   * remote MCP client has none); `authorize` then refuses a request without a token.
   */
  bearerOnly?: boolean;
  /**
   * The resource this route is (RFC 8707), when it is not the JSON endpoint (the MCP endpoint):
   * a token bound to another resource is refused here.
   */
  resource?: () => string;
  /**
   * Work done after the API key and before the token, whose refusals come first (the op endpoint
   * reads its body and finds its operation here); its result is handed to `authorize`.
   */
  target?: () => Promise<T>;
  /** Refuses a caller (undefined without a bearer token) that may not go on to `target`. */
  authorize(caller: Caller | undefined, target: T): void;
}

/** An admitted request: its caller (undefined for an anonymous call) and the rule's target. */
export interface Admitted<T> { caller: Caller | undefined; target: T }

/** Runs the chain on a request; throws the AppError that refuses it. */
export type Admit = <T = undefined>(req: AdmissionRequest, res: HeaderSink, rule: AdmissionRule<T>) => Promise<Admitted<T>>;

/** The admission chain over its gatekeepers. */
export function createAdmission({ apiKeys, tokens, rateLimiter, resource }: Gatekeepers): Admit {
  return async function admit<T>(req: AdmissionRequest, res: HeaderSink, rule: AdmissionRule<T>): Promise<Admitted<T>> {
    const apikey = req.headers.apikey;
    if (!rule.bearerOnly && !(await apiKeys.check(Array.isArray(apikey) ? apikey[0] : apikey))) {
      throw new AppError("unauthorized", apikey ? "The apikey header is not a valid gateway API key." : "Missing gateway API key: send it in the \"apikey\" header.");
    }
    const target = (rule.target ? await rule.target() : undefined) as T;
    const token = bearerOf(req.headers.authorization);
    let caller: Caller | undefined;
    if (token) {
      caller = await tokens.resolve(token);
      if (!caller) throw new AppError("unauthorized", "The access token is invalid, expired or revoked.");
      if (!acceptsAudience(caller, (rule.resource ?? resource)?.())) {
        throw new AppError("unauthorized", `This access token is bound to ${caller.audience} and works only there; ask for a token without that resource for this endpoint.`);
      }
    }
    rule.authorize(caller, target);

    const rate = await rateLimiter.hit(caller ? `u:${caller.userId}` : `ip:${req.socket.remoteAddress ?? "?"}`);
    // On the response itself: every answer from here on carries them, errors and the 429 included.
    res.setHeader("x-ratelimit-limit", String(rate.limit));
    res.setHeader("x-ratelimit-remaining", String(rate.remaining));
    if (!rate.allowed) {
      const retry = String(Math.max(1, Math.ceil(rate.resetMs / 1000)));
      res.setHeader("retry-after", retry);
      throw new AppError("rate_limited", `Rate limit of ${rate.limit} requests per minute exceeded; retry in ${retry} s.`, { retry_after_seconds: Number(retry) });
    }
    return { caller, target };
  };
}

/** Whether a token may be used at a resource: tokens without an audience anywhere, a bound one only at its own. */
export function acceptsAudience(caller: Caller, resource: string | undefined): boolean {
  return !caller.audience || caller.audience === resource;
}

/** The token of an `Authorization: Bearer <token>` header; any other form is refused. */
export function bearerOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw new AppError("unauthorized", "The Authorization header must be \"Bearer <access token>\".");
  return m[1];
}
