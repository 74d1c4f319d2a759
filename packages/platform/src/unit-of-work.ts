/**
 * The unit of work every service's application layer writes through: one database transaction,
 * the service's stores bound to it, and an event writer that adds events to the service's outbox
 * in the same transaction. After the commit the outbox relay is woken, so the events go out at
 * once; a rollback takes the events with it. A call to another service is refused inside a unit
 * of work: it would hold the transaction's locks across the network, and leave the two services
 * disagreeing when either fails.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Knex } from "knex";
import { outboxRow } from "./bus.js";

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

export function createUnitOfWork<S>(db: Knex, storesOf: (q: Queryable) => S, relay: { notify(): void }): UnitOfWork<S> {
  return async (work) => {
    let emitted = false;
    const result = await insideUnit.run(true, () => db.transaction(async (trx) => {
      // Events are written together once the work is done, in the order emitted, each with the
      // trace context of its emit: one statement for a unit's events instead of one each.
      const rows: Array<ReturnType<typeof outboxRow>> = [];
      const events: EventWriter = {
        async emit(type, payload) {
          rows.push(outboxRow(type, payload));
        },
      };
      const out = await work(storesOf(trx), events);
      if (rows.length) {
        await trx("outbox").insert(rows);
        emitted = true;
      }
      return out;
    }));
    if (emitted) relay.notify();
    return result;
  };
}
