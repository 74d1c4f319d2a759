/**
 * CSRF tokens of the web forms: an HMAC of what the form is bound to (the web session's token
 * once signed in, a random pre-session cookie before), under the gateway's secret. A form posted
 * from another site carries no such token, and a token taken from one browser does not fit
 * another's cookies.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export type CsrfBinding = { session: string } | { presession: string };

export function csrfToken(secret: string, binding: CsrfBinding): string {
  const what = "session" in binding ? `session|${binding.session}` : `presession|${binding.presession}`;
  return createHmac("sha256", secret).update(`csrf|${what}`).digest("base64url");
}

/** Whether a posted token fits the binding (constant-time). */
export function csrfValid(secret: string, binding: CsrfBinding, posted: string | null | undefined): boolean {
  if (!posted) return false;
  const want = Buffer.from(csrfToken(secret, binding));
  const got = Buffer.from(posted);
  return want.length === got.length && timingSafeEqual(want, got);
}
