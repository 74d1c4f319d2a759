/**
 * The OAuth authorization page, `{APP_URL}/?oauth=1&response_type=code&client_id=...` (RFC 6749
 * 4.1.1 with PKCE): the auth service checks the request; a request that names an unknown client
 * or an unregistered redirect URI is explained to the user and never sent anywhere; other
 * refusals go back to the client's redirect URI with `error` and `state`. A signed-out user gets
 * the sign-in form first; a signed-in user consents (or did before, for these scopes) and the
 * client gets `code`, `state` and `iss` (RFC 9207). The consent form posts back to the same URL
 * with its CSRF token; Deny answers `access_denied`.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Client } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { AuthorizationRequestSchema, type AuthService, type OAuthError } from "@cms/contracts/auth/v1/auth_pb";
import type { TokenResolver } from "../app/access.js";
import { renderConsent } from "../domain/account-pages.js";
import { csrfToken, csrfValid } from "../domain/csrf.js";
import { SIGN_OUT_PATH, seeOther, sendPage, type AccountRoutes } from "./account-routes.js";
import { signedIn } from "./web-session.js";

export interface AuthorizePageDeps {
  auth: () => Client<typeof AuthService>;
  tokens: TokenResolver;
  account: AccountRoutes;
  secret: string;
  /** The issuer (BASE_URL), sent back as `iss`. */
  issuer: () => string;
  assetVersion: string;
}

/** Parameters that may appear once only (RFC 6749 3.1); `resource` may repeat (RFC 8707). */
const SINGLE = ["response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method"];

/** What a form on the page may post to or be redirected to: this origin and the client's redirect URI. */
export function formTargets(redirectUri: string): string[] {
  try {
    const u = new URL(redirectUri);
    return [u.protocol === "http:" || u.protocol === "https:" ? u.origin : u.protocol];
  } catch {
    return [];
  }
}

/** The client's redirect URI with the response parameters added (its own query kept). */
export function redirectWith(redirectUri: string, params: Record<string, string | undefined>): string {
  const u = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v);
  return u.toString();
}

/** The authorization request in a URL's query (`/?oauth=1&...`). */
function requestOf(q: URLSearchParams) {
  return create(AuthorizationRequestSchema, {
    clientId: q.get("client_id") ?? "", redirectUri: q.get("redirect_uri") ?? "", responseType: q.get("response_type") ?? "",
    codeChallenge: q.get("code_challenge") ?? "", codeChallengeMethod: q.get("code_challenge_method") ?? "",
    scope: q.has("scope") ? q.get("scope")! : undefined, resource: q.getAll("resource"),
  });
}

/**
 * The client name and form targets of the authorization request a local path continues (the
 * sign-in form shows them again after a failed attempt); nothing when it continues none.
 */
export async function authorizationFlowOf(auth: () => Client<typeof AuthService>, returnTo: string): Promise<{ clientName?: string; formAction?: string[] }> {
  const url = new URL(returnTo, "http://x");
  if (url.pathname !== "/" || url.searchParams.get("oauth") !== "1") return {};
  const request = requestOf(url.searchParams);
  const check = await auth().checkAuthorization({ request, sessionToken: "" });
  return check.error ? {} : { clientName: check.clientName, formAction: formTargets(request.redirectUri) };
}

export function createAuthorizePage(deps: AuthorizePageDeps) {
  const { problem } = deps.account;

  return async function authorize(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "GET" && req.method !== "POST") { problem(res, 405, "Not here", "Open this page from the application that sent you."); return; }
    const url = new URL(req.url ?? "/", "http://x");
    const q = url.searchParams;
    const twice = SINGLE.find((k) => q.getAll(k).length > 1);
    if (twice) { problem(res, 400, "This sign-in link is not valid", `The parameter ${twice} appears more than once.`); return; }
    const request = requestOf(q);
    const state = q.get("state") ?? undefined;
    const here = `${url.pathname}${url.search}`;
    const back = (params: Record<string, string | undefined>) => seeOther(res, redirectWith(request.redirectUri, { ...params, state, iss: deps.issuer() }));
    const refuse = (error: OAuthError | undefined, redirectable: boolean) => {
      if (redirectable) back({ error: error?.error ?? "server_error", error_description: error?.errorDescription });
      else problem(res, 400, "This sign-in link is not valid", error?.errorDescription ?? "The request is not valid.");
    };

    const session = await signedIn(req, deps.account.names(), deps.tokens);
    const check = await deps.auth().checkAuthorization({ request, sessionToken: session?.token ?? "" });
    if (check.error) { refuse(check.error, check.redirectable); return; }
    const targets = formTargets(request.redirectUri);

    if (!session) {
      // A consent form posted after the session ended, or a first visit: sign in, then come back here.
      deps.account.signInPage(req, res, 200, { returnTo: here, clientName: check.clientName, formAction: targets });
      return;
    }

    const csrf = csrfToken(deps.secret, { session: session.token });
    let decision: string | null = null;
    if (req.method === "POST") {
      const form = await deps.account.readForm(req);
      if (!csrfValid(deps.secret, { session: session.token }, form.get("csrf"))) {
        problem(res, 403, "Please try again", "This form expired. Go back to the application and start again.");
        return;
      }
      decision = form.get("decision");
      if (decision === "deny") { back({ error: "access_denied", error_description: "The user denied the request." }); return; }
      if (decision !== "allow") { problem(res, 400, "Please try again", "Choose Allow or Deny."); return; }
    }

    if (decision === "allow" || check.consented) {
      const issued = await deps.auth().issueAuthorizationCode({ request, sessionToken: session.token });
      if (issued.error) { refuse(issued.error, issued.redirectable); return; }
      back({ code: issued.code });
      return;
    }

    sendPage(res, 200, renderConsent({
      assetVersion: deps.assetVersion, username: check.username || session.caller.username, clientName: check.clientName,
      redirectUri: request.redirectUri, scopes: check.scopes, action: here, signOutAction: SIGN_OUT_PATH, returnTo: here, csrf,
    }), { formAction: targets });
  };
}
