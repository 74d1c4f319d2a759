/**
 * The synchronized player: each user's UI state (ui.state.get/set, stored with a version, every
 * change written to the outbox as ui.state.changed for the gateways' live channel), commands to
 * the user's open players (player.command, broadcast and not stored), and the register of open
 * player sessions that the gateways keep up to date, so both can say how many sessions they reached.
 */
import { randomUUID } from "node:crypto";
import type { Client } from "@connectrpc/connect";
import type { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import type { MediaService } from "@cms/contracts/media/v1/media_pb";
import { AppError, EVENTS, fromConnectError, type Caller, type UnitOfWork } from "@cms/platform";
import type { SocialStore, UiStatePatch, UiStateRow } from "../store/social-store.js";

/** A session counts as open while its gateway reported it within this time (they report every 30 s). */
export const SESSION_FRESH_MS = 90_000;

export interface UiStateInput {
  collectionId?: number;
  mediaId?: number;
  viewMode?: string;
  source?: string;
  browseResults?: number[];
  browseTitle?: string;
  browseSource?: string;
}

export interface CommandInput {
  command: string;
  positionMs?: number;
  collectionId?: number;
  mediaId?: number;
  on?: boolean;
}

export interface PlayerDeps {
  uow: UnitOfWork<SocialStore>;
  store: SocialStore;
  collections: () => Client<typeof CollectionsService>;
  media: () => Client<typeof MediaService>;
  broadcast(type: string, payload: Record<string, unknown>): void;
}

/** The state of a user who never set one. */
export function emptyUiState(userId: string): UiStateRow {
  return {
    user_id: userId, collection_id: null, media_id: null, view_mode: null, source: null, browse_results: [], browse_title: null,
    browse_source: null, version: 0, updated_at: null as unknown as Date,
  };
}

/** The stored state as the live channel's message carries it. */
export function uiStatePayload(s: UiStateRow): Record<string, unknown> {
  return {
    user_id: s.user_id, collection_id: s.collection_id === null ? null : Number(s.collection_id), media_id: s.media_id === null ? null : Number(s.media_id),
    view_mode: s.view_mode, source: s.source, browse_results: s.browse_results.map(Number), browse_title: s.browse_title,
    browse_source: s.browse_source, version: Number(s.version), updated_at: s.updated_at ? new Date(s.updated_at).toISOString() : null,
  };
}

export function createPlayer(deps: PlayerDeps) {
  const unreadable = (field: string, what: string) => new AppError("invalid_request", `${what} does not exist or you may not read it.`, { field });

  async function checkCollections(caller: Caller, ids: number[], field: string): Promise<void> {
    const answers = await Promise.all(ids.map((id) => deps.collections().checkAccess({ userId: caller.userId, collectionId: BigInt(id), action: "read" })
      .catch((err) => { throw fromConnectError(err); })));
    const bad = ids.find((_, i) => !answers[i]!.exists || answers[i]!.isDeleted || !answers[i]!.allowed);
    if (bad !== undefined) throw unreadable(field, `Collection ${bad}`);
  }

  async function checkMedia(caller: Caller, mediaId: number, collectionId: number | undefined): Promise<void> {
    let media;
    try {
      ({ media } = await deps.media().getMedia({ mediaId: BigInt(mediaId) }));
    } catch (err) {
      const e = fromConnectError(err);
      if (["not_found", "forbidden", "insufficient_permission"].includes(e.code)) throw unreadable("media_id", `Media ${mediaId}`);
      throw e;
    }
    if (collectionId !== undefined && Number(media?.collectionId) !== collectionId) {
      throw new AppError("invalid_request", `Media ${mediaId} is not an item of collection ${collectionId}.`, { field: "media_id" });
    }
  }

  return {
    async getUiState(caller: Caller): Promise<UiStateRow> {
      return (await deps.store.uiState(caller.userId)) ?? emptyUiState(caller.userId);
    },

    /** Checks the ids named (they exist and the caller may read them), then stores and publishes. */
    async setUiState(caller: Caller, input: UiStateInput): Promise<{ state: UiStateRow; deliveredTo: number }> {
      if (input.collectionId !== undefined) await checkCollections(caller, [input.collectionId], "collection_id");
      if (input.mediaId !== undefined) {
        const collectionId = input.collectionId ?? (await deps.store.uiState(caller.userId))?.collection_id ?? undefined;
        await checkMedia(caller, input.mediaId, collectionId === null || collectionId === undefined ? undefined : Number(collectionId));
      }
      if (input.browseResults?.length) await checkCollections(caller, [...new Set(input.browseResults)], "browse_results");
      const patch: UiStatePatch = {};
      if (input.collectionId !== undefined) patch.collection_id = input.collectionId;
      if (input.mediaId !== undefined) patch.media_id = input.mediaId;
      if (input.viewMode !== undefined) patch.view_mode = input.viewMode;
      if (input.source !== undefined) patch.source = input.source;
      if (input.browseResults !== undefined) patch.browse_results = input.browseResults;
      if (input.browseTitle !== undefined) patch.browse_title = input.browseTitle;
      if (input.browseSource !== undefined) patch.browse_source = input.browseSource;
      const state = await deps.uow(async (store, events) => {
        const s = await store.patchUiState(caller.userId, patch);
        await events.emit(EVENTS.uiStateChanged, uiStatePayload(s));
        return s;
      });
      return { state, deliveredTo: await deps.store.openPlayerSessions(caller.userId, SESSION_FRESH_MS) };
    },

    /** Checks the command's own fields, then broadcasts it to the caller's players. */
    async command(caller: Caller, input: CommandInput): Promise<{ commandId: string; deliveredTo: number }> {
      const need = (field: string, ok: boolean) => {
        if (!ok) throw new AppError("invalid_request", `${input.command} needs ${field}.`, { field });
      };
      const extra = (fields: Array<[string, unknown]>) => {
        const stray = fields.find(([, v]) => v !== undefined);
        if (stray) throw new AppError("invalid_request", `${stray[0]} does not belong to ${input.command}.`, { field: stray[0] });
      };
      switch (input.command) {
        case "seek":
          need("position_ms", input.positionMs !== undefined);
          extra([["collection_id", input.collectionId], ["media_id", input.mediaId], ["on", input.on]]);
          break;
        case "open":
          need("collection_id", input.collectionId !== undefined);
          extra([["position_ms", input.positionMs], ["on", input.on]]);
          await checkCollections(caller, [input.collectionId!], "collection_id");
          if (input.mediaId !== undefined) await checkMedia(caller, input.mediaId, input.collectionId);
          break;
        case "fullscreen":
          need("on", input.on !== undefined);
          extra([["position_ms", input.positionMs], ["collection_id", input.collectionId], ["media_id", input.mediaId]]);
          break;
        default:
          extra([["position_ms", input.positionMs], ["collection_id", input.collectionId], ["media_id", input.mediaId], ["on", input.on]]);
      }
      const commandId = randomUUID();
      deps.broadcast(EVENTS.playerCommand, {
        user_id: caller.userId, command_id: commandId, command: input.command,
        ...(input.positionMs !== undefined ? { position_ms: input.positionMs } : {}),
        ...(input.collectionId !== undefined ? { collection_id: input.collectionId } : {}),
        ...(input.mediaId !== undefined ? { media_id: input.mediaId } : {}),
        ...(input.on !== undefined ? { on: input.on } : {}),
      });
      return { commandId, deliveredTo: await deps.store.openPlayerSessions(caller.userId, SESSION_FRESH_MS) };
    },

    syncSessions(gatewayId: string, open: Array<{ session_id: string; user_id: string }>, closed: string[], replace: boolean): Promise<void> {
      return deps.store.syncPlayerSessions(gatewayId, open, closed, replace);
    },
  };
}

export type Player = ReturnType<typeof createPlayer>;
