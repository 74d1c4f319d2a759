/**
 * The delivery engine, all of whose state is in PostgreSQL (a process can stop at any point and
 * another, or the same one restarted, carries on):
 *
 * 1. collection.updated events (a durable subscription) add a change to the webhook's open
 *    coalescing window, opening one of WEBHOOK_COALESCE_MS; the event id makes a redelivered event
 *    harmless. The collections service's events also carry the published state, which is kept.
 * 2. A window that closed becomes one delivery listing its changes, if the collection is
 *    published or the window holds the unpublish itself; otherwise its changes are dropped.
 * 3. Senders claim due deliveries (SKIP LOCKED; one in flight per webhook, so a receiver gets
 *    them in order), make one attempt each outside any transaction, and record the outcome: done,
 *    a retry after the backoff (Retry-After honoured within the schedule), or failed for good after
 *    four attempts. Twenty deliveries failed in a row, or a 410 Gone, disable the webhook.
 *    Attempts run concurrently up to a bound, so one slow receiver holds one slot, never the others.
 */
import { randomUUID } from "node:crypto";
import { currentTraceparent, linkTo, recordWebhookDelivery, type BusEvent, type Logger, type UnitOfWork } from "@cms/platform";
import { afterFailedDelivery, deliveryBody, judgeAttempt, parseRetryAfter, shouldDeliver } from "../domain/deliveries.js";
import { signDelivery } from "../domain/signing.js";
import type { ClaimedDelivery, WebhooksStore } from "../store/webhooks-store.js";
import type { Receiver } from "../store/https-receiver.js";

export interface EngineConfig {
  coalesceMs: number;
  backoffMs: number[];
  timeoutMs: number;
  /** Attempts in flight at once in this process. */
  concurrency: number;
}

export interface EngineDeps {
  uow: UnitOfWork<WebhooksStore>;
  /** The store outside any unit of work (reads that need no transaction). */
  store: Pick<WebhooksStore, "liveWebhook" | "anyWindowDue" | "anyDeliveryDue">;
  receiver: Receiver;
  log: Logger;
  config: EngineConfig;
}

/** What the engine did in one pass (tests and the bench read it). */
export interface PassReport { windowsClosed: number; deliveriesCreated: number; attemptsMade: number }

/** What one attempt got: the receiver's answer (or none) and how long it took. */
export interface AttemptResult { status?: number; error?: string; durationMs: number }

/**
 * Records an attempt's outcome in one unit of work: the attempt logged, the delivery done,
 * failed or due again, the webhook's health (and its disabling); the reason when disabled.
 * The webhook row is locked first, as webhook_remove locks it before the deliveries: the same
 * order in both, so the two never wait for each other in a circle.
 */
export async function recordOutcome(store: WebhooksStore, d: ClaimedDelivery, result: AttemptResult, verdict: ReturnType<typeof judgeAttempt>): Promise<string | undefined> {
  const webhook = await store.webhookById(d.webhook_id, { lock: true });
  const error = verdict.kind === "delivered" ? null : verdict.error;
  await store.recordAttempt({ deliveryId: d.id, webhookId: d.webhook_id, event: d.event, attempt: d.attempts, status: result.status ?? null, durationMs: result.durationMs, error });
  const health = { last_status: result.status ?? null, last_error: error, last_delivery_at: new Date() };
  switch (verdict.kind) {
    case "delivered":
      await store.finishDelivery(d.id, "delivered");
      await store.updateHealth(d.webhook_id, { ...health, failure_count: 0 });
      return undefined;
    case "retry":
      await store.retryDelivery(d.id, verdict.delayMs, verdict.error);
      await store.updateHealth(d.webhook_id, health);
      return undefined;
    case "failed": {
      await store.finishDelivery(d.id, "failed", verdict.error);
      const next = afterFailedDelivery(webhook?.failure_count ?? 0);
      const disable = verdict.disable ?? next.disable;
      await store.updateHealth(d.webhook_id, { ...health, failure_count: next.failureCount, ...(disable ? { enabled: false, disabled_reason: disable } : {}) });
      return disable;
    }
  }
}

