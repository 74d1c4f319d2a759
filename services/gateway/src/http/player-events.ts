/**
 * GET /player/events: the live channel an open player page subscribes to, as Server-Sent
 * Events. Authenticated by the user's bearer access token or the web session's cookie (the page's
 * EventSource sends it, withCredentials); it needs collections:read and media:read, as
 * ui.state.get does. The first message is the user's
 * current UI state, so a page that reconnects (with or without Last-Event-ID) is never stale;
 * then every ui.state change (id: its version) and every player command (id: command-<id>).
 * A comment every 15 s keeps proxies from closing the idle stream; a page too slow to take its
 * messages is disconnected (it reconnects and gets the current state) instead of holding the others.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { createContextValues, type Client } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import type { SocialService } from "@cms/contracts/social/v1/social_pb";
import { UiStateSchema } from "@cms/contracts/social/v1/resources_pb";
import { renderObject } from "../domain/render.js";
import { AppError, actAsKey, authorizeOperation, fromConnectError, type Caller, type Logger } from "@cms/platform";
import type { ChannelMessage, PlayerChannel } from "../app/player-channel.js";
import { failureOutcome } from "../app/run-operation.js";
import { sendJson } from "./answers.js";

export const PLAYER_EVENTS_PATH = "/player/events";
/** Unsent bytes a session may hold before it is disconnected. */
const MAX_BACKLOG_BYTES = 256 * 1024;

export interface PlayerEventsDeps {
  /** The user of a request: its bearer token, or its web session cookie (undefined when neither is live). */
  viewerOf: (req: IncomingMessage) => Promise<Caller | undefined>;
  channel: PlayerChannel;
  social: () => Client<typeof SocialService>;
  log: Logger;
  heartbeatMs?: number;
}

/** One SSE event. */
export function sseEvent(m: ChannelMessage): string {
  return `id: ${m.id}\nevent: ${m.event}\ndata: ${JSON.stringify(m.data)}\n\n`;
}

export function createPlayerEventsHandler(deps: PlayerEventsDeps) {
  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      if (req.method !== "GET") throw new AppError("invalid_request", `Use GET ${PLAYER_EVENTS_PATH}.`);
      const caller = await deps.viewerOf(req);
      if (!caller) {
        throw new AppError("unauthorized", req.headers.authorization
          ? "The access token is invalid, expired or revoked."
          : "The player channel needs \"Authorization: Bearer <access token>\" or a signed-in web session.");
      }
      authorizeOperation({ name: "the player channel", scopes: ["collections:read", "media:read"], anonymous: false, adminOnly: false }, caller);

      let lastVersion = -1;
      let open = true;
      const write = (text: string): boolean => {
        if (!open) return false;
        res.write(text);
        if (res.writableLength > MAX_BACKLOG_BYTES) {
          deps.log.info({ user_id: caller.userId }, "player session too slow; disconnected");
          res.destroy();
          return false;
        }
        return true;
      };
      const session = deps.channel.open(caller.userId, {
        send(m) {
          if (m.event === "ui_state") {
            const version = Number(m.id);
            if (version <= lastVersion) return true;
            lastVersion = version;
          }
          return write(sseEvent(m));
        },
        close() { res.end(); },
      });
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache, no-transform", connection: "keep-alive", "x-accel-buffering": "no" });
      res.flushHeaders();
      const heartbeat = setInterval(() => write(": ping\n\n"), deps.heartbeatMs ?? 15_000);
      heartbeat.unref();
      res.on("close", () => {
        open = false;
        clearInterval(heartbeat);
        deps.channel.closed(session);
      });
      write("retry: 3000\n\n");
      // The current state first: a page that slept, or reconnects, is never stale.
      let current;
      try {
        current = await deps.social().getUiState({}, { contextValues: createContextValues().set(actAsKey, caller) });
      } catch (err) {
        throw fromConnectError(err);
      }
      // The contract's JSON of the state, as ui.state.get answers it (and the change events carry it).
      const state = renderObject(UiStateSchema, current.uiState ?? create(UiStateSchema));
      session.send({ event: "ui_state", id: String(state.version), data: state });
    } catch (err) {
      if (res.headersSent) { res.destroy(); return; }
      const out = failureOutcome(err, deps.log);
      sendJson(res, out.status, out.body);
    }
  };
}
