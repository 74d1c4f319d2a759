/**
 * The event bus. A state change and its event are written in one transaction (the outbox table
 * of the writing service's schema); a relay publishes pending rows, to NATS JetStream with the
 * row id as message id (deduplicated inside the stream's window) when NATS_URL is set, or to
 * in-process subscribers otherwise. Subscribers are durable (a JetStream durable consumer per
 * subscription name) and must be idempotent: delivery is at least once.
 *
 * broadcast()/onBroadcast() are fire-and-forget notifications to every replica (cache
 * invalidation); they are not persisted.
 */
import { EventEmitter } from "node:events";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation } from "@opentelemetry/api";
import type { Knex } from "knex";
import type { JetStreamManager } from "@nats-io/jetstream";
import type { Logger } from "./logger.js";
import { prepared, type Migration } from "./db.js";
import { observeConsumer, recordConsumed, recordPublished, secondsSince } from "./metrics.js";
import { tracer } from "./telemetry.js";

/** How long drain() and settle() wait by default before they report what is left. */
const DRAIN_TIMEOUT_MS = 15_000;

export interface BusEvent {
  id: string;
  type: string;
  payload: Record<string, unknown>;
  occurredAt: string;
  headers: Record<string, string>;
}

export type EventHandler = (event: BusEvent) => Promise<void>;

