/**
 * The first-party pages at APP_URL: `GET /` (the sign-in form, or who is signed in; with
 * `?oauth=1` the OAuth authorization page, authorize-page.ts), `POST /signin` (username and
 * password; a web session cookie on success, one generic sentence on failure, 429 when the
 * auth service throttles the account or address) and `POST /signout`. Every form carries a CSRF
 * token bound to the browser's cookies; a form without a fitting one changes nothing.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Client } from "@connectrpc/connect";
import type { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { AppError, fromConnectError, type Logger } from "@cms/platform";
import type { TokenResolver } from "../app/access.js";
import { renderHome, renderProblem, renderSignIn } from "../domain/account-pages.js";
import { csrfToken, csrfValid } from "../domain/csrf.js";
import { statusHeaders } from "./answers.js";
import { readBody } from "./read-body.js";
import { appendCookie, cookieHeader, cookieNames, cookiesOf, presessionOf, signedIn, type CookieNames } from "./web-session.js";

export const HOME_PATH = "/";
export const SIGN_IN_PATH = "/signin";
export const SIGN_OUT_PATH = "/signout";

/** Form bodies are small: a username, a password, a token or two. */
const MAX_FORM_BYTES = 16 * 1024;

export interface AccountDeps {
  auth: () => Client<typeof AuthService>;
  tokens: TokenResolver;
  /** Signs the CSRF tokens (GRANT_SECRET, or the one kept under DATA_DIR). */
  secret: string;
  /** APP_URL (read at each request: with PORT=0 it is known only once listening). */
  appUrl: () => string;
  assetVersion: string;
  log: Logger;
  /** CLIENT_IDLE_MS: how long a posted form may send nothing. */
  bodyIdleMs: number;
  /** The OAuth authorization page, for `/?oauth=1` (GET shows it, POST takes the consent decision). */
  authorize?: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  /** The client name and form targets of the authorization request a return path continues, if any. */
  flowOf?: (returnTo: string) => Promise<{ clientName?: string; formAction?: string[] }>;
}

/** Headers of every page: never cached, never framed, no script, forms posting where `formAction` allows. */
export function sendPage(res: ServerResponse, status: number, html: string, opts: { formAction?: string[]; headers?: Record<string, string> } = {}): void {
  const policy = [
    "default-src 'none'", "style-src 'self'", "img-src 'self' data:", `form-action 'self'${(opts.formAction ?? []).map((s) => ` ${s}`).join("")}`,
    "frame-ancestors 'none'", "base-uri 'none'",
  ].join("; ");
  res.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "content-length": Buffer.byteLength(html),
    "cache-control": "no-store",
    "content-security-policy": policy,
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    ...statusHeaders(status),
    ...opts.headers,
  });
  res.end(html);
}

/** A 303 to a URL (after a form, the browser GETs it). */
export function seeOther(res: ServerResponse, location: string): void {
  res.writeHead(303, { location, "cache-control": "no-store", "content-length": 0 });
  res.end();
}

