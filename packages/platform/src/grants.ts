/**
 * Signed grants embedded in URLs (byte uploads on the API origin, download links, drop links):
 * the grant's fields in base64url JSON plus an HMAC-SHA256 over them. The URL is the
 * credential, so a grant is scoped to one key and purpose, and expires.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AppError } from "./errors.js";

export interface Grant {
  /** What the grant is for, e.g. "upload", "download", "drop". */
  purpose: string;
  /** Expiry, epoch milliseconds. */
  exp: number;
  [field: string]: unknown;
}

function mac(secret: string, payload: string): string {
  return createHmac("sha256", secret).update(payload).digest("base64url");
}

export function signGrant(secret: string, grant: Grant): string {
  const payload = Buffer.from(JSON.stringify(grant)).toString("base64url");
  return `${payload}.${mac(secret, payload)}`;
}

/** The grant of a token, after checking signature, purpose and expiry. */
export function verifyGrant<T extends Grant>(secret: string, token: string, purpose: string, now = Date.now()): T {
  const [payload, sig] = token.split(".");
  if (!payload || !sig) throw new AppError("forbidden", "The link is malformed.");
  const expected = Buffer.from(mac(secret, payload));
  const given = Buffer.from(sig);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw new AppError("forbidden", "The link's signature is not valid.");
  let grant: T;
  try {
    grant = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as T;
  } catch {
    throw new AppError("forbidden", "The link is malformed.");
  }
  if (grant.purpose !== purpose) throw new AppError("forbidden", "The link is not valid for this use.");
  if (typeof grant.exp !== "number" || grant.exp <= now) throw new AppError("forbidden", "The link has expired; request a new one.");
  return grant;
}

/** Where download links point on the API origin (the gateway streams them; the grant is the credential). */
export const DOWNLOAD_PREFIX = "/storage/v1/download/";

/** What a download link serves: one stored object and how to label it. */
export interface DownloadObject {
  key: string;
  content_type: string | null;
  filename: string;
  /** The media item it was minted for (absent for a collection's cover). */
  media_id?: number;
}

/** The grant a download link carries. */
export interface DownloadGrant extends Grant, DownloadObject { purpose: "download" }

/** A signed GET link to one stored object, valid until `expiresAt`; it supports Range requests. */
export function downloadLink(secret: string, baseUrl: string, object: DownloadObject, expiresAt: number): string {
  const token = signGrant(secret, { purpose: "download", exp: expiresAt, ...object });
  return `${baseUrl}${DOWNLOAD_PREFIX}${token}/${encodeURIComponent(object.filename)}`;
}

/** GRANT_SECRET, or (single-machine deployments) a secret kept under DATA_DIR. */
export function resolveGrantSecret(configured: string | undefined, dataDir: string): string {
  if (configured) return configured;
  const file = join(dataDir, "grant-secret");
  if (existsSync(file)) return readFileSync(file, "utf8").trim();
  mkdirSync(dataDir, { recursive: true });
  const secret = randomBytes(32).toString("base64url");
  writeFileSync(file, secret + "\n", { mode: 0o600 });
  return secret;
}
