/**
 * Password hashing with scrypt (node:crypto), a memory-hard KDF. A stored hash is a PHC string
 * that carries its own parameters (`$scrypt$ln=15,r=8,p=3$<salt>$<hash>`), so the parameters can
 * be raised later: old hashes still verify, and needsRehash() tells the sign-in to store a new one.
 */
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from "node:crypto";

export interface ScryptParams {
  /** log2 of the cost N. */
  ln: number;
  /** Block size. */
  r: number;
  /** Parallelism. */
  p: number;
}

/**
 * N=2^15, r=8, p=3: one of OWASP's equivalent scrypt settings (as strong as N=2^17, r=8, p=1)
 * with a quarter of the memory (32 MiB per hash), which matters on a small shared machine where
 * several sign-ins may hash at once.
 */
export const DEFAULT_SCRYPT: ScryptParams = { ln: 15, r: 8, p: 3 };

const KEY_BYTES = 32;
const SALT_BYTES = 16;
/** Longer passwords are refused before hashing (a very long input is a cheap way to burn CPU). */
export const MAX_PASSWORD_CHARS = 256;
export const MIN_PASSWORD_CHARS = 8;

function scrypt(password: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  const N = 2 ** params.ln;
  // OpenSSL refuses unless maxmem covers 128 * N * r (plus some slack).
  const options: ScryptOptions = { N, r: params.r, p: params.p, maxmem: 128 * N * params.r + 16 * 1024 * 1024 };
  return new Promise((resolve, reject) => scryptCb(password, salt, KEY_BYTES, options, (err, key) => (err ? reject(err) : resolve(key))));
}

/** The same password typed on different keyboards (composed or decomposed accents) is one password. */
function normalize(password: string): string {
  return password.normalize("NFKC");
}

/** Why a new password is refused, or undefined when it is acceptable. */
export function passwordProblem(password: string): string | undefined {
  const chars = [...normalize(password)].length;
  if (chars < MIN_PASSWORD_CHARS) return `A password needs at least ${MIN_PASSWORD_CHARS} characters.`;
  if (chars > MAX_PASSWORD_CHARS) return `A password has at most ${MAX_PASSWORD_CHARS} characters.`;
  return undefined;
}

/** The PHC string of a password under the given parameters, with a fresh random salt. */
export async function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await scrypt(normalize(password), salt, params);
  return `$scrypt$ln=${params.ln},r=${params.r},p=${params.p}$${salt.toString("base64url")}$${key.toString("base64url")}`;
}

/** A stored hash taken apart, or undefined when it is not one of ours. */
export function parseHash(encoded: string): { params: ScryptParams; salt: Buffer; key: Buffer } | undefined {
  const m = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/.exec(encoded);
  if (!m) return undefined;
  const params = { ln: Number(m[1]), r: Number(m[2]), p: Number(m[3]) };
  if (params.ln < 10 || params.ln > 22 || params.r < 1 || params.p < 1) return undefined;
  return { params, salt: Buffer.from(m[4]!, "base64url"), key: Buffer.from(m[5]!, "base64url") };
}

/** Whether the password matches the stored hash (constant-time comparison). */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const parsed = parseHash(encoded);
  if (!parsed || [...password].length > MAX_PASSWORD_CHARS * 4) return false;
  const key = await scrypt(normalize(password), parsed.salt, parsed.params);
  return key.length === parsed.key.length && timingSafeEqual(key, parsed.key);
}

/** Whether a hash was made with other parameters than the current ones (re-hash it at the next sign-in). */
export function needsRehash(encoded: string, params: ScryptParams = DEFAULT_SCRYPT): boolean {
  const parsed = parseHash(encoded);
  return !parsed || parsed.params.ln !== params.ln || parsed.params.r !== params.r || parsed.params.p !== params.p || parsed.key.length !== KEY_BYTES;
}

const dummies = new Map<string, Promise<string>>();
/**
 * A hash to verify against when the user does not exist or has no password, so that a wrong
 * username costs as much time as a wrong password and the answer's timing names no account.
 * One per parameter set, made under the parameters real hashes are made with.
 */
export function dummyHash(params: ScryptParams = DEFAULT_SCRYPT): Promise<string> {
  const key = `${params.ln},${params.r},${params.p}`;
  let dummy = dummies.get(key);
  if (!dummy) dummies.set(key, dummy = hashPassword(randomBytes(16).toString("hex"), params));
  return dummy;
}
