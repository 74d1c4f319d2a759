/**
 * The hosted MCP server's sessions (Mcp-Session-Id): which user opened each one and when it was
 * last used. Sessions are bounded: one idle longer than `idleMs` is gone, a user holds at most
 * `perUser` (opening one more closes that user's least recently used), and at most `max` are
 * open at all (beyond that a new one is refused until some expire). A session carries no other
 * state (every request brings its own token, and the tools keep nothing between calls), so any
 * gateway replica serves any session: the all-in-one process keeps them in memory, replicas
 * share them in the gateway schema's mcp_sessions.
 */
import { randomBytes } from "node:crypto";
import type { Knex } from "knex";
import { AppError } from "@cms/platform";

/** The bounds of the session table. */
export interface McpSessionLimits { idleMs: number; perUser: number; max: number }

/** The sessions of the MCP endpoint. */
export interface McpSessionStore {
  /** Opens a session for a user and returns its id; throws `unavailable` when `max` are open. */
  open(userId: string, now?: number): Promise<string>;
  /** The user of an open session (marking it used now), or undefined when unknown, closed or idle too long. */
  use(id: string, now?: number): Promise<string | undefined>;
  /** Closes a session of this user; false when there was none. */
  close(id: string, userId: string): Promise<boolean>;
  /** Closes every session of a user (mcp.revoke_session); how many were open. */
  closeAll(userId: string): Promise<number>;
  /** Stops the sweep of idle sessions. */
  stop(): void;
}

/** A new session id: 256 random bits, URL-safe (visible ASCII, as the transport requires). */
export function newSessionId(): string {
  return randomBytes(32).toString("base64url");
}

function full(max: number): AppError {
  return new AppError("unavailable", `This MCP server holds its maximum of ${max} open sessions; retry in a minute, when idle ones have expired.`, { retry_after_seconds: 60 });
}

/** The all-in-one process's sessions, in memory. */
export function createMemoryMcpSessions(limits: McpSessionLimits): McpSessionStore {
  const sessions = new Map<string, { userId: string; lastUsed: number }>();
  const expire = (now: number) => {
    for (const [id, s] of sessions) if (now - s.lastUsed > limits.idleMs) sessions.delete(id);
  };
  const sweep = setInterval(() => expire(Date.now()), Math.min(limits.idleMs, 60_000));
  sweep.unref();
  return {
    async open(userId, now = Date.now()) {
      expire(now);
      const mine = [...sessions].filter(([, s]) => s.userId === userId).sort((a, b) => b[1].lastUsed - a[1].lastUsed);
      for (const [id] of mine.slice(limits.perUser - 1)) sessions.delete(id);
      if (sessions.size >= limits.max) throw full(limits.max);
      const id = newSessionId();
      sessions.set(id, { userId, lastUsed: now });
      return id;
    },
    async use(id, now = Date.now()) {
      const s = sessions.get(id);
      if (!s) return undefined;
      if (now - s.lastUsed > limits.idleMs) { sessions.delete(id); return undefined; }
      s.lastUsed = Math.max(s.lastUsed, now);
      return s.userId;
    },
    async close(id, userId) {
      const s = sessions.get(id);
      if (!s || s.userId !== userId) return false;
      sessions.delete(id);
      return true;
    },
    async closeAll(userId) {
      let n = 0;
      for (const [id, s] of sessions) if (s.userId === userId) { sessions.delete(id); n++; }
      return n;
    },
    stop() { clearInterval(sweep); },
  };
}

/** The replicas' shared sessions in the gateway schema (one UPDATE per MCP request). */
export function createPgMcpSessions(db: Knex, limits: McpSessionLimits): McpSessionStore {
  const expire = (now: number) => db("mcp_sessions").where("last_used_at", "<", new Date(now - limits.idleMs)).delete();
  const sweep = setInterval(() => { expire(Date.now()).catch(() => {}); }, Math.min(limits.idleMs, 60_000));
  sweep.unref();
  return {
    async open(userId, now = Date.now()) {
      await expire(now);
      // The user's most recent perUser - 1 stay; the rest make room for the new one.
      await db("mcp_sessions").whereIn("id", db("mcp_sessions").select("id").where({ user_id: userId }).orderBy("last_used_at", "desc").offset(limits.perUser - 1)).delete();
      const [{ n }] = await db("mcp_sessions").count<Array<{ n: string }>>({ n: "*" });
      if (Number(n) >= limits.max) throw full(limits.max);
      const id = newSessionId();
      await db("mcp_sessions").insert({ id, user_id: userId, created_at: new Date(now), last_used_at: new Date(now) });
      return id;
    },
    async use(id, now = Date.now()) {
      const rows = await db("mcp_sessions")
        .where({ id }).where("last_used_at", ">=", new Date(now - limits.idleMs))
        .update({ last_used_at: db.raw("greatest(last_used_at, ?)", [new Date(now)]) })
        .returning("user_id");
      return (rows[0] as { user_id: string } | undefined)?.user_id;
    },
    async close(id, userId) {
      return (await db("mcp_sessions").where({ id, user_id: userId }).delete()) > 0;
    },
    async closeAll(userId) {
      return db("mcp_sessions").where({ user_id: userId }).delete();
    },
    stop() { clearInterval(sweep); },
  };
}
