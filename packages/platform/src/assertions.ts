/**
 * Caller assertions: short-lived JWTs (EdDSA, signed with this system's key through `jose`) that
 * a process of this system attaches to every call it makes to a service, naming the user it acts
 * for (or itself), addressed to that one service and valid for a minute. Services accept only
 * assertions that verify with the current key or a previous one (key rotation), name them as the
 * audience and have not expired.
 *
 * Keys: CALLER_SIGNING_KEY (an Ed25519 private key, PEM or a file path) on every process, and
 * CALLER_VERIFY_KEYS (previous public keys, PEM or file paths, comma-separated) while a rotation
 * is rolled out. On the embedded default a key pair is made once under DATA_DIR.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SignJWT, calculateJwkThumbprint, decodeProtectedHeader, exportJWK, jwtVerify, errors as joseErrors } from "jose";
import type { Caller, Principal } from "./caller.js";
import { ConfigError } from "./config.js";
import { AppError } from "./errors.js";
import { TtlCache } from "./ttl-cache.js";

export const ASSERTION_HEADER = "x-cms-assertion";
const ISSUER = "cms";
const ALG = "EdDSA";
/** Lifetime of an assertion; a signer reuses one until less than half of it is left. */
export const ASSERTION_TTL_SECONDS = 60;
const CLOCK_TOLERANCE_SECONDS = 5;

export interface CallerKeys {
  signing: KeyObject;
  kid: string;
  /** kid -> public key: the signing key's own and the previous ones. */
  verifying: Map<string, KeyObject>;
}

async function kidOf(publicKey: KeyObject): Promise<string> {
  return calculateJwkThumbprint(await exportJWK(publicKey));
}

/** PEM text, or the path of a file holding it. */
function pemOf(value: string, name: string): string {
  const text = value.includes("-----BEGIN") ? value : (() => {
    try { return readFileSync(value, "utf8"); } catch (err) { throw new ConfigError(`${name}: cannot read ${value}: ${(err as Error).message}`); }
  })();
  return text.replace(/\\n/g, "\n");
}

/** A fresh Ed25519 key pair as PEM (the admin CLI prints one for a deployment's Secret). */
export function generateCallerKeyPem(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  return {
    privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicKey: publicKey.export({ type: "spki", format: "pem" }).toString(),
  };
}

/**
 * The keys from configuration, or (single-machine deployments) a pair kept under DATA_DIR.
 * Split mode needs the configured key: every process must verify what the others sign.
 */
export async function loadCallerKeys(signingKey: string | undefined, verifyKeys: string[], dataDir: string): Promise<CallerKeys> {
  let pem: string;
  if (signingKey) {
    pem = pemOf(signingKey, "CALLER_SIGNING_KEY");
  } else {
    const file = join(dataDir, "caller-signing-key.pem");
    if (existsSync(file)) pem = readFileSync(file, "utf8");
    else {
      mkdirSync(dataDir, { recursive: true });
      pem = generateCallerKeyPem().privateKey;
      writeFileSync(file, pem, { mode: 0o600 });
    }
  }
  let signing: KeyObject;
  try {
    signing = createPrivateKey(pem);
  } catch (err) {
    throw new ConfigError(`CALLER_SIGNING_KEY is not a PEM private key: ${(err as Error).message}`);
  }
  if (signing.asymmetricKeyType !== "ed25519") throw new ConfigError(`CALLER_SIGNING_KEY must be an Ed25519 key, got ${signing.asymmetricKeyType}`);
  const own = createPublicKey(signing);
  const kid = await kidOf(own);
  const verifying = new Map<string, KeyObject>([[kid, own]]);
  for (const v of verifyKeys) {
    let key: KeyObject;
    try {
      key = createPublicKey(pemOf(v, "CALLER_VERIFY_KEYS"));
    } catch (err) {
      throw new ConfigError(`CALLER_VERIFY_KEYS holds a value that is not a PEM public key: ${(err as Error).message}`);
    }
    verifying.set(await kidOf(key), key);
  }
  return { signing, kid, verifying };
}

/** Who an outgoing call is for. */
export interface AssertionSubject {
  user?: Caller;
  /** The service making the call (of this system). */
  service: string;
  /** Set when the user's assertion is passed on by `service` while handling the user's call. */
  forwarded?: boolean;
}