export function createDeliveryEngine(deps: EngineDeps) {
  const { uow, receiver, log, config } = deps;
  // A claim outlives the attempt's deadline, so a live sender never loses its claim.
  const claimMs = config.timeoutMs + 5_000;
  let inFlight = 0;

  /** Records a change for the collection's webhook (step 1). */
  async function onCollectionUpdated(event: BusEvent): Promise<void> {
    const p = event.payload as { collection_id?: number; kind?: string; published?: boolean; occurred_at?: string };
    const collectionId = Number(p.collection_id);
    if (!Number.isSafeInteger(collectionId)) return;
    // Every change of every collection comes here and most collections have no webhook: one
    // read, not a transaction of three statements, says there is nothing to do. (The unit below
    // reads it again; a webhook set in between is no different from one set just after.)
    if (!(await deps.store.liveWebhook(collectionId))) return;
    await uow(async (store) => {
      if (typeof p.published === "boolean") await store.setPublished(collectionId, p.published);
      // The change keeps its trace: the delivery that carries it, later, links back to it.
      await store.addChange(collectionId, { eventId: event.id, kind: String(p.kind ?? "updated"), at: new Date(p.occurred_at ?? event.occurredAt), traceparent: currentTraceparent() }, config.coalesceMs);
    });
  }

  /** Turns closed windows into deliveries (step 2). */
  async function closeWindows(): Promise<{ closed: number; created: number }> {
    // A pass runs every pollMs and nearly always finds nothing: one read says so, where the unit
    // of work would be three statements (as for sending, below).
    if (!(await deps.store.anyWindowDue())) return { closed: 0, created: 0 };
    return uow(async (store) => {
      const windows = await store.closeDueWindows(200);
      let created = 0;
      for (const w of windows) {
        if (!w.changes.length || !shouldDeliver(w.changes, w.webhook.collection_published)) continue;
        const id = randomUUID();
        const last = w.changes[w.changes.length - 1]!;
        await store.insertDelivery({
          id, webhookId: w.webhook.id, collectionId: Number(w.webhook.collection_id), event: "collection.updated", windowClosedAt: w.closedAt, traceLinks: w.traceLinks,
          body: deliveryBody({ deliveryId: id, collectionId: Number(w.webhook.collection_id), occurredAt: last.at, changes: w.changes, published: w.webhook.collection_published }),
        });
        created++;
      }
      return { closed: windows.length, created };
    });
  }

  /** One attempt of a claimed delivery, and its outcome recorded (step 3). */
  async function attempt(d: ClaimedDelivery): Promise<void> {
    // The attempt's span links to the trace of every change the delivery coalesces.
    const links = (d.trace_links ?? []).flatMap((tp) => linkTo(tp) ?? []);
    const result = await receiver.send(d.url, { ...signDelivery(d.secret, d.id, d.body, Date.now()) }, d.body, links);
    const verdict = judgeAttempt(d.attempts, result.status !== undefined
      ? { kind: "answered", status: result.status, retryAfterMs: parseRetryAfter(result.retryAfter, Date.now()) }
      : { kind: "failed", error: result.error ?? "no answer" }, config.backoffMs);
    recordWebhookDelivery(verdict.kind);
    const disabled = await uow((store) => recordOutcome(store, d, result, verdict));
    if (disabled) log.warn({ webhook_id: d.webhook_id, collection_id: d.collection_id, reason: disabled }, "webhook disabled");
  }

  /** Claims what is due, as many as free slots allow, and starts their attempts. */
  async function sendDue(): Promise<number> {
    const free = config.concurrency - inFlight;
    if (free <= 0) return 0;
    if (!(await deps.store.anyDeliveryDue())) return 0;
    const claimed = await uow((store) => store.claimDue(free, claimMs));
    for (const d of claimed) {
      inFlight++;
      void attempt(d).catch((err) => log.error({ err, delivery_id: d.id }, "recording a webhook attempt failed; the claim lapses and it is tried again"))
        .finally(() => { inFlight--; wake(); });
    }
    return claimed.length;
  }

  let running = false;
  let loop: Promise<void> | undefined;
  let wakeUp: (() => void) | undefined;
  const wake = () => wakeUp?.();
  // Short enough that a window closes within a fraction of its length after it ends.
  const pollMs = Math.max(20, Math.min(1000, Math.floor(config.coalesceMs / 10)));

  async function pass(): Promise<PassReport> {
    const { closed, created } = await closeWindows();
    const attemptsMade = await sendDue();
    return { windowsClosed: closed, deliveriesCreated: created, attemptsMade };
  }

  return {
    onCollectionUpdated,
    pass,
    /** Whether attempts are in flight (tests wait for quiet). */
    busy: () => inFlight > 0,
    start() {
      if (running) return;
      running = true;
      loop = (async () => {
        while (running) {
          let report: PassReport | undefined;
          try {
            report = await pass();
          } catch (err) {
            if (running) log.error({ err }, "webhook delivery pass failed");
          }
          if (report && (report.deliveriesCreated || report.attemptsMade)) continue;
          await new Promise<void>((r) => {
            const t = setTimeout(r, pollMs);
            wakeUp = () => { clearTimeout(t); r(); };
          });
          wakeUp = undefined;
        }
      })();
    },
    async stop() {
      running = false;
      wake();
      await loop;
      // Attempts in flight finish (each is bounded by its deadline) and record their outcome.
      while (inFlight > 0) await new Promise((r) => setTimeout(r, 20));
    },
  };
}

export type DeliveryEngine = ReturnType<typeof createDeliveryEngine>;