/** The outbox table, created in each service's own schema by its migration list. */
export const outboxMigration: Migration = {
  async up(knex) {
    await knex.schema.createTable("outbox", (t) => {
      t.bigIncrements("seq");
      t.uuid("id").notNullable().unique();
      t.text("type").notNullable();
      t.jsonb("payload").notNullable();
      t.jsonb("headers").notNullable().defaultTo("{}");
      t.timestamp("occurred_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      t.integer("attempts").notNullable().defaultTo(0);
      t.timestamp("next_attempt_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    });
  },
};

/** A service schema's migrations: the platform's outbox table first, then the service's own. */
export function serviceMigrations(own: ReadonlyArray<readonly [string, Migration]>): Array<readonly [string, Migration]> {
  return [["00000000000000_outbox", outboxMigration], ...own];
}

/** Adds an event to the outbox inside the caller's transaction. */
export async function enqueueEvent(trx: Knex | Knex.Transaction, type: string, payload: Record<string, unknown>): Promise<string> {
  const row = outboxRow(type, payload);
  await trx("outbox").insert(row);
  return row.id;
}

/** An outbox row for an event, carrying the trace context active now (the change that caused it). */
export function outboxRow(type: string, payload: Record<string, unknown>): { id: string; type: string; payload: Record<string, unknown>; headers: Record<string, string> } {
  const headers: Record<string, string> = {};
  propagation.inject(context.active(), headers);
  return { id: randomUUID(), type, payload, headers };
}

/**
 * Runs a subscription's handler for one event inside a CONSUMER span that continues the trace of
 * the change that caused the event (its context travels in the event's headers), and counts it.
 */
async function consume(subscription: string, event: BusEvent, handler: EventHandler, system: string): Promise<void> {
  const parent = propagation.extract(ROOT_CONTEXT, event.headers);
  const started = performance.now();
  const attributes = {
    "messaging.system": system, "messaging.operation.type": "process", "messaging.destination.name": event.type,
    "messaging.consumer.group.name": subscription, "messaging.message.id": event.id,
  };
  await tracer().startActiveSpan(`process ${event.type}`, { kind: SpanKind.CONSUMER, attributes }, parent, async (span) => {
    try {
      await handler(event);
      recordConsumed(subscription, event.type, "ok", secondsSince(started));
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
      recordConsumed(subscription, event.type, "error", secondsSince(started));
      throw err;
    } finally {
      span.end();
    }
  });
}

/** Transport beneath the relay: where published events go and where subscribers read. */
export interface BusTransport {
  /** messaging.system of its spans: "nats" or "in_process". */
  readonly system: string;
  publish(event: BusEvent): Promise<void>;
  subscribe(name: string, type: string, handler: EventHandler): Promise<void>;
  broadcast(type: string, payload: Record<string, unknown>): void;
  onBroadcast(type: string, handler: (payload: Record<string, unknown>) => void): Promise<void>;
  /**
   * Every published event of `type`, in every process that listens (not durable: what is
   * published while a process is away is not replayed to it). For live fan-out, e.g. to every
   * gateway's open player sessions.
   */
  listen(type: string, handler: (event: BusEvent) => void): Promise<void>;
  /** Whether events can be published now (NATS connected; always for the in-process bus). */
  connected(): boolean;
  /**
   * Resolves once every subscriber has processed every event published before the call (the
   * in-process bus processes them within publish; JetStream consumers run apart, see
   * waitForConsumers); rejects after `timeoutMs`.
   */
  settle(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** In-process transport: the all-in-one default. */
export function createLocalTransport(log: Logger): BusTransport {
  const subs = new Map<string, Array<{ name: string; handler: EventHandler }>>();
  const listeners = new Map<string, Array<(event: BusEvent) => void>>();
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  return {
    system: "in_process",
    async publish(event) {
      const list = subs.get(event.type) ?? [];
      // Every subscriber must succeed before the row counts as published; a failure makes the
      // relay retry the whole event later (handlers are idempotent).
      for (const s of list) await consume(s.name, event, s.handler, "in_process");
      for (const l of listeners.get(event.type) ?? []) {
        try { l(event); } catch (err) { log.error({ err, type: event.type }, "event listener failed"); }
      }
    },
    async listen(type, handler) {
      listeners.set(type, [...(listeners.get(type) ?? []), handler]);
    },
    async subscribe(name, type, handler) {
      const list = subs.get(type) ?? [];
      if (list.some((s) => s.name === name)) throw new Error(`duplicate subscription ${name} on ${type}`);
      list.push({ name, handler });
      subs.set(type, list);
      log.debug({ name, type }, "subscribed (in-process)");
    },
    broadcast(type, payload) {
      emitter.emit(type, payload);
    },
    async onBroadcast(type, handler) {
      emitter.on(type, handler);
    },
    connected: () => true,
    async settle() {},
    async close() {
      emitter.removeAllListeners();
    },
  };
}

/** NATS JetStream transport. */
export async function createNatsTransport(opts: { url: string; stream: string; subjectPrefix: string; log: Logger }): Promise<BusTransport> {
  const { connect, headers: natsHeaders } = await import("@nats-io/transport-node");
  const { jetstream, jetstreamManager, AckPolicy, DeliverPolicy } = await import("@nats-io/jetstream");
  const { log, stream, subjectPrefix } = opts;
  const nc = await connect({ servers: opts.url, name: "cms", maxReconnectAttempts: -1 });
  const jsm = await jetstreamManager(nc);
  const subjects = [`${subjectPrefix}.>`];
  try {
    await jsm.streams.info(stream);
  } catch {
    try {
      await jsm.streams.add({ name: stream, subjects, duplicate_window: 2 * 60 * 1_000_000_000 });
    } catch (err) {
      // Another replica created it concurrently.
      await jsm.streams.info(stream).catch(() => { throw err; });
    }
  }
  const js = jetstream(nc);
  const consumers: Array<{ stop(): void }> = [];
  const unobserve: Array<() => void> = [];
  // Follows the connection's status events (readiness reports NOT_SERVING while disconnected).
  let isConnected = true;
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === "disconnect") isConnected = false;
      else if (s.type === "reconnect") isConnected = true;
    }
  })().catch(() => {});
  // This transport's broadcast handlers, and the id that marks its own broadcasts on the wire.
  const localBroadcast = new Map<string, Array<(payload: Record<string, unknown>) => void>>();
  const origin = randomUUID();
  let closing = false;
  const subjectOf = (type: string) => `${subjectPrefix}.${type}`;
  const broadcastSubject = (type: string) => `${subjectPrefix}-broadcast.${type}`;
  return {
    system: "nats",
    async publish(event) {
      const h = natsHeaders();
      for (const [k, v] of Object.entries(event.headers)) h.set(k, v);
      h.set("cms-occurred-at", event.occurredAt);
      await js.publish(subjectOf(event.type), JSON.stringify(event.payload), { msgID: event.id, headers: h });
    },
    async subscribe(name, type, handler) {
      const durable = `${name}`.replace(/[^A-Za-z0-9_-]/g, "_");
      try {
        await jsm.consumers.info(stream, durable);
      } catch {
        await jsm.consumers.add(stream, {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          filter_subject: subjectOf(type),
          max_deliver: -1,
          ack_wait: 60_000_000_000,
        }).catch(async (err) => { await jsm.consumers.info(stream, durable).catch(() => { throw err; }); });
      }
      const consumer = await js.consumers.get(stream, durable);
      const messages = await consumer.consume({ max_messages: 64 });
      consumers.push({ stop: () => messages.stop() });
      // Consumer lag: what the stream holds for this subscription that it has not acknowledged.
      unobserve.push(observeConsumer(name, async () => {
        const info = await consumer.info();
        return info.num_pending + info.num_ack_pending;
      }));
      void (async () => {
        for await (const m of messages) {
          const headers: Record<string, string> = {};
          // Lower case, as they were written (trace context is looked up as "traceparent").
          for (const k of m.headers?.keys() ?? []) headers[k.toLowerCase()] = m.headers!.get(k);
          const event: BusEvent = {
            id: m.headers?.get("Nats-Msg-Id") ?? String(m.seq),
            type,
            payload: m.json(),
            occurredAt: headers["cms-occurred-at"] ?? new Date().toISOString(),
            headers,
          };
          try {
            await consume(name, event, handler, "nats");
            m.ack();
          } catch (err) {
            log.warn({ err, type, subscription: name, attempt: m.info.deliveryCount }, "event handler failed; will be redelivered");
            m.nak(Math.min(30_000, 500 * 2 ** Math.min(m.info.deliveryCount, 6)));
          }
        }
      })().catch((err) => { if (!closing) log.error({ err, name }, "consumer loop ended"); });
    },
    broadcast(type, payload) {
      // Handlers of this process run at once (a token revoked through this process is refused
      // by its next request, not after a round trip through the server); other processes get
      // it through NATS and skip nothing, this one skips its own echo.
      for (const handler of localBroadcast.get(type) ?? []) {
        try { handler(payload); } catch (err) { log.error({ err, type }, "broadcast handler failed"); }
      }
      const h = natsHeaders();
      h.set("cms-origin", origin);
      nc.publish(broadcastSubject(type), JSON.stringify(payload), { headers: h });
    },
    async listen(type, handler) {
      const sub = nc.subscribe(subjectOf(type));
      void (async () => {
        for await (const m of sub) {
          const headers: Record<string, string> = {};
          for (const k of m.headers?.keys() ?? []) headers[k] = m.headers!.get(k);
          try {
            handler({ id: m.headers?.get("Nats-Msg-Id") ?? "", type, payload: m.json(), occurredAt: headers["cms-occurred-at"] ?? new Date().toISOString(), headers });
          } catch (err) {
            log.error({ err, type }, "event listener failed");
          }
        }
      })();
      await nc.flush();
    },
    async onBroadcast(type, handler) {
      localBroadcast.set(type, [...(localBroadcast.get(type) ?? []), handler]);
      const sub = nc.subscribe(broadcastSubject(type));
      void (async () => {
        for await (const m of sub) {
          if (m.headers?.get("cms-origin") === origin) continue;
          handler(m.json());
        }
      })();
      // A round trip to the server, so the interest is registered once this resolves: a
      // revocation broadcast sent right after start-up is not missed.
      await nc.flush();
    },
    connected: () => isConnected && !nc.isClosed(),
    settle: (timeoutMs) => waitForConsumers(jsm, stream, timeoutMs),
    async close() {
      closing = true;
      for (const u of unobserve) u();
      for (const c of consumers) c.stop();
      await nc.drain().catch(() => nc.close());
    },
  };
}

/**
 * Resolves once every durable consumer of `stream` (every subscription, in any process) has
 * acknowledged what the stream held at the call; rejects after `timeoutMs`, naming the consumers
 * still behind (one of them may have no process running). A consumer whose acknowledgements passed
 * that point, or that has nothing pending or unacknowledged, is done: messages outside its filter
 * never reach it.
 */
export async function waitForConsumers(jsm: JetStreamManager, stream: string, timeoutMs = DRAIN_TIMEOUT_MS): Promise<void> {
  const lastSeq = (await jsm.streams.info(stream)).state.last_seq;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const behind: string[] = [];
    for await (const c of jsm.consumers.list(stream)) {
      if (c.ack_floor.stream_seq < lastSeq && c.num_pending + c.num_ack_pending > 0) behind.push(c.name);
    }
    if (!behind.length) return;
    if (Date.now() >= deadline) throw new Error(`stream ${stream}: consumer(s) ${behind.join(", ")} have not processed what was published before the wait, after ${timeoutMs} ms`);
    await sleep(25);
  }
}

/**
 * Resolves once the outbox rows present at the call are published (gone), whatever is written
 * meanwhile; rejects after `timeoutMs`. `pass` is a relay pass of this process, run in between;
 * without one, the relays of the processes that own the outbox publish them.
 */
export async function waitForOutbox(db: Knex, schema: string, opts: { timeoutMs?: number; pass?: () => Promise<number> } = {}): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? DRAIN_TIMEOUT_MS;
  const top = await db("outbox").max<{ seq: string | null }>("seq as seq").first();
  if (top?.seq == null) return;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = Number((await db("outbox").where("seq", "<=", top.seq).count<{ count: number }[]>("* as count").first())?.count ?? 0);
    if (left === 0) return;
    if (Date.now() >= deadline) throw new Error(`outbox ${schema}: ${left} event(s) pending when the wait began are still unpublished after ${timeoutMs} ms`);
    // Nothing published by a pass here: another pass holds the outbox, or the rows wait for a retry.
    if (((await opts.pass?.()) ?? 0) === 0) await sleep(20);
  }
}