export interface AssertionSigner {
  /** An assertion for `audience` (a service name); one still fresh for the same subject is reused. */
  sign(subject: AssertionSubject, audience: string): Promise<string>;
}

interface Claims {
  sub: string;
  svc: string;
  fwd?: boolean;
  usr?: { name: string; plan: Caller["plan"]; adm: boolean; scope: string; tid: string };
}

function claimsOf(s: AssertionSubject): Claims {
  if (!s.user) return { sub: `service:${s.service}`, svc: s.service };
  const u = s.user;
  return {
    sub: u.userId, svc: s.service, ...(s.forwarded ? { fwd: true } : {}),
    usr: { name: u.username, plan: u.plan, adm: u.isAdmin, scope: u.scopes.join(" "), tid: u.tokenId },
  };
}

export function createAssertionSigner(keys: CallerKeys, now: () => number = Date.now): AssertionSigner {
  const cache = new TtlCache<string>(ASSERTION_TTL_SECONDS * 500, 20_000);
  return {
    async sign(subject, audience) {
      const claims = claimsOf(subject);
      const cacheKey = `${audience}\n${JSON.stringify(claims)}`;
      const hit = cache.get(cacheKey, now());
      if (hit) return hit;
      const iat = Math.floor(now() / 1000);
      const { sub, ...rest } = claims;
      const token = await new SignJWT(rest as unknown as Record<string, unknown>)
        .setProtectedHeader({ alg: ALG, kid: keys.kid })
        .setIssuer(ISSUER)
        .setSubject(sub)
        .setAudience(audience)
        .setIssuedAt(iat)
        .setExpirationTime(iat + ASSERTION_TTL_SECONDS)
        .sign(keys.signing);
      cache.set(cacheKey, token, ASSERTION_TTL_SECONDS * 500, now());
      return token;
    },
  };
}

export interface AssertionVerifier {
  /** The principal of an assertion addressed to `audience`; unauthorized when it is not one. */
  verify(token: string, audience: string): Promise<Principal>;
}

function refused(why: string): AppError {
  return new AppError("unauthorized", `The caller assertion is not valid: ${why}.`);
}

export function createAssertionVerifier(keys: CallerKeys, now: () => number = Date.now): AssertionVerifier {
  // A token verified once stays valid until it expires; most calls repeat a recent one.
  const cache = new TtlCache<Principal>(ASSERTION_TTL_SECONDS * 1000, 20_000);
  return {
    async verify(token, audience) {
      const cacheKey = `${audience}\n${token}`;
      const hit = cache.get(cacheKey, now());
      if (hit) return hit;
      let kid: string | undefined;
      try {
        kid = decodeProtectedHeader(token).kid;
      } catch {
        throw refused("it is not a JWT");
      }
      const key = kid ? keys.verifying.get(kid) : undefined;
      if (!key) throw refused("it is not signed with a key of this system");
      let payload;
      try {
        ({ payload } = await jwtVerify(token, key, {
          issuer: ISSUER, audience, algorithms: [ALG], clockTolerance: CLOCK_TOLERANCE_SECONDS, currentDate: new Date(now()),
          requiredClaims: ["sub", "exp", "iat"],
        }));
      } catch (err) {
        if (err instanceof joseErrors.JWTExpired) throw refused("it has expired");
        if (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === "aud") throw refused(`it is addressed to another service, not ${audience}`);
        if (err instanceof joseErrors.JWSSignatureVerificationFailed) throw refused("its signature does not verify");
        throw refused((err as Error).message);
      }
      const c = payload as unknown as Claims & { exp: number };
      if (c.exp - Math.floor(now() / 1000) > ASSERTION_TTL_SECONDS + CLOCK_TOLERANCE_SECONDS) throw refused("its lifetime is longer than this system issues");
      const principal: Principal = c.usr
        ? {
          user: { userId: c.sub, username: c.usr.name, plan: c.usr.plan, isAdmin: c.usr.adm, scopes: c.usr.scope ? c.usr.scope.split(" ") : [], tokenId: c.usr.tid },
          service: c.svc, internal: true, ...(c.fwd ? { forwardedBy: c.svc } : {}),
        }
        : { service: c.svc, internal: true };
      cache.set(cacheKey, principal, c.exp * 1000 - now(), now());
      return principal;
    },
  };
}
