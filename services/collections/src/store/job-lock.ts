/**
 * One replica at a time runs a job: a session-level advisory lock held on one pooled connection
 * for the job's length. (A transaction-scoped lock would keep a transaction open across the
 * job's calls to the media service.)
 */
import type { Knex } from "knex";

/** Runs `job` unless another process holds `name`'s lock; undefined when it was skipped. */
export async function exclusively<T>(db: Knex, name: string, job: () => Promise<T>): Promise<T | undefined> {
  const key = `cms-job:collections:${name}`;
  const conn = await db.client.acquireConnection();
  try {
    const { rows } = await conn.query("SELECT pg_try_advisory_lock(hashtext($1)) AS ok", [key]);
    if (!rows[0].ok) return undefined;
    try {
      return await job();
    } finally {
      await conn.query("SELECT pg_advisory_unlock(hashtext($1))", [key]);
    }
  } finally {
    await db.client.releaseConnection(conn);
  }
}
