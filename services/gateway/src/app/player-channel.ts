/**
 * The live channel of open player pages, as this gateway process holds it: the open sessions by
 * user, what reaches them (each user's ui.state changes and player commands, from the bus, so a
 * change made through any gateway reaches sessions on every gateway), and the register of open
 * sessions kept in the social service (so ui.state.set and player.command can say how many
 * sessions they reached): changes at once, the whole list as a heartbeat.
 */
import { randomUUID } from "node:crypto";
import type { Client } from "@connectrpc/connect";
import type { SocialService } from "@cms/contracts/social/v1/social_pb";
import { AppError, EVENTS, type BusEvent, type Logger, type ServiceBus } from "@cms/platform";

/** Open sessions one user may hold at a time on one gateway. */
export const MAX_SESSIONS_PER_USER = 10;
/** How often the whole list of sessions is reported (the social service ages out what stops being reported). */
export const REGISTER_HEARTBEAT_MS = 30_000;

/** One message of the channel: an SSE event. */
export interface ChannelMessage { event: "ui_state" | "command"; id: string; data: Record<string, unknown> }

export interface PlayerSessionSink {
  id: string;
  userId: string;
  /** Delivers a message; false when the session is too far behind and was closed. */
  send(message: ChannelMessage): boolean;
  close(): void;
}

export interface PlayerChannel {
  /** Registers a session; 429 rate_limited when the user already holds the most allowed. */
  open(userId: string, sink: Omit<PlayerSessionSink, "id" | "userId">): PlayerSessionSink;
  /** Forgets a session (its connection ended). */
  closed(session: PlayerSessionSink): void;
  /** Open sessions of a user on this gateway. */
  count(userId: string): number;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** The channel's message for a ui.state.changed event (its id is the state's version). */
export function uiStateMessage(payload: Record<string, unknown>): ChannelMessage {
  const { user_id: _u, ...state } = payload;
  return { event: "ui_state", id: String(payload.version ?? 0), data: state };
}

/** The channel's message for a player.command broadcast (its id marks it as a command). */
export function commandMessage(payload: Record<string, unknown>): ChannelMessage {
  const { user_id: _u, ...command } = payload;
  return { event: "command", id: `command-${String(payload.command_id)}`, data: command };
}

export function createPlayerChannel(deps: { bus: ServiceBus; social: () => Client<typeof SocialService>; log: Logger; heartbeatMs?: number }): PlayerChannel {
  const gatewayId = `gateway-${randomUUID()}`;
  const byUser = new Map<string, Set<PlayerSessionSink>>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const deliver = (userId: unknown, message: ChannelMessage) => {
    for (const s of byUser.get(String(userId)) ?? []) s.send(message);
  };

  /** Reports to the social service; a failure waits for the next heartbeat (the register ages out stale sessions). */
  const report = (open: PlayerSessionSink[], closed: string[], replace: boolean) => {
    if (stopped) return;
    deps.social().syncPlayerSessions({ gatewayId, sessions: open.map((s) => ({ sessionId: s.id, userId: s.userId })), closed, replace })
      .catch((err) => deps.log.warn({ err: (err as Error).message }, "reporting open player sessions failed; the next heartbeat retries"));
  };
  const all = () => [...byUser.values()].flatMap((set) => [...set]);

  return {
    open(userId, sink) {
      const set = byUser.get(userId) ?? new Set<PlayerSessionSink>();
      if (set.size >= MAX_SESSIONS_PER_USER) {
        throw new AppError("rate_limited", `At most ${MAX_SESSIONS_PER_USER} player sessions per user are open at once; close one first.`);
      }
      const session: PlayerSessionSink = { id: randomUUID(), userId, ...sink };
      set.add(session);
      byUser.set(userId, set);
      report([session], [], false);
      return session;
    },
    closed(session) {
      const set = byUser.get(session.userId);
      if (!set?.delete(session)) return;
      if (!set.size) byUser.delete(session.userId);
      report([], [session.id], false);
    },
    count: (userId) => byUser.get(userId)?.size ?? 0,
    async start() {
      await deps.bus.listen(EVENTS.uiStateChanged, (e: BusEvent) => deliver(e.payload.user_id, uiStateMessage(e.payload)));
      await deps.bus.onBroadcast(EVENTS.playerCommand, (p) => deliver(p.user_id, commandMessage(p)));
      timer = setInterval(() => report(all(), [], true), deps.heartbeatMs ?? REGISTER_HEARTBEAT_MS);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      for (const s of all()) s.close();
      report([], [], true);
      stopped = true;
    },
  };
}
