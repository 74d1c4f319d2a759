/** MCP sessions: idle expiry, per-user and total bounds, closing; in memory and in PostgreSQL. */
import test from "ava";
import { randomUUID } from "node:crypto";
import { AppError } from "@cms/platform";
import { useGatewayDatabase } from "./gateway-db.ts";
import { createMemoryMcpSessions, createPgMcpSessions, type McpSessionLimits, type McpSessionStore } from "../src/store/mcp-session-store.ts";

const gatewayDb = useGatewayDatabase(test);

const T0 = Date.UTC(2031, 4, 6, 12, 0, 0);
const user = () => `user-${randomUUID()}`;

type Make = (limits: McpSessionLimits) => McpSessionStore;
const impls: Array<[string, Make]> = [
  ["memory", (limits) => createMemoryMcpSessions(limits)],
  ["pg", (limits) => createPgMcpSessions(gatewayDb(), limits)],
];

// The pg tests share one table, so they run one after the other (the total bound counts all rows).
for (const [kind, make] of impls) {
  test.serial(`[${kind}] a session belongs to its user and ends when closed`, async (t) => {
    const s = make({ idleMs: 60_000, perUser: 5, max: 1000 });
    t.teardown(() => s.stop());
    const alice = user();
    const bob = user();
    const id = await s.open(alice, T0);
    t.regex(id, /^[A-Za-z0-9_-]{43}$/);
    t.is(await s.use(id, T0 + 1), alice);
    t.is(await s.use("no-such-session", T0 + 1), undefined);
    t.false(await s.close(id, bob), "another user cannot close it");
    t.is(await s.use(id, T0 + 2), alice);
    t.true(await s.close(id, alice));
    t.is(await s.use(id, T0 + 3), undefined);
    t.false(await s.close(id, alice));
  });

  test.serial(`[${kind}] a session idle longer than idleMs is gone; use keeps it alive`, async (t) => {
    const s = make({ idleMs: 10_000, perUser: 5, max: 1000 });
    t.teardown(() => s.stop());
    const u = user();
    const kept = await s.open(u, T0);
    const idle = await s.open(u, T0);
    t.is(await s.use(kept, T0 + 9_000), u);
    t.is(await s.use(kept, T0 + 18_000), u, "each use restarts the idle time");
    t.is(await s.use(idle, T0 + 18_000), undefined);
    t.is(await s.use(kept, T0 + 28_001), undefined);
  });

  test.serial(`[${kind}] a user holds at most perUser sessions: a new one closes the least recently used`, async (t) => {
    const s = make({ idleMs: 60_000, perUser: 2, max: 1000 });
    t.teardown(() => s.stop());
    const u = user();
    const other = user();
    const a = await s.open(u, T0);
    const b = await s.open(u, T0 + 1);
    const theirs = await s.open(other, T0 + 1);
    await s.use(a, T0 + 2); // b is now the least recently used
    const c = await s.open(u, T0 + 3);
    t.is(await s.use(a, T0 + 4), u);
    t.is(await s.use(b, T0 + 4), undefined);
    t.is(await s.use(c, T0 + 4), u);
    t.is(await s.use(theirs, T0 + 4), other, "another user's sessions are not touched");
    t.is(await s.closeAll(u), 2);
    t.is(await s.use(a, T0 + 5), undefined);
    t.is(await s.use(theirs, T0 + 5), other);
    await s.closeAll(other);
  });

  test.serial(`[${kind}] at most max sessions are open: one more is refused until idle ones expire`, async (t) => {
    if (kind === "pg") await gatewayDb()("mcp_sessions").delete();
    const s = make({ idleMs: 10_000, perUser: 5, max: 2 });
    t.teardown(() => s.stop());
    const [u1, u2, u3] = [user(), user(), user()];
    await s.open(u1, T0);
    await s.open(u2, T0 + 5_000);
    const err = await t.throwsAsync(s.open(u3, T0 + 6_000));
    t.true(err instanceof AppError);
    t.is((err as AppError).code, "unavailable");
    t.is((err as AppError).status, 503);
    // u1's session has been idle for more than 10 s: it makes room.
    const id = await s.open(u3, T0 + 10_001);
    t.is(await s.use(id, T0 + 10_002), u3);
    for (const u of [u1, u2, u3]) await s.closeAll(u);
  });
}
