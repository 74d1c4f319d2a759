/**
 * The HTML of the first-party pages at APP_URL: sign-in, the signed-in home, the OAuth consent
 * page and the page of an authorization request that cannot go back to its client. Pure
 * functions of their models; every value is escaped; no script (each action is a form carrying
 * its CSRF token).
 */
import { escapeHtml } from "./html.js";

/** The pages' one style sheet. */
export const ACCOUNT_ASSETS = ["/assets/account/account.css"];

export const PRODUCT_NAME = "Collections";

/** What a scope lets a client do, in words a user reads on the consent page. */
export const SCOPE_WORDS: Record<string, { text: string; kind: "read" | "write" | "delete" }> = {
  "collections:read": { text: "See your collections, private ones included", kind: "read" },
  "collections:write": { text: "Create, change, publish and share your collections", kind: "write" },
  "collections:delete": { text: "Delete your collections", kind: "delete" },
  "media:read": { text: "See and download the media in your collections", kind: "read" },
  "media:write": { text: "Upload, change and move media in your collections", kind: "write" },
  "media:delete": { text: "Delete media from your collections", kind: "delete" },
  "profile:write": { text: "Change your public profile and aliases", kind: "write" },
};

/** A hidden form field. */
export interface Hidden { name: string; value: string }

function hidden(fields: Hidden[]): string {
  return fields.map((f) => `<input type="hidden" name="${escapeHtml(f.name)}" value="${escapeHtml(f.value)}">`).join("\n");
}

function page(title: string, assetVersion: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)} · ${PRODUCT_NAME}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/account/account.css?v=${escapeHtml(assetVersion)}">
</head>
<body>
<a class="brand" href="/"><span class="mark" aria-hidden="true">C</span><span>${PRODUCT_NAME}</span></a>
<main class="card">
${body}
</main>
</body>
</html>
`;
}

function alert(message: string | undefined): string {
  return message ? `<p class="alert" role="alert">${escapeHtml(message)}</p>` : "";
}

export interface SignInModel {
  assetVersion: string;
  /** Where the form posts. */
  action: string;
  csrf: string;
  /** Where to go once signed in (a local path). */
  returnTo: string;
  /** The OAuth client the sign-in continues to, if any. */
  clientName?: string;
  username?: string;
  error?: string;
}

export function renderSignIn(m: SignInModel): string {
  const lead = m.clientName
    ? `to continue to <strong>${escapeHtml(m.clientName)}</strong>`
    : "with your username and password";
  return page("Sign in", m.assetVersion, `<h1>Sign in</h1>
<p class="lead">${lead}</p>
${alert(m.error)}
<form method="post" action="${escapeHtml(m.action)}">
${hidden([{ name: "csrf", value: m.csrf }, { name: "return_to", value: m.returnTo }])}
<label for="username">Username</label>
<input type="text" id="username" name="username" autocomplete="username" autocapitalize="none" spellcheck="false" required maxlength="63" value="${escapeHtml(m.username ?? "")}"${m.username ? "" : " autofocus"}>
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required maxlength="256"${m.username ? " autofocus" : ""}>
<button class="primary" type="submit">Sign in</button>
</form>
<p class="foot">No account yet? Ask the operator of this service for one.</p>`);
}

function whoBox(username: string, signOutAction: string, csrf: string, returnTo: string): string {
  return `<div class="who"><span>Signed in as <strong>${escapeHtml(username)}</strong></span>
<form method="post" action="${escapeHtml(signOutAction)}">${hidden([{ name: "csrf", value: csrf }, { name: "return_to", value: returnTo }])}<button class="secondary" type="submit">Sign out</button></form></div>`;
}

export interface HomeModel {
  assetVersion: string;
  username: string;
  signOutAction: string;
  csrf: string;
}

export function renderHome(m: HomeModel): string {
  return page("Your account", m.assetVersion, `<h1>You are signed in</h1>
<p class="lead">Share URLs of your collections open with the player following you live.</p>
${whoBox(m.username, m.signOutAction, m.csrf, "/")}
<p class="fine">Applications you allow to use your account get their own tokens; signing out here does not end those.</p>`);
}

export interface ConsentModel {
  assetVersion: string;
  username: string;
  clientName: string;
  /** Where the client's answer is sent (shown so the user knows where they go next). */
  redirectUri: string;
  scopes: string[];
  /** Where the decision form posts (the authorization URL itself). */
  action: string;
  signOutAction: string;
  /** The authorization URL, to come back to after signing out and in as someone else. */
  returnTo: string;
  csrf: string;
}

export function renderConsent(m: ConsentModel): string {
  // In one order whatever the request's: by resource, reading before changing before deleting.
  const order = Object.keys(SCOPE_WORDS);
  const rank = (s: string) => (order.includes(s) ? order.indexOf(s) : order.length);
  const scopes = [...m.scopes].sort((a, b) => rank(a) - rank(b));
  const items = scopes.length
    ? scopes.map((s) => {
      const w = SCOPE_WORDS[s] ?? { text: s, kind: "read" as const };
      return `<li><span class="dot ${w.kind}" aria-hidden="true"></span><span>${escapeHtml(w.text)}</span></li>`;
    }).join("\n")
    : `<li><span class="dot" aria-hidden="true"></span><span>Know your username (nothing else)</span></li>`;
  const decision = (value: string, label: string, cls: string) => `<form method="post" action="${escapeHtml(m.action)}">
${hidden([{ name: "csrf", value: m.csrf }, { name: "decision", value }])}
<button class="${cls}" type="submit" name="submit" value="${value}">${label}</button>
</form>`;
  return page(`Allow ${m.clientName}?`, m.assetVersion, `<h1>Allow <span class="client">${escapeHtml(m.clientName)}</span> to use your account?</h1>
${whoBox(m.username, m.signOutAction, m.csrf, m.returnTo)}
<p class="lead">It will be able to:</p>
<ul class="scopes">
${items}
</ul>
<div class="actions">
${decision("deny", "Deny", "secondary")}
${decision("allow", "Allow", "primary")}
</div>
<p class="fine">Allow only applications you trust. Either way you will be sent back to <code>${escapeHtml(m.redirectUri)}</code>.</p>`);
}

export interface ProblemModel {
  assetVersion: string;
  title: string;
  message: string;
}

/** A request this page cannot serve and must not send back to a client (unknown client, unregistered redirect URI), or an expired form. */
export function renderProblem(m: ProblemModel): string {
  return page(m.title, m.assetVersion, `<h1>${escapeHtml(m.title)}</h1>
${alert(m.message)}
<p class="fine">If an application sent you here, tell its developer. <a href="/">Go to the sign-in page</a>.</p>`);
}
