/** ui.state.get/set, player.command and the live player channel (SSE) through the gateway. */
import test, { type ExecutionContext } from "ava";
import { startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";
import { openSse, type SseStream } from "../helpers/sse.js";

let sys: TestSystem;
test.before(async () => { sys = await startTestSystem(); });
test.after.always(async () => { await sys?.stop(); });

/** An open channel of the user's, closed when the test ends. */
async function channel(t: ExecutionContext, u: TestUser, headers: Record<string, string> = {}): Promise<SseStream> {
  const s = await openSse(`${sys.url}/player/events`, { authorization: `Bearer ${u.token}`, ...headers });
  t.teardown(() => s.close());
  return s;
}

/** Waits until the social service's register shows `n` open sessions of the user. */
async function sessions(u: TestUser, n: number): Promise<void> {
  const db = sys.system.dbOf("social")!;
  for (let i = 0; i < 200; i++) {
    const [{ c }] = await db("player_sessions").where({ user_id: u.userId }).count<{ c: number }[]>("* as c");
    if (Number(c) === n) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`the register never showed ${n} sessions`);
}

test("ui.state: empty at first; set merges the fields given, checks the ids, bumps the version", async (t) => {
  const u = await sys.user();
  const empty = await sys.must(u.token, { op: "ui.state.get" });
  t.deepEqual(empty, { ui_state: { collection_id: null, media_id: null, view_mode: null, source: null, browse_results: [], browse_title: null, browse_source: null, version: 0, updated_at: null } });
  const { collection } = await sys.must(u.token, { op: "collections.create", name: "Shown" });
  const { media } = await sys.must(u.token, { op: "media.text_note.add", collection_id: collection.id, name: "n", text: "x" });
  const set = await sys.must(u.token, { op: "ui.state.set", collection_id: collection.id, media_id: media.id, view_mode: "carousel", browse_results: [collection.id], browse_title: "Mine" });
  t.like(set.ui_state, { collection_id: collection.id, media_id: media.id, view_mode: "carousel", browse_results: [collection.id], browse_title: "Mine", version: 1 });
  t.is(set.delivered_to, 0);
  const merged = await sys.must(u.token, { op: "ui.state.set", view_mode: "grid" });
  t.like(merged.ui_state, { collection_id: collection.id, media_id: media.id, view_mode: "grid", version: 2 });
  t.deepEqual((await sys.must(u.token, { op: "ui.state.get" })).ui_state, merged.ui_state);
  t.deepEqual((await sys.must(u.token, { op: "ui.state.set", browse_results: [] })).ui_state.browse_results, []);
});

test("ui.state.set refuses ids the caller may not read, media of another collection, unknown fields and modes, and needs both scopes", async (t) => {
  const u = await sys.user();
  const other = await sys.user();
  const { collection: mine } = await sys.must(u.token, { op: "collections.create", name: "Mine" });
  const { collection: theirs } = await sys.must(other.token, { op: "collections.create", name: "Theirs" });
  const { media: theirNote } = await sys.must(other.token, { op: "media.text_note.add", collection_id: theirs.id, text: "x" });
  const { collection: second } = await sys.must(u.token, { op: "collections.create", name: "Second" });
  const { media: mineNote } = await sys.must(u.token, { op: "media.text_note.add", collection_id: second.id, text: "x" });
  const bad = async (body: Record<string, unknown>, field: string) => {
    const res = await sys.call(u.token, { op: "ui.state.set", ...body });
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.field, field, JSON.stringify(res.body));
  };
  await bad({ collection_id: theirs.id }, "collection_id");
  await bad({ collection_id: 99999999 }, "collection_id");
  await bad({ media_id: theirNote.id }, "media_id");
  await bad({ collection_id: mine.id, media_id: mineNote.id }, "media_id");
  await bad({ browse_results: [mine.id, theirs.id] }, "browse_results");
  await bad({ browse_results: Array.from({ length: 101 }, (_, i) => i + 1) }, "browse_results");
  await bad({ view_mode: "tiles" }, "view_mode");
  await bad({ theme: "dark" }, "theme");
  const reader = await sys.user({ scopes: ["collections:read"] });
  t.is((await sys.call(reader.token, { op: "ui.state.set", view_mode: "grid" })).body.error, "insufficient_scope");
  t.is((await sys.call(reader.token, { op: "ui.state.get" })).body.error, "insufficient_scope");
  // A public published collection of someone else can be shown.
  const { collection: pub } = await sys.must(other.token, { op: "collections.create", name: "Public", share_access_level: "public" });
  await sys.must(other.token, { op: "collections.publish", collection_id: pub.id, slug: `pub-${pub.id}` });
  t.is((await sys.call(u.token, { op: "ui.state.set", collection_id: pub.id })).status, 200);
});

