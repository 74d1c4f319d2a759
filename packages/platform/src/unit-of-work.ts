/**
 * The unit of work every service's application layer writes through: one database transaction,
 * the service's stores bound to it, and an event writer that adds events to the service's outbox
 * in the same transaction. After the commit the outbox relay is woken, so the events go out at
 * once; a rollback takes the events with it. A call to another service is refused inside a unit
 * of work: it would hold the transaction's locks across the network, and leave the two services
 * disagreeing when either fails. A unit of a call that has ended (its deadline passed while it
 * waited, or its caller went away) rolls back instead of committing: the caller was answered that
 * the call failed and may be retrying it.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Knex } from "knex";
import { outboxRow } from "./bus.js";
import { callHasEnded } from "./call-scope.js";
import { AppError } from "./errors.js";

/** Writes events to the outbox of the unit's transaction (published after the commit). */
export interface EventWriter {
  emit(type: string, payload: Record<string, unknown>): Promise<void>;
}

/** A query runner a store adapter works on: the pool, or the unit's transaction. */
export type Queryable = Knex | Knex.Transaction;

export type UnitOfWork<S> = <T>(work: (stores: S, events: EventWriter) => Promise<T>) => Promise<T>;

const insideUnit = new AsyncLocalStorage<true>();

/** Whether the current async context runs inside a unit of work (checked before remote calls). */
export function inUnitOfWork(): boolean {
  return insideUnit.getStore() === true;
}

/**
 * An event writer that keeps the outbox rows of a unit's events, to be written together once the
 * work is done, in the order emitted, each with the trace context of its emit: one statement for
 * a unit's events instead of one each.
 */
function eventCollector(): { events: EventWriter; rows: Array<ReturnType<typeof outboxRow>> } {
  const rows: Array<ReturnType<typeof outboxRow>> = [];
  return { rows, events: { async emit(type, payload) { rows.push(outboxRow(type, payload)); } } };
}

/**
 * Thrown instead of committing the change of a call that has ended; its caller has had its
 * answer. (Exported for the test doubles of units of work, which keep the same rule.)
 */
export function refuseEndedCall(): void {
  if (callHasEnded()) throw new AppError("unavailable", "The call ended (its deadline passed or its caller went away) before its change was committed; nothing was written. Safe to retry.");
}

export function createUnitOfWork<S>(db: Knex, storesOf: (q: Queryable) => S, relay: { notify(): void }): UnitOfWork<S> {
  return async (work) => {
    let emitted = false;
    const result = await insideUnit.run(true, () => db.transaction(async (trx) => {
      const { events, rows } = eventCollector();
      const out = await work(storesOf(trx), events);
      if (rows.length) {
        await trx("outbox").insert(rows);
        emitted = true;
      }
      refuseEndedCall();
      return out;
    }));
    if (emitted) relay.notify();
    return result;
  };
}

/**
 * A write of one statement, not yet sent, and the rows it returns: awaiting it sends it alone, a
 * unit of one statement sends it with its events. A knex query builder is one; a fake store's is
 * a thenable that makes the change in memory.
 */
export interface Statement<R> extends PromiseLike<R[]> {
  toSQL(): { sql: string; bindings: readonly Knex.Value[] };
}

/**
 * A unit of work whose change is one statement returning rows (an UPDATE ... RETURNING of a row),
 * sent with its events as one autocommitted statement: the change in a CTE, the events inserted
 * into the outbox only when it returned a row. One statement and one round trip where a unit of
 * work takes four (BEGIN, the change, the events, COMMIT); on a thumbnail's finalize, a quarter
 * of the statements an image (bench/notes/transfers.md). Atomic as the transaction was: the
 * change and its events commit together or not at all. Resolves to the statement's rows: none
 * when it matched nothing, and then no event was written and the relay is not woken. A call that
 * has ended sends nothing (the statement, once sent, commits as it ends: a wait for a lock in it is
 * bounded by the sessions' lock_timeout).
 */
export type OneStatementUnit = <R>(statement: Statement<R>, emit: (events: EventWriter) => Promise<void>) => Promise<R[]>;

export function createOneStatementUnit(db: Knex, relay: { notify(): void }): OneStatementUnit {
  return async <R>(statement: Statement<R>, emit: (events: EventWriter) => Promise<void>) => {
    const { events, rows } = eventCollector();
    await emit(events);
    refuseEndedCall();
    if (!rows.length) return statement;
    const { sql, bindings: changeBindings } = statement.toSQL();
    // The events keep the order emitted (the outbox's seq orders a service's events).
    const values = rows.map(() => "(?::uuid, ?, ?::jsonb, ?::jsonb, ?::int)").join(", ");
    const bindings = rows.flatMap((r, i) => [r.id, r.type, JSON.stringify(r.payload), JSON.stringify(r.headers), i]);
    const result = await db.raw(
      `WITH change AS (${sql}),
       events AS (
         INSERT INTO outbox (id, type, payload, headers)
         SELECT id, type, payload, headers FROM (VALUES ${values}) AS e (id, type, payload, headers, ord)
         WHERE EXISTS (SELECT 1 FROM change) ORDER BY ord
       )
       SELECT * FROM change`,
      [...changeBindings, ...bindings],
    );
    const changed = result.rows as R[];
    if (changed.length) relay.notify();
    return changed;
  };
}
