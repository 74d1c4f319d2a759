/** Fixed one-minute windows: the in-memory limiter and the shared PostgreSQL one. */
import test from "ava";
import { useGatewayDatabase } from "./gateway-db.ts";
import { decide } from "../src/domain/rate-window.ts";
import { createMemoryRateLimiter, createPgRateLimiter, leaseSize, type RateLimiter } from "../src/store/rate-limit-store.ts";

const gatewayDb = useGatewayDatabase(test);

// A window boundary far from "now", so that the explicit clock decides everything.
const W0 = Date.UTC(2031, 4, 6, 12, 0, 0);

test("decide", (t) => {
  t.deepEqual(decide(1, 3, W0, W0 + 15_000), { allowed: true, limit: 3, remaining: 2, resetMs: 45_000 });
  t.deepEqual(decide(3, 3, W0, W0), { allowed: true, limit: 3, remaining: 0, resetMs: 60_000 });
  t.deepEqual(decide(4, 3, W0, W0 + 59_999), { allowed: false, limit: 3, remaining: 0, resetMs: 1 });
});

type Make = (limit: number) => RateLimiter;
const impls: Array<[string, Make]> = [
  ["memory", (limit) => createMemoryRateLimiter(limit)],
  ["pg", (limit) => createPgRateLimiter(gatewayDb(), limit)],
];

let n = 0;
/** A key no other test uses (the pg table is shared by the tests of this file). */
const freshKey = (label: string) => `u:${label}-${process.pid}-${++n}`;

for (const [kind, make] of impls) {
  test(`[${kind}] a limit of N allows N requests in a window, then refuses`, async (t) => {
    const rl = make(3);
    t.teardown(() => rl.stop());
    const key = freshKey("n");
    const now = W0 + 10_000;
    const seen = [];
    for (let i = 0; i < 5; i++) seen.push(await rl.hit(key, now + i));
    t.deepEqual(seen.map((d) => d.allowed), [true, true, true, false, false]);
    t.deepEqual(seen.map((d) => d.remaining), [2, 1, 0, 0, 0]);
    t.true(seen.every((d) => d.limit === 3));
    t.is(seen[0]!.resetMs, 50_000);
    t.is(seen[4]!.resetMs, 49_996);
  });

  test(`[${kind}] a new minute window starts afresh`, async (t) => {
    const rl = make(2);
    t.teardown(() => rl.stop());
    const key = freshKey("w");
    t.true((await rl.hit(key, W0 + 1_000)).allowed);
    t.true((await rl.hit(key, W0 + 2_000)).allowed);
    t.false((await rl.hit(key, W0 + 59_999)).allowed, "still the same window");
    const next = await rl.hit(key, W0 + 60_000);
    t.true(next.allowed, "the next window resets the count");
    t.is(next.remaining, 1);
    t.is(next.resetMs, 60_000);
    t.true((await rl.hit(key, W0 + 61_000)).allowed);
    t.false((await rl.hit(key, W0 + 62_000)).allowed);
  });

  test(`[${kind}] keys are independent`, async (t) => {
    const rl = make(1);
    t.teardown(() => rl.stop());
    const a = freshKey("a");
    const b = freshKey("b");
    t.true((await rl.hit(a, W0)).allowed);
    t.false((await rl.hit(a, W0)).allowed);
    const first = await rl.hit(b, W0);
    t.true(first.allowed);
    t.is(first.remaining, 0);
    t.false((await rl.hit(b, W0)).allowed);
  });
}

test("[pg] two limiters (replicas) share one count", async (t) => {
  const r1 = createPgRateLimiter(gatewayDb(), 3);
  const r2 = createPgRateLimiter(gatewayDb(), 3);
  t.teardown(() => { r1.stop(); r2.stop(); });
  const key = freshKey("shared");
  t.is((await r1.hit(key, W0)).remaining, 2);
  t.is((await r2.hit(key, W0)).remaining, 1);
  t.is((await r1.hit(key, W0)).remaining, 0);
  t.false((await r2.hit(key, W0)).allowed);
});

test("[pg] 20 concurrent hits on one key: exactly the limit allowed, and refused ones stop counting", async (t) => {
  const rl = createPgRateLimiter(gatewayDb(), 10);
  t.teardown(() => rl.stop());
  const key = freshKey("burst");
  const now = W0 + 30_000;
  const decisions = await Promise.all(Array.from({ length: 20 }, () => rl.hit(key, now)));
  t.is(decisions.filter((d) => d.allowed).length, 10, "exactly the limit is allowed");
  // Each allowed hit saw a distinct count 1..10 (remaining is limit - count, floored at 0).
  t.deepEqual(decisions.map((d) => d.remaining).sort((a, b) => b - a), [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  const row = await gatewayDb()("rate_limits").where({ key }).first();
  t.is(row.count, 11, "counted up to the first refusal");
  t.is(new Date(row.window_start).getTime(), W0);
  t.is((await rl.hit(key, now)).allowed, false);
  t.is((await gatewayDb()("rate_limits").where({ key }).first()).count, 11, "a refused key is refused without another upsert");
  t.true((await rl.hit(key, W0 + 60_000)).allowed, "the next window starts afresh");
});

test("leases: 1% of the limit at a time, at least one", (t) => {
  t.is(leaseSize(1), 1);
  t.is(leaseSize(60), 1);
  t.is(leaseSize(199), 1);
  t.is(leaseSize(200), 2);
  t.is(leaseSize(6000), 60);
});

test("[pg] a replica reserves leaseSize requests per upsert, and replicas never allow more than the limit together", async (t) => {
  const limit = 1000;
  const one = createPgRateLimiter(gatewayDb(), limit);
  t.teardown(() => one.stop());
  const key = freshKey("lease");
  const now = W0 + 5_000;
  const counts: number[] = [];
  for (let i = 0; i < 25; i++) {
    t.true((await one.hit(key, now)).allowed);
    counts.push((await gatewayDb()("rate_limits").where({ key }).first()).count);
  }
  t.deepEqual([...new Set(counts)], [10, 20, 30], "three upserts of ten for 25 requests");

  // Three replicas, a limit of 200 (leases of 2), 300 requests round robin: never more than the
  // limit, and at most one unused count per replica lost at the end.
  const replicas = [0, 1, 2].map(() => createPgRateLimiter(gatewayDb(), 200));
  t.teardown(() => { for (const r of replicas) r.stop(); });
  const shared = freshKey("replicas");
  let allowed = 0;
  for (let i = 0; i < 300; i++) if ((await replicas[i % 3]!.hit(shared, now)).allowed) allowed++;
  t.true(allowed <= 200 && allowed >= 197, String(allowed));
});

test("[memory] 20 concurrent hits on one key count exactly 20", async (t) => {
  const rl = createMemoryRateLimiter(10);
  t.teardown(() => rl.stop());
  const decisions = await Promise.all(Array.from({ length: 20 }, () => rl.hit("k", W0)));
  t.is(decisions.filter((d) => d.allowed).length, 10);
  t.deepEqual(decisions.map((d) => d.remaining), [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
});