/**
 * Relay of one service's outbox. It wakes when the service enqueued something (notify) and
 * on a timer (events written just before a crash); one pass at a time (an advisory lock, across
 * replicas) publishes the rows in order and deletes what was published.
 */
export interface OutboxRelay {
  /** Events not yet published and the age of the oldest (metrics read it at collection time). */
  backlog(): Promise<{ unpublished: number; lagSeconds: number }>;
  notify(): void;
  start(): void;
  stop(): Promise<void>;
  /**
   * Resolves once every event pending at the call is published (tests and orderly shutdown);
   * rejects if some are not within `timeoutMs` (the transport keeps failing).
   */
  drain(timeoutMs?: number): Promise<void>;
}

/** A row of the outbox table as the relay claims it. */
export interface OutboxRow {
  seq: string;
  id: string;
  type: string;
  payload: Record<string, unknown>;
  headers: Record<string, string> | null;
  occurred_at: Date | string;
  attempts: number;
  next_attempt_at: Date | string;
}

/**
 * Claims the outbox's due rows, up to `batch`, by deleting them in the caller's transaction: the
 * relay publishes them, writes back those whose publish failed, and commits. One pass at a time
 * per outbox, across replicas: two passes taking rows side by side (SKIP LOCKED) would publish a
 * later event before an earlier one of the same collection. The lock is taken in the statement
 * that claims the rows (a scalar subquery, evaluated once), so a pass is three statements (BEGIN,
 * this, COMMIT); a pass that dies uncommitted leaves every row where it was. Prepared: a pass runs
 * after every unit of work that wrote events.
 *
 * The same statement makes the transaction's commit asynchronous (`synchronous_commit` off for
 * this transaction only): the commit does not wait for its WAL to reach the disk, which halves the
 * WAL flushes of every write that emits events (the unit of work's commit still waits for its
 * own). A crash can lose only such a commit, never part of it: the claimed rows come back and are
 * published again, a duplicate that at-least-once delivery already allows (a crash between the
 * publish and any commit does the same).
 */