/** A posted form (application/x-www-form-urlencoded, at most 16 KB; 408 once it sends nothing for `idleMs`). */
async function readForm(req: IncomingMessage, idleMs: number): Promise<URLSearchParams> {
  const type = String(req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/x-www-form-urlencoded") throw new AppError("invalid_request", "Forms are posted as application/x-www-form-urlencoded.");
  const body = await readBody(req, { maxBytes: MAX_FORM_BYTES, idleMs, tooLarge: "This form is larger than a sign-in form can be." });
  return new URLSearchParams(body.toString("utf8"));
}

/** A local path to go back to after a form (`/...`, never another origin: `//host` or `/\host`). */
export function localPath(value: string | null | undefined): string {
  if (!value || !value.startsWith("/") || value.startsWith("//") || value.startsWith("/\\") || /[\u0000-\u001f]/.test(value)) return HOME_PATH;
  return value;
}

export function createAccountRoutes(deps: AccountDeps) {
  const names = (): CookieNames => cookieNames(deps.appUrl());

  /** A page that only says what went wrong (a refused method or form, an invalid request). */
  function problem(res: ServerResponse, status: number, title: string, message: string, headers?: Record<string, string>): void {
    sendPage(res, status, renderProblem({ assetVersion: deps.assetVersion, title, message }), { headers });
  }

  /** The sign-in form; `formAction` names where the sign-in may end up (an OAuth client's redirect URI). */
  function signInPage(req: IncomingMessage, res: ServerResponse, status: number, opts: { returnTo: string; username?: string; error?: string; clientName?: string; headers?: Record<string, string>; formAction?: string[] }): void {
    const csrf = csrfToken(deps.secret, { presession: presessionOf(req, res, names()) });
    const { headers, formAction, ...model } = opts;
    sendPage(res, status, renderSignIn({ assetVersion: deps.assetVersion, action: SIGN_IN_PATH, csrf, ...model }), { headers, formAction });
  }

  async function home(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "GET" && req.method !== "HEAD") {
      problem(res, 405, "Not here", "This page only shows; forms post elsewhere.", { allow: "GET, HEAD" });
      return;
    }
    const session = await signedIn(req, names(), deps.tokens);
    if (!session) { signInPage(req, res, 200, { returnTo: HOME_PATH }); return; }
    const csrf = csrfToken(deps.secret, { session: session.token });
    sendPage(res, 200, renderHome({ assetVersion: deps.assetVersion, username: session.caller.username, signOutAction: SIGN_OUT_PATH, csrf }));
  }

  /**
   * When the sign-in continues an authorization request, what the form shows and allows again
   * after a failed attempt: the client's name (looked up, never taken from the form) and where
   * the flow may end (its redirect URI).
   */
  async function flowOf(returnTo: string): Promise<{ clientName?: string; formAction?: string[] }> {
    if (!deps.flowOf) return {};
    return deps.flowOf(returnTo).catch(() => ({}));
  }

  /** A posted form, under the forms' bounds. */
  const postedForm = (req: IncomingMessage) => readForm(req, deps.bodyIdleMs);

  async function signIn(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = await postedForm(req);
    const returnTo = localPath(form.get("return_to"));
    const username = (form.get("username") ?? "").trim().toLowerCase();
    const password = form.get("password") ?? "";
    const presession = cookiesOf(req)[names().presession];
    if (!presession || !csrfValid(deps.secret, { presession }, form.get("csrf"))) {
      signInPage(req, res, 403, { returnTo, username, error: "This form expired. Please sign in again.", ...await flowOf(returnTo) });
      return;
    }
    if (!username || !password) {
      signInPage(req, res, 400, { returnTo, username, error: "Enter your username and password.", ...await flowOf(returnTo) });
      return;
    }
    let out;
    try {
      out = await deps.auth().signIn({ username, password, address: req.socket.remoteAddress ?? "" });
    } catch (err) {
      const app = fromConnectError(err);
      const flow = await flowOf(returnTo);
      if (app.code === "unauthorized") { signInPage(req, res, 401, { returnTo, username, error: app.detail, ...flow }); return; }
      if (app.code === "rate_limited") {
        signInPage(req, res, 429, { returnTo, username, error: app.detail, headers: { "retry-after": String(app.extra.retry_after_seconds ?? 60) }, ...flow });
        return;
      }
      if (app.code === "invalid_request") { signInPage(req, res, 400, { returnTo, username, error: "The username or password is incorrect.", ...flow }); return; }
      deps.log.error({ err }, "sign-in failed");
      signInPage(req, res, 503, { returnTo, username, error: "Signing in is not possible right now. Please try again in a moment.", ...flow });
      return;
    }
    const maxAge = Math.max(0, Math.floor((Date.parse(out.expiresAt) - Date.now()) / 1000));
    appendCookie(res, cookieHeader(names(), names().session, out.sessionToken, maxAge));
    seeOther(res, returnTo);
  }

  async function signOut(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = await postedForm(req);
    const returnTo = localPath(form.get("return_to"));
    const session = await signedIn(req, names(), deps.tokens);
    if (session) {
      if (!csrfValid(deps.secret, { session: session.token }, form.get("csrf"))) {
        problem(res, 403, "Please try again", "This form expired. Go back, reload the page and sign out again.");
        return;
      }
      await deps.auth().signOut({ sessionToken: session.token });
    }
    appendCookie(res, cookieHeader(names(), names().session, "", 0));
    seeOther(res, returnTo);
  }

  /** Runs a page handler; a refused form (too large, wrong type) answers a page, not JSON. */
  const guard = (fn: (req: IncomingMessage, res: ServerResponse) => Promise<void>) => async (req: IncomingMessage, res: ServerResponse) => {
    try {
      await fn(req, res);
    } catch (err) {
      if (res.headersSent) { res.destroy(); return; }
      const app = fromConnectError(err);
      if (app.status >= 500) deps.log.error({ err }, "account page failed");
      problem(res, app.status, app.status >= 500 ? "Something went wrong" : "That did not work", app.status >= 500 ? "Please try again in a moment." : app.detail);
    }
  };

  const post = (fn: (req: IncomingMessage, res: ServerResponse) => Promise<void>) => async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== "POST") {
      problem(res, 405, "Not here", "Use the form on the sign-in page.", { allow: "POST" });
      return;
    }
    await fn(req, res);
  };

  return {
    /** Exact paths and their handlers, for the server's page table. */
    pages: [
      [HOME_PATH, guard(async (req, res) => {
        const oauth = new URL(req.url ?? "/", "http://x").searchParams.get("oauth");
        if (oauth === "1" && deps.authorize) await deps.authorize(req, res);
        else await home(req, res);
      })],
      [SIGN_IN_PATH, guard(post(signIn))],
      [SIGN_OUT_PATH, guard(post(signOut))],
    ] as Array<[string, (req: IncomingMessage, res: ServerResponse) => Promise<void>]>,
    signInPage,
    problem,
    names,
    guard,
    readForm: postedForm,
  };
}

export type AccountRoutes = ReturnType<typeof createAccountRoutes>;