test("the live channel: the current state first, then every change and command, in every open session", async (t) => {
  const u = await sys.user();
  const { collection } = await sys.must(u.token, { op: "collections.create", name: "Live" });
  await sys.must(u.token, { op: "ui.state.set", collection_id: collection.id, view_mode: "grid" });
  const a = await channel(t, u);
  const b = await channel(t, u);
  t.is(a.status, 200);
  const first = await a.next();
  t.is(first.event, "ui_state");
  t.like(JSON.parse(first.data), { collection_id: collection.id, view_mode: "grid", version: 1 });
  t.is(first.id, "1");
  await b.next();
  await sessions(u, 2);
  const set = await sys.must(u.token, { op: "ui.state.set", view_mode: "fullscreen" });
  t.is(set.delivered_to, 2);
  for (const s of [a, b]) {
    const e = await s.next();
    t.is(e.event, "ui_state");
    t.is(e.id, "2");
    t.like(JSON.parse(e.data), { view_mode: "fullscreen", collection_id: collection.id });
  }
  const cmd = await sys.must(u.token, { op: "player.command", command: "next" });
  t.like(cmd, { command: "next", delivered_to: 2 });
  for (const s of [a, b]) {
    const e = await s.next();
    t.is(e.event, "command");
    t.is(e.id, `command-${cmd.command_id}`);
    t.like(JSON.parse(e.data), { command: "next", command_id: cmd.command_id });
  }
  // Someone else's change does not reach these sessions.
  const stranger = await sys.user();
  await sys.must(stranger.token, { op: "player.command", command: "pause" });
  await sys.must(u.token, { op: "player.command", command: "play" });
  t.like(JSON.parse((await a.next()).data), { command: "play" });
});

test("a session that reconnects gets the current state at once; the channel needs a token with both scopes; sessions per user are capped", async (t) => {
  const u = await sys.user();
  await sys.must(u.token, { op: "ui.state.set", view_mode: "list" });
  await sys.must(u.token, { op: "ui.state.set", view_mode: "carousel" });
  const again = await channel(t, u, { "last-event-id": "1" });
  const e = await again.next();
  t.is(e.id, "2");
  t.like(JSON.parse(e.data), { view_mode: "carousel", version: 2 });
  t.is((await openSse(`${sys.url}/player/events`, {})).status, 401);
  const reader = await sys.user({ scopes: ["collections:read"] });
  t.is((await openSse(`${sys.url}/player/events`, { authorization: `Bearer ${reader.token}` })).status, 403);
  const many = await sys.user();
  for (let i = 0; i < 10; i++) t.is((await channel(t, many)).status, 200);
  const over = await openSse(`${sys.url}/player/events`, { authorization: `Bearer ${many.token}` });
  t.is(over.status, 429);
});

test("player.command: the fields each command needs, and none it does not", async (t) => {
  const u = await sys.user();
  const { collection } = await sys.must(u.token, { op: "collections.create", name: "Cmd" });
  const ok = async (body: Record<string, unknown>) => t.is((await sys.call(u.token, { op: "player.command", ...body })).status, 200, JSON.stringify(body));
  const bad = async (body: Record<string, unknown>, field: string) => {
    const res = await sys.call(u.token, { op: "player.command", ...body });
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.field, field);
  };
  await ok({ command: "seek", position_ms: 1500 });
  await ok({ command: "open", collection_id: collection.id });
  await ok({ command: "fullscreen", on: false });
  await bad({ command: "seek" }, "position_ms");
  await bad({ command: "open" }, "collection_id");
  await bad({ command: "fullscreen" }, "on");
  await bad({ command: "play", position_ms: 1 }, "position_ms");
  await bad({ command: "rewind" }, "command");
  await bad({ command: "open", collection_id: 99999999 }, "collection_id");
});