export async function claimDueRows(trx: Knex.Transaction, batch: number): Promise<OutboxRow[]> {
  const { rows } = await prepared(trx.raw<{ rows: OutboxRow[] }>(
    `DELETE FROM outbox WHERE seq IN (
       SELECT seq FROM outbox
       WHERE (SELECT pg_try_advisory_xact_lock(hashtext(current_schema() || ':outbox-relay')) FROM set_config('synchronous_commit', 'off', true))
         AND next_attempt_at <= now()
       ORDER BY seq LIMIT ? FOR UPDATE SKIP LOCKED)
     RETURNING *`,
    [batch],
  ));
  return rows;
}

export function createOutboxRelay(db: Knex, transport: BusTransport, log: Logger, opts: { pollMs?: number; batch?: number; schema?: string } = {}): OutboxRelay {
  const schema = opts.schema ?? "unknown";
  const pollMs = opts.pollMs ?? 1000;
  const batch = opts.batch ?? 100;
  let running = false;
  let wake: (() => void) | undefined;
  let pending = false;
  let loop: Promise<void> | undefined;

  async function once(): Promise<number> {
    return db.transaction(async (trx) => {
      const rows = await claimDueRows(trx, batch);
      // RETURNING follows no order: publish in the order the events were written.
      rows.sort((a, b) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1));
      const failed: OutboxRow[] = [];
      for (const row of rows) {
        const event: BusEvent = {
          id: row.id,
          type: row.type,
          payload: row.payload,
          headers: row.headers ?? {},
          occurredAt: new Date(row.occurred_at).toISOString(),
        };
        try {
          await publishTraced(event);
        } catch (err) {
          log.warn({ err, event: event.type, id: event.id, attempt: row.attempts + 1 }, "event publish failed; retrying later");
          failed.push(row);
        }
      }
      if (failed.length) {
        await trx("outbox").insert(failed.map((row) => ({
          ...row,
          attempts: row.attempts + 1,
          next_attempt_at: trx.raw(`now() + (? || ' milliseconds')::interval`, [String(Math.min(60_000, 250 * 2 ** Math.min(row.attempts, 8)))]),
        })));
      }
      return rows.length;
    });
  }

  /**
   * One event out, in a PRODUCER span child of the context the event was written in (the request
   * that changed the state); the span's own context replaces it in the headers, so consumers in
   * any process continue the same trace.
   */
  async function publishTraced(event: BusEvent): Promise<void> {
    const parent = propagation.extract(ROOT_CONTEXT, event.headers);
    const attributes = { "messaging.system": transport.system, "messaging.operation.type": "send", "messaging.destination.name": event.type, "messaging.message.id": event.id };
    await tracer().startActiveSpan(`publish ${event.type}`, { kind: SpanKind.PRODUCER, attributes }, parent, async (span) => {
      try {
        const headers = { ...event.headers };
        propagation.inject(context.active(), headers);
        await transport.publish({ ...event, headers });
        recordPublished(schema, event.type);
      } catch (err) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
        throw err;
      } finally {
        span.end();
      }
    });
  }

  /**
   * Whether a row is due. A pass on the timer asks this first: the timer is a safety net (rows a
   * crash left between commit and notify, retries coming due) and nearly always finds nothing,
   * and one read is a third of a pass's statements (BEGIN, claim, COMMIT) in every idle second.
   */
  async function due(): Promise<boolean> {
    const { rows } = await prepared(db.raw<{ rows: Array<{ due: boolean }> }>(
      "SELECT EXISTS (SELECT 1 FROM outbox WHERE next_attempt_at <= now()) AS due",
    ));
    return rows[0]?.due === true;
  }

  async function run(): Promise<void> {
    // The first pass and every pass after a notify or a full batch claim at once.
    let claim = true;
    while (running) {
      pending = false;
      let n = 0;
      try {
        if (claim || await due()) n = await once();
      } catch (err) {
        if (running) log.error({ err }, "outbox relay pass failed");
      }
      if (n >= batch || pending) { claim = true; continue; }
      claim = await new Promise<boolean>((r) => {
        const t = setTimeout(() => r(false), pollMs);
        wake = () => { clearTimeout(t); r(true); };
      });
      wake = undefined;
    }
  }

  return {
    async backlog() {
      const row = await db("outbox").first(db.raw("count(*)::int AS n"), db.raw("COALESCE(EXTRACT(EPOCH FROM now() - min(occurred_at)), 0)::float8 AS lag"));
      return { unpublished: Number(row?.n ?? 0), lagSeconds: Math.max(0, Number(row?.lag ?? 0)) };
    },
    notify() {
      pending = true;
      wake?.();
    },
    start() {
      if (running) return;
      running = true;
      loop = run();
    },
    async stop() {
      running = false;
      wake?.();
      await loop;
    },
    drain: (timeoutMs) => waitForOutbox(db, schema, { timeoutMs, pass: once }),
  };
}
