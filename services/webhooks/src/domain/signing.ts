/**
 * Signing a delivery. The receiver gets the contract's own header, X-Service-Signature:
 * sha256=<hex HMAC-SHA256 of the raw body> keyed with the secret string, and the Standard
 * Webhooks headers (webhook-id, webhook-timestamp, webhook-signature: v1,<base64 HMAC-SHA256
 * of "id.timestamp.body"> keyed with the secret's base64 part), so that receivers can verify
 * with that spec's libraries and reject replays by the timestamp.
 */
import { createHmac, randomBytes } from "node:crypto";

const PREFIX = "whsec_";

/** A new signing secret in the Standard Webhooks form: whsec_ and 32 random bytes in base64. */
export function newSecret(): string {
  return `${PREFIX}${randomBytes(32).toString("base64")}`;
}

export interface SignedHeaders {
  "content-type": string;
  "x-service-signature": string;
  "x-service-delivery": string;
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
}

/** Headers of one attempt: the body is the same on every attempt, the timestamp is the attempt's. */
export function signDelivery(secret: string, deliveryId: string, body: string, nowMs: number): SignedHeaders {
  const timestamp = Math.floor(nowMs / 1000).toString();
  const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, "base64");
  return {
    "content-type": "application/json",
    "x-service-signature": `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`,
    "x-service-delivery": deliveryId,
    "webhook-id": deliveryId,
    "webhook-timestamp": timestamp,
    "webhook-signature": `v1,${createHmac("sha256", key).update(`${deliveryId}.${timestamp}.${body}`).digest("base64")}`,
  };
}
