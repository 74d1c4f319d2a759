/**
 * Rules of agents' bug reports: nothing secret may be stored (the whole report is refused,
 * naming the field), and a report that repeats an open one (same operation, category, error
 * code and, loosely, the same title) counts on that one instead of making another.
 */
import { createHash } from "node:crypto";
import { AppError } from "@cms/platform";

export const BUG_CATEGORIES = ["error", "wrong_result", "docs_mismatch", "performance", "other"] as const;
export const BUG_STATUSES = ["new", "triaged", "duplicate", "rejected", "promoted"] as const;
/** Statuses that still take duplicates (bug.list `status: "open"`). */
export const OPEN_STATUSES = ["new", "triaged"] as const;
export const MAX_REPRO_CHARS = 4096;

/**
 * Secret material, by what it looks like. Each pattern names what it found; the message says
 * which field held it (never the value).
 */
const SECRET_PATTERNS: Array<[string, RegExp]> = [
  ["a private key block", /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----/],
  ["an access token of this service", /\bcms_(?:at|key|svc)_[A-Za-z0-9_-]{16,}/],
  ["a webhook signing secret", /\bwhsec_[A-Za-z0-9+/=]{16,}/],
  ["a JSON Web Token", /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/],
  ["a bearer token", /\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*/i],
  ["a password in a URL", /\b[a-z][a-z0-9+.-]*:\/\/[^\s/:@]+:[^\s/@]+@/i],
  ["an AWS access key", /\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b/],
  ["an AWS secret key", /aws.{0,20}(?:secret|private).{0,20}[A-Za-z0-9/+]{40}/i],
  ["a GitHub token", /\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})/],
  ["a GitLab token", /\bglpat-[A-Za-z0-9_-]{20,}/],
  ["a Slack token", /\bxox[abposr]-[A-Za-z0-9-]{10,}/],
  ["a Stripe key", /\b(?:sk|rk)_live_[A-Za-z0-9]{20,}/],
  ["an Anthropic API key", /\bsk-ant-[A-Za-z0-9_-]{20,}/],
  ["an OpenAI API key", /\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}/],
  ["a Google API key", /\bAIza[0-9A-Za-z_-]{35}\b/],
  ["a Twilio key", /\bSK[0-9a-f]{32}\b/],
  ["a SendGrid key", /\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}/],
  ["a password", /\b(?:password|passwd|pwd|passphrase|client_secret|api[_-]?key|secret[_-]?key|access[_-]?token)\b["']?\s*[:=]\s*["']?[^\s"',;]{8,}/i],
];

/** The first kind of secret in `text`, if any. */
export function findSecret(text: string): string | undefined {
  for (const [what, re] of SECRET_PATTERNS) if (re.test(text)) return what;
  return undefined;
}

/** Refuses the whole report when any field holds secret material, naming the field. */
export function refuseSecrets(fields: Record<string, string | undefined>): void {
  for (const [field, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    const what = findSecret(value);
    if (what) {
      throw new AppError("secret_material_detected", `The field ${field} seems to contain ${what}; remove it and report again. Nothing was stored.`, { field });
    }
  }
}

/**
 * The title as duplicates compare it: lower case, UUIDs, hex ids and numbers replaced, runs of
 * whitespace and punctuation collapsed.
 */
export function looseTitle(title: string): string {
  return title
    .toLowerCase()
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, " # ")
    .replace(/\b(?=[0-9a-f]*\d)[0-9a-f]{12,}\b/g, " # ")
    .replace(/\d+(?:\.\d+)?/g, " # ")
    .replace(/[^\p{L}#]+/gu, " ")
    .replace(/\s+/g, " ")
    .trim();
}

/** What makes two reports the same: operation, category, error code and loose title. */
export function duplicateKey(r: { relatedOp: string; category: string; errorCode?: string; title: string }): string {
  return createHash("sha256").update(JSON.stringify([r.relatedOp.trim().toLowerCase(), r.category, (r.errorCode ?? "").trim().toLowerCase(), looseTitle(r.title)])).digest("hex");
}

/** The serialized repro, refused over the contract's limit. */
export function serializedRepro(repro: unknown): string | undefined {
  if (repro === undefined) return undefined;
  const text = JSON.stringify(repro);
  if (text.length > MAX_REPRO_CHARS) {
    throw new AppError("invalid_request", `repro is ${text.length} characters once serialized; at most ${MAX_REPRO_CHARS}.`, { field: "repro" });
  }
  return text;
}

/** bug.list's status filter as stored statuses. */
export function statusesOf(filter: string): string[] {
  return filter === "open" ? [...OPEN_STATUSES] : [filter];
}
