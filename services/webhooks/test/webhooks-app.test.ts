/**
 * Component tests of the webhooks use cases over in-memory fakes: owner-only configuration, a
 * new secret on every set, the URL checked before anything is stored, the test delivery.
 */
import test from "ava";
import { AppError, type Caller, type UnitOfWork } from "@cms/platform";
import { createWebhooks } from "../src/app/webhooks.js";
import type { AttemptRow, WebhookRow, WebhooksStore } from "../src/store/webhooks-store.js";
import type { Receiver, SendResult } from "../src/store/https-receiver.js";

const owner: Caller = { userId: "11111111-1111-4111-8111-111111111111", username: "o", plan: "paid", isAdmin: false, scopes: [], tokenId: "t" };
const editor: Caller = { ...owner, userId: "22222222-2222-4222-8222-222222222222", username: "e" };

function fakes(opts: { vetFails?: boolean; answer?: SendResult } = {}) {
  const hooks = new Map<number, WebhookRow>();
  const attempts: AttemptRow[] = [];
  const sent: Array<{ url: string; headers: Record<string, string>; body: string }> = [];
  const store = {
    async liveWebhook(id: number) { return hooks.get(id); },
    async upsertWebhook(w: { collectionId: number; ownerUserId: string; url: string; events: string[]; secret: string; published: boolean }) {
      const now = new Date();
      const row: WebhookRow = {
        id: hooks.get(w.collectionId)?.id ?? `w${w.collectionId}`, collection_id: w.collectionId, owner_user_id: w.ownerUserId, url: w.url, events: w.events,
        secret: w.secret, enabled: true, disabled_reason: null, failure_count: 0, last_status: null, last_error: null, last_delivery_at: null,
        collection_published: w.published, created_at: now, updated_at: now,
      };
      hooks.set(w.collectionId, row);
      return row;
    },
    async removeWebhook(id: number) { return hooks.delete(id); },
    async recentAttempts() { return attempts.slice(-5).reverse(); },
    async recordAttempt(a: { deliveryId: string; event: string; attempt: number; status: number | null; durationMs: number; error: string | null }) {
      attempts.push({ delivery_id: a.deliveryId, event: a.event, attempt: a.attempt, status: a.status, duration_ms: a.durationMs, error: a.error, at: new Date() });
    },
  } as unknown as WebhooksStore;
  const uow: UnitOfWork<WebhooksStore> = (work) => work(store, { emit: async () => {} });
  const receiver: Receiver = {
    async vet(url) {
      if (opts.vetFails) throw new AppError("webhook_url_blocked_host", "blocked", { field: "url" });
      return { url: new URL(url), address: "93.184.216.34", family: 4 };
    },
    async send(url, headers, body) { sent.push({ url, headers, body }); return opts.answer ?? { status: 200, durationMs: 3 }; },
  };
  const collections = () => ({
    async checkAccess(req: { userId: string; collectionId: bigint }) {
      if (req.collectionId === 404n) return { exists: false };
      return { exists: true, isDeleted: false, isOwner: req.userId === owner.userId, ownerUserId: owner.userId, isPublished: true, allowed: req.userId === owner.userId };
    },
  }) as never;
  return { hooks, attempts, sent, webhooks: createWebhooks({ uow, store, receiver, collections }) };
}

const codeOf = async (p: Promise<unknown>) => { try { await p; return "ok"; } catch (err) { return (err as AppError).code; } };

test("only the owner configures; a missing collection is not found", async (t) => {
  const f = fakes();
  t.is(await codeOf(f.webhooks.set(editor, { collectionId: 1, url: "https://hooks.example.org/", events: [] })), "forbidden");
  t.is(await codeOf(f.webhooks.get(editor, 1)), "forbidden");
  t.is(await codeOf(f.webhooks.set(owner, { collectionId: 404, url: "https://hooks.example.org/", events: [] })), "not_found");
  t.is(f.hooks.size, 0);
});

test("every set issues a new secret and re-enables; the URL is checked before anything is stored", async (t) => {
  const f = fakes();
  const a = await f.webhooks.set(owner, { collectionId: 1, url: "https://hooks.example.org/", events: [] });
  f.hooks.get(1)!.enabled = false;
  const b = await f.webhooks.set(owner, { collectionId: 1, url: "https://hooks.example.org/2", events: ["collection.updated"] });
  t.not(a.secret, b.secret);
  t.true(b.webhook.enabled);
  t.is(b.webhook.url, "https://hooks.example.org/2");
  const blocked = fakes({ vetFails: true });
  t.is(await codeOf(blocked.webhooks.set(owner, { collectionId: 1, url: "https://10.0.0.1/", events: [] })), "webhook_url_blocked_host");
  t.is(blocked.hooks.size, 0);
  t.is(await codeOf(f.webhooks.set(owner, { collectionId: 1, url: "https://hooks.example.org/", events: ["media.deleted"] })), "invalid_request");
});

test("get without a webhook is not_found with a hint; remove is idempotent", async (t) => {
  const f = fakes();
  const err = await f.webhooks.get(owner, 2).catch((e) => e as AppError);
  t.is((err as AppError).code, "not_found");
  t.truthy((err as AppError).extra.hint);
  await f.webhooks.set(owner, { collectionId: 2, url: "https://hooks.example.org/", events: [] });
  t.true(await f.webhooks.remove(owner, 2));
  t.false(await f.webhooks.remove(owner, 2));
});

test("the test delivery is signed, marked test, logged, and reports a failing receiver", async (t) => {
  const f = fakes({ answer: { status: 503, durationMs: 7 } });
  const { secret } = await f.webhooks.set(owner, { collectionId: 3, url: "https://hooks.example.org/", events: [] });
  const out = await f.webhooks.test(owner, 3);
  t.false(out.delivered);
  t.like(out.attempt, { event: "webhook.test", status: 503, error: "receiver answered 503" });
  const body = JSON.parse(f.sent[0]!.body);
  t.like(body, { type: "collection.updated", collection_id: 3, test: true });
  t.true(f.sent[0]!.headers["x-service-signature"]!.startsWith("sha256="));
  t.truthy(secret);
  t.is(f.attempts.length, 1);
});
