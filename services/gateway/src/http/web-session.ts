/**
 * The first-party web session in the browser: the session cookie (HttpOnly, SameSite=Lax,
 * Secure and __Host- prefixed when APP_URL is https), the pre-session cookie that CSRF tokens of
 * the sign-in form are bound to, and reading the signed-in user of a request.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import { parse, serialize } from "cookie";
import type { Caller } from "@cms/platform";
import type { TokenResolver } from "../app/access.js";
import { acceptsAudience, bearerOf } from "./admission.js";

/** Web session tokens start so (the auth service issues them). */
const SESSION_PREFIX = "cms_ws_";

export interface CookieNames { session: string; presession: string; secure: boolean }

/** The cookies' names and flags for an app origin: https gets Secure and the __Host- prefix (no Domain, Path=/). */
export function cookieNames(appUrl: string): CookieNames {
  const secure = new URL(appUrl).protocol === "https:";
  return secure
    ? { session: "__Host-cms_session", presession: "__Host-cms_presession", secure }
    : { session: "cms_session", presession: "cms_presession", secure };
}

/** A Set-Cookie value; maxAgeSeconds 0 clears it. */
export function cookieHeader(names: CookieNames, name: string, value: string, maxAgeSeconds: number): string {
  return serialize(name, value, { httpOnly: true, sameSite: "lax", secure: names.secure, path: "/", maxAge: maxAgeSeconds });
}

export function cookiesOf(req: IncomingMessage): Record<string, string | undefined> {
  const header = req.headers.cookie;
  return header ? parse(header) : {};
}

/** The session token the request's cookie carries, if it has the shape of one. */
export function sessionTokenOf(req: IncomingMessage, names: CookieNames): string | undefined {
  const v = cookiesOf(req)[names.session];
  return v && v.startsWith(SESSION_PREFIX) && v.length < 200 ? v : undefined;
}

/** The signed-in user of a request (a live session cookie), with the session's token. */
export async function signedIn(req: IncomingMessage, names: CookieNames, tokens: TokenResolver): Promise<{ caller: Caller; token: string } | undefined> {
  const token = sessionTokenOf(req, names);
  if (!token) return undefined;
  const caller = await tokens.resolve(token);
  return caller ? { caller, token } : undefined;
}

/**
 * The user a page request acts as (the player page and its channel): a bearer token, or else the
 * web session's cookie. A token bound to another resource (the MCP endpoint) opens no page.
 */
export function createViewerOf(tokens: TokenResolver, appUrl: () => string): (req: IncomingMessage) => Promise<Caller | undefined> {
  return async function viewerOf(req) {
    const token = bearerOf(req.headers.authorization);
    if (token) {
      const caller = await tokens.resolve(token);
      return caller && acceptsAudience(caller, undefined) ? caller : undefined;
    }
    return (await signedIn(req, cookieNames(appUrl()), tokens))?.caller;
  };
}

/**
 * The pre-session value the sign-in form's CSRF token is bound to: the request's, or a new one
 * set on the response.
 */
export function presessionOf(req: IncomingMessage, res: ServerResponse, names: CookieNames): string {
  const have = cookiesOf(req)[names.presession];
  if (have && /^[A-Za-z0-9_-]{43}$/.test(have)) return have;
  const fresh = randomBytes(32).toString("base64url");
  appendCookie(res, cookieHeader(names, names.presession, fresh, 30 * 24 * 3600));
  return fresh;
}

export function appendCookie(res: ServerResponse, value: string): void {
  const prev = res.getHeader("set-cookie");
  res.setHeader("set-cookie", [...(Array.isArray(prev) ? prev : prev ? [String(prev)] : []), value]);
}
