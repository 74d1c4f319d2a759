/** Signing (checked with the Standard Webhooks library, as a receiver would) and the delivery rules. */
import test from "ava";
import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { newSecret, signDelivery } from "../src/domain/signing.js";
import { afterFailedDelivery, deliveryBody, judgeAttempt, parseRetryAfter, shouldDeliver, MAX_ATTEMPTS } from "../src/domain/deliveries.js";

const BACKOFF = [30_000, 120_000, 600_000];

test("both signatures verify: X-Service-Signature over the raw body, and Standard Webhooks' over id.timestamp.body", (t) => {
  const secret = newSecret();
  t.regex(secret, /^whsec_[A-Za-z0-9+/]+=*$/);
  const body = deliveryBody({ deliveryId: "d1", collectionId: 7, occurredAt: "2026-11-24T00:00:00.000Z", changes: [{ kind: "renamed", at: "2026-11-24T00:00:00.000Z" }], published: true });
  const h = signDelivery(secret, "d1", body, Date.now());
  t.is(h["x-service-signature"], `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`);
  t.is(h["x-service-delivery"], "d1");
  t.is(h["webhook-id"], "d1");
  t.deepEqual(new Webhook(secret).verify(body, h as unknown as Record<string, string>), JSON.parse(body));
  t.throws(() => new Webhook(newSecret()).verify(body, h as unknown as Record<string, string>), undefined, "another secret does not verify");
  t.throws(() => new Webhook(secret).verify(body + " ", h as unknown as Record<string, string>), undefined, "a changed body does not verify");
  const old = signDelivery(secret, "d1", body, Date.now() - 10 * 60_000);
  t.throws(() => new Webhook(secret).verify(body, old as unknown as Record<string, string>), { message: /timestamp/i }, "a replay outside the tolerance is refused");
});

test("the body has the conventions' fields", (t) => {
  const b = JSON.parse(deliveryBody({ deliveryId: "x", collectionId: 3, occurredAt: "t", changes: [], published: false }));
  t.deepEqual(Object.keys(b), ["id", "type", "collection_id", "occurred_at", "changes", "published"]);
  t.is(b.type, "collection.updated");
});

test("delivered while published; otherwise only a window holding the unpublish", (t) => {
  t.true(shouldDeliver([{ kind: "media_added", at: "" }], true));
  t.false(shouldDeliver([{ kind: "media_added", at: "" }], false));
  t.true(shouldDeliver([{ kind: "renamed", at: "" }, { kind: "unpublished", at: "" }], false));
});

test("attempt outcomes: 2xx done; 3xx, 4xx, 5xx and no answer retried with the backoff; 410 disables; four attempts at most", (t) => {
  t.deepEqual(judgeAttempt(1, { kind: "answered", status: 204 }, BACKOFF), { kind: "delivered" });
  const r = judgeAttempt(1, { kind: "answered", status: 302 }, BACKOFF);
  t.is(r.kind, "retry");
  t.regex((r as { error: string }).error, /redirects are not followed/);
  t.like(judgeAttempt(2, { kind: "answered", status: 500 }, BACKOFF), { kind: "retry", delayMs: 120_000 });
  t.like(judgeAttempt(3, { kind: "failed", error: "timeout" }, BACKOFF), { kind: "retry", delayMs: 600_000 });
  t.like(judgeAttempt(MAX_ATTEMPTS, { kind: "answered", status: 500 }, BACKOFF), { kind: "failed" });
  t.like(judgeAttempt(1, { kind: "answered", status: 410 }, BACKOFF), { kind: "failed", disable: "The receiver answered 410 Gone." });
});

test("Retry-After on 429/503 is honoured within the schedule", (t) => {
  t.like(judgeAttempt(1, { kind: "answered", status: 429, retryAfterMs: 90_000 }, BACKOFF), { delayMs: 90_000 });
  t.like(judgeAttempt(1, { kind: "answered", status: 503, retryAfterMs: 1_000 }, BACKOFF), { delayMs: 30_000 }, "never sooner than the backoff");
  t.like(judgeAttempt(1, { kind: "answered", status: 503, retryAfterMs: 86_400_000 }, BACKOFF), { delayMs: 600_000 }, "never later than the schedule's longest delay");
  t.like(judgeAttempt(1, { kind: "answered", status: 500, retryAfterMs: 90_000 }, BACKOFF), { delayMs: 30_000 }, "only on 429 and 503");
  t.is(parseRetryAfter("120", 0), 120_000);
  t.is(parseRetryAfter(new Date(60_000).toUTCString(), 0), 60_000);
  t.is(parseRetryAfter("soon", 0), undefined);
});

test("twenty failed deliveries in a row disable the webhook", (t) => {
  t.deepEqual(afterFailedDelivery(0), { failureCount: 1 });
  t.deepEqual(afterFailedDelivery(18), { failureCount: 19 });
  t.like(afterFailedDelivery(19), { failureCount: 20, disable: "20 consecutive deliveries failed." });
});
