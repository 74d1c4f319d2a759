/** The webhooks schema behind the store port the application uses (knex adapter). */
import { prepared, type Queryable } from "@cms/platform";
import type { Change } from "../domain/deliveries.js";

export interface WebhookRow {
  id: string;
  collection_id: number;
  owner_user_id: string;
  url: string;
  events: string[];
  secret: string;
  enabled: boolean;
  disabled_reason: string | null;
  failure_count: number;
  last_status: number | null;
  last_error: string | null;
  last_delivery_at: Date | null;
  collection_published: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface AttemptRow {
  delivery_id: string;
  event: string;
  attempt: number;
  status: number | null;
  duration_ms: number;
  error: string | null;
  at: Date;
}

export interface DeliveryRow {
  id: string;
  /** traceparents of the changes the delivery carries. */
  trace_links: string[];
  webhook_id: string;
  collection_id: number;
  event: string;
  body: string;
  attempts: number;
  window_closed_at: Date;
}

/** A delivery claimed for one attempt, with what sending it needs. */
export interface ClaimedDelivery extends DeliveryRow {
  url: string;
  secret: string;
}

export interface ClosedWindow {
  webhook: WebhookRow;
  changes: Change[];
  /** traceparents of the window's changes (distinct, at most MAX_TRACE_LINKS). */
  traceLinks: string[];
  closedAt: Date;
}

export interface WebhooksStore {
  liveWebhook(collectionId: number, opts?: { forUpdate?: boolean }): Promise<WebhookRow | undefined>;
  /** Creates the collection's webhook, or replaces the live one's URL, events and secret (same id), re-enabled with no failures. */
  upsertWebhook(w: { collectionId: number; ownerUserId: string; url: string; events: string[]; secret: string; published: boolean }): Promise<WebhookRow>;
  /** Marks the live webhook removed and discards what it had queued; false when there was none. */
  removeWebhook(collectionId: number): Promise<boolean>;
  recentAttempts(webhookId: string, limit: number): Promise<AttemptRow[]>;
  setPublished(collectionId: number, published: boolean): Promise<void>;

  /** Adds a change to the live enabled webhook's open window (opening one); false when there is no such webhook. */
  addChange(collectionId: number, change: { eventId: string; kind: string; at: Date; traceparent?: string }, coalesceMs: number): Promise<boolean>;
  /** Whether a window is due now (read without locks: the pass's unit of work runs only then). */
  anyWindowDue(): Promise<boolean>;
  /** Closes up to `limit` windows due now (their changes taken out), locked for this transaction. */
  closeDueWindows(limit: number): Promise<ClosedWindow[]>;
  insertDelivery(d: { id: string; webhookId: string; collectionId: number; event: string; body: string; windowClosedAt: Date; traceLinks?: string[] }): Promise<void>;

  /**
   * Claims up to `limit` due deliveries for one attempt each: attempts counted, the claim held
   * until `claimMs` from now. At most one delivery per webhook is in flight, so a receiver gets
   * its deliveries in order.
   */
  claimDue(limit: number, claimMs: number): Promise<ClaimedDelivery[]>;
  /** Whether a pending delivery is due now (read without locks: claiming runs only then). */
  anyDeliveryDue(): Promise<boolean>;
  recordAttempt(a: { deliveryId: string; webhookId: string; event: string; attempt: number; status: number | null; durationMs: number; error: string | null }): Promise<void>;
  finishDelivery(id: string, state: "delivered" | "failed" | "discarded", error?: string): Promise<void>;
  retryDelivery(id: string, delayMs: number, error: string): Promise<void>;
  /** The webhook after an attempt: its last status/error, and the consecutive failure count. */
  updateHealth(webhookId: string, patch: Partial<Pick<WebhookRow, "failure_count" | "last_status" | "last_error" | "last_delivery_at" | "enabled" | "disabled_reason">>): Promise<void>;
  /** A webhook (removed ones included); with lock, locked for the transaction (lock webhooks before their deliveries). */
  webhookById(id: string, opts?: { lock?: boolean }): Promise<WebhookRow | undefined>;

