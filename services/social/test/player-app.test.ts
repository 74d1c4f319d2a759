/**
 * Component tests of the player use cases over in-memory fakes: ids checked before the state
 * changes, a merge of the fields given with the version bumped and the change written to the
 * outbox, commands broadcast with only their own fields, and the register of open sessions.
 */
import test from "ava";
import { AppError, EVENTS, type Caller, type UnitOfWork } from "@cms/platform";
import { createPlayer, emptyUiState } from "../src/app/player.js";
import type { SocialStore, UiStatePatch, UiStateRow } from "../src/store/social-store.js";

const user: Caller = { userId: "11111111-1111-4111-8111-111111111111", username: "u", plan: "paid", isAdmin: false, scopes: [], tokenId: "t" };

function fakes() {
  const states = new Map<string, UiStateRow>();
  const sessions = new Map<string, { user_id: string; gateway_id: string }>();
  const emitted: Array<[string, Record<string, unknown>]> = [];
  const broadcasts: Array<[string, Record<string, unknown>]> = [];
  const store = {
    async uiState(id: string) { return states.get(id); },
    async patchUiState(id: string, patch: UiStatePatch) {
      const cur = states.get(id) ?? emptyUiState(id);
      const next = { ...cur, ...patch, version: cur.version + 1, updated_at: new Date() } as UiStateRow;
      states.set(id, next);
      return next;
    },
    async syncPlayerSessions(gateway: string, open: Array<{ session_id: string; user_id: string }>, closed: string[], replace: boolean) {
      if (replace) for (const [k, v] of sessions) if (v.gateway_id === gateway && !open.some((o) => o.session_id === k)) sessions.delete(k);
      for (const c of closed) sessions.delete(c);
      for (const o of open) sessions.set(o.session_id, { user_id: o.user_id, gateway_id: gateway });
    },
    async openPlayerSessions(id: string) { return [...sessions.values()].filter((s) => s.user_id === id).length; },
  } as unknown as SocialStore;
  const uow: UnitOfWork<SocialStore> = (work) => work(store, { emit: async (type, payload) => { emitted.push([type, payload]); } });
  const readable = new Set([1, 2]);
  const collections = () => ({ async checkAccess(r: { collectionId: bigint }) { return { exists: true, isDeleted: false, allowed: readable.has(Number(r.collectionId)) }; } }) as never;
  const media = () => ({
    async getMedia(r: { mediaId: bigint }) {
      if (r.mediaId === 7n) return { media: { collectionId: 1n } };
      throw new AppError("not_found", "no");
    },
  }) as never;
  const player = createPlayer({ uow, store, collections, media, broadcast: (t, p) => broadcasts.push([t, p]) });
  return { player, states, emitted, broadcasts };
}

test("set checks every id first and changes nothing when one is refused", async (t) => {
  const f = fakes();
  await t.throwsAsync(f.player.setUiState(user, { collectionId: 1, browseResults: [1, 3] }), { message: /Collection 3/ });
  await t.throwsAsync(f.player.setUiState(user, { mediaId: 8 }), { message: /Media 8/ });
  await t.throwsAsync(f.player.setUiState(user, { collectionId: 2, mediaId: 7 }), { message: /not an item of collection 2/ });
  t.is(f.states.size, 0);
  t.deepEqual(f.emitted, []);
});

test("set merges the given fields, bumps the version and writes ui.state.changed in the same unit", async (t) => {
  const f = fakes();
  const a = await f.player.setUiState(user, { collectionId: 1, mediaId: 7, viewMode: "grid" });
  t.is(a.state.version, 1);
  const b = await f.player.setUiState(user, { viewMode: "carousel" });
  t.like(b.state, { collection_id: 1, media_id: 7, view_mode: "carousel", version: 2 });
  // A media id alone is checked against the stored collection.
  await t.notThrowsAsync(f.player.setUiState(user, { mediaId: 7 }));
  t.deepEqual(f.emitted.map(([type, p]) => [type, p.version]), [[EVENTS.uiStateChanged, 1], [EVENTS.uiStateChanged, 2], [EVENTS.uiStateChanged, 3]]);
  t.is(f.emitted[1]![1].user_id, user.userId);
});

test("commands carry only their own fields and count the sessions the gateways reported", async (t) => {
  const f = fakes();
  await f.player.syncSessions("g1", [{ session_id: "s1", user_id: user.userId }, { session_id: "s2", user_id: user.userId }], [], true);
  await f.player.syncSessions("g2", [{ session_id: "s3", user_id: user.userId }], [], false);
  await f.player.syncSessions("g1", [], ["s2"], false);
  const out = await f.player.command(user, { command: "seek", positionMs: 1200 });
  t.is(out.deliveredTo, 2);
  t.deepEqual(f.broadcasts[0], [EVENTS.playerCommand, { user_id: user.userId, command_id: out.commandId, command: "seek", position_ms: 1200 }]);
  await t.throwsAsync(f.player.command(user, { command: "next", on: true }), { message: /on does not belong to next/ });
  await t.throwsAsync(f.player.command(user, { command: "open", collectionId: 3 }), { message: /Collection 3/ });
  await f.player.syncSessions("g1", [], [], true);
  t.is((await f.player.command(user, { command: "pause" })).deliveredTo, 1, "a replace drops the gateway's others");
});