  /** The delivery log of webhooks removed before `before`, and attempts older than `before`; counts. */
  purge(before: Date): Promise<{ webhooks: number; deliveries: number; attempts: number }>;
  /** Deliveries waiting (pending), for the bench and tests. */
  pendingCount(): Promise<number>;
}

const WEBHOOK_COLUMNS = [
  "id", "collection_id", "owner_user_id", "url", "events", "secret", "enabled", "disabled_reason", "failure_count", "last_status", "last_error",
  "last_delivery_at", "collection_published", "created_at", "updated_at",
];

/** Links a delivery's span keeps to the traces of its changes (a busy window has many). */
export const MAX_TRACE_LINKS = 32;

export function createWebhooksStore(q: Queryable): WebhooksStore {
  const live = () => q("webhooks").whereNull("removed_at");
  return {
    async liveWebhook(collectionId, opts = {}) {
      // Prepared: the consumer asks it for every change of every collection.
      const query = prepared(live().where({ collection_id: collectionId }).first(WEBHOOK_COLUMNS));
      if (opts.forUpdate) query.forUpdate();
      return query;
    },
    async upsertWebhook(w) {
      const { rows } = await q.raw(
        `INSERT INTO webhooks (collection_id, owner_user_id, url, events, secret, collection_published)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (collection_id) WHERE removed_at IS NULL DO UPDATE SET
           url = excluded.url, events = excluded.events, secret = excluded.secret, collection_published = excluded.collection_published,
           enabled = true, disabled_reason = NULL, failure_count = 0, updated_at = now()
         RETURNING ${WEBHOOK_COLUMNS.join(", ")}`,
        [w.collectionId, w.ownerUserId, w.url, w.events, w.secret, w.published],
      );
      return rows[0] as WebhookRow;
    },
    async removeWebhook(collectionId) {
      const [row] = await live().where({ collection_id: collectionId }).update({ removed_at: q.fn.now(), enabled: false, updated_at: q.fn.now() }).returning("id");
      if (!row) return false;
      await q("pending_changes").where({ webhook_id: row.id }).delete();
      await q("windows").where({ webhook_id: row.id }).delete();
      await q("deliveries").where({ webhook_id: row.id, state: "pending" }).update({ state: "discarded", finished_at: q.fn.now(), last_error: "webhook removed" });
      return true;
    },
    async recentAttempts(webhookId, limit) {
      return q("attempts").where({ webhook_id: webhookId }).orderBy([{ column: "at", order: "desc" }, { column: "id", order: "desc" }]).limit(limit)
        .select("delivery_id", "event", "attempt", "status", "duration_ms", "error", "at");
    },
    async setPublished(collectionId, published) {
      await live().where({ collection_id: collectionId }).update({ collection_published: published });
    },

    async addChange(collectionId, change, coalesceMs) {
      const hook = await live().where({ collection_id: collectionId, enabled: true }).first("id");
      if (!hook) return false;
      await q("pending_changes").insert({ event_id: change.eventId, webhook_id: hook.id, kind: change.kind, at: change.at, traceparent: change.traceparent ?? null }).onConflict("event_id").ignore();
      await q.raw(
        `INSERT INTO windows (webhook_id, opened_at, closes_at) VALUES (?, now(), now() + (? || ' milliseconds')::interval) ON CONFLICT (webhook_id) DO NOTHING`,
        [hook.id, String(coalesceMs)],
      );
      return true;
    },
    async anyWindowDue() {
      const { rows } = await prepared(q.raw("SELECT EXISTS (SELECT 1 FROM windows WHERE closes_at <= now()) AS due"));
      return rows[0]?.due === true;
    },
    async closeDueWindows(limit) {
      const due: Array<{ webhook_id: string; closes_at: Date }> = await q("windows").where("closes_at", "<=", q.fn.now()).orderBy("closes_at").limit(limit)
        .forUpdate().skipLocked().select("webhook_id", "closes_at");
      if (!due.length) return [];
      const ids = due.map((w) => w.webhook_id);
      await q("windows").whereIn("webhook_id", ids).delete();
      const changes: Array<{ webhook_id: string; kind: string; at: Date; traceparent: string | null }> = await q("pending_changes").whereIn("webhook_id", ids).delete()
        .returning(["webhook_id", "kind", "at", "traceparent"]);
      const hooks: WebhookRow[] = await live().whereIn("id", ids).select(WEBHOOK_COLUMNS);
      const byHook = new Map(hooks.map((h) => [h.id, h]));
      return due.flatMap((w) => {
        const webhook = byHook.get(w.webhook_id);
        if (!webhook) return [];
        const mine = changes.filter((c) => c.webhook_id === w.webhook_id).sort((a, b) => new Date(a.at).getTime() - new Date(b.at).getTime());
        const own = mine.map((c) => ({ kind: c.kind, at: new Date(c.at).toISOString() }));
        const traceLinks = [...new Set(mine.flatMap((c) => (c.traceparent ? [c.traceparent] : [])))].slice(-MAX_TRACE_LINKS);
        return [{ webhook, changes: own, traceLinks, closedAt: new Date(w.closes_at) }];
      });
    },
    async insertDelivery(d) {
      await q("deliveries").insert({
        id: d.id, webhook_id: d.webhookId, collection_id: d.collectionId, event: d.event, body: d.body, window_closed_at: d.windowClosedAt,
        next_attempt_at: q.fn.now(), trace_links: JSON.stringify(d.traceLinks ?? []),
      });
    },

    async claimDue(limit, claimMs) {
      // The oldest due delivery of each webhook without one in flight (read without locks), then
      // as many of them as can be locked now: rows another sender locked are skipped, not waited
      // for, so two replicas share the work and never take the same delivery.
      const candidates: string[] = (await q.raw(
        `SELECT id FROM (
           SELECT DISTINCT ON (d.webhook_id) d.id, d.next_attempt_at FROM deliveries d
           WHERE d.state = 'pending' AND d.next_attempt_at <= now()
             AND NOT EXISTS (SELECT 1 FROM deliveries o WHERE o.webhook_id = d.webhook_id AND o.state = 'pending' AND o.claimed_until > now())
           ORDER BY d.webhook_id, d.window_closed_at, d.created_at
         ) oldest ORDER BY next_attempt_at LIMIT ?`,
        [limit * 2],
      )).rows.map((r: { id: string }) => r.id);
      if (!candidates.length) return [];
      const { rows } = await q.raw(
        `WITH locked AS (
           SELECT id FROM deliveries WHERE id = ANY(?::uuid[]) AND state = 'pending' AND next_attempt_at <= now()
           ORDER BY next_attempt_at LIMIT ? FOR UPDATE SKIP LOCKED
         )
         UPDATE deliveries d SET attempts = d.attempts + 1, claimed_until = now() + (? || ' milliseconds')::interval,
           next_attempt_at = now() + (? || ' milliseconds')::interval
         FROM locked, webhooks w WHERE d.id = locked.id AND w.id = d.webhook_id
         RETURNING d.id, d.webhook_id, d.collection_id, d.event, d.body, d.attempts, d.window_closed_at, d.trace_links, w.url, w.secret`,
        [candidates, limit, String(claimMs), String(claimMs)],
      );
      return rows as ClaimedDelivery[];
    },
    async anyDeliveryDue() {
      const { rows } = await prepared(q.raw("SELECT EXISTS (SELECT 1 FROM deliveries WHERE state = 'pending' AND next_attempt_at <= now()) AS due"));
      return rows[0]?.due === true;
    },
    async recordAttempt(a) {
      await q("attempts").insert({ delivery_id: a.deliveryId, webhook_id: a.webhookId, event: a.event, attempt: a.attempt, status: a.status, duration_ms: a.durationMs, error: a.error });
    },
    async finishDelivery(id, state, error) {
      await q("deliveries").where({ id }).update({ state, finished_at: q.fn.now(), claimed_until: null, last_error: error ?? null });
    },
    async retryDelivery(id, delayMs, error) {
      await q.raw(`UPDATE deliveries SET next_attempt_at = now() + (? || ' milliseconds')::interval, claimed_until = NULL, last_error = ? WHERE id = ?`, [String(delayMs), error, id]);
    },
    async updateHealth(webhookId, patch) {
      await q("webhooks").where({ id: webhookId }).update({ ...patch, updated_at: q.fn.now() });
    },
    async webhookById(id, opts = {}) {
      const b = q("webhooks").where({ id }).first([...WEBHOOK_COLUMNS, "removed_at"]);
      if (opts.lock) b.forUpdate();
      return b;
    },

    async purge(before) {
      const gone: Array<{ id: string }> = await q("webhooks").whereNotNull("removed_at").where("removed_at", "<", before).select("id");
      const ids = gone.map((g) => g.id);
      const deliveries = ids.length ? await q("deliveries").whereIn("webhook_id", ids).delete() : 0;
      const attempts = await q("attempts").where((w) => { w.where("at", "<", before); if (ids.length) w.orWhereIn("webhook_id", ids); }).delete();
      const oldDeliveries = await q("deliveries").whereNot({ state: "pending" }).where("finished_at", "<", before).delete();
      const webhooks = ids.length ? await q("webhooks").whereIn("id", ids).delete() : 0;
      return { webhooks, deliveries: deliveries + oldDeliveries, attempts };
    },
    async pendingCount() {
      const [{ n }] = await q("deliveries").where({ state: "pending" }).count<{ n: number }[]>("* as n");
      return Number(n);
    },
  };
}
