/**
 * Webhook fan-out: 1,000 published collections, each with a webhook to one local https receiver,
 * each changed 10 times (collections.update through the JSON endpoint) within one coalescing
 * window (60 s by default: 10,000 updates take 34-39 s on an idle 2-core machine here; BENCH_WEBHOOK_WINDOW_MS to change it). Measures deliveries per second once the windows close, and the delay
 * from each window's end to its delivery at the receiver (p50, p99); checks exactly one delivery
 * per collection listing its ten changes, and the server's RSS before and after.
 * Goals: one delivery per collection per window, p99 < 2 s after the window closes, RSS flat.
 * (`npm run bench` trusts the test receiver's certificate through NODE_EXTRA_CA_CERTS.)
 */
import { percentile, round, startBenchSystem, type BenchOptions, type Scenario, type ScenarioReport } from "./lib.js";
import { startReceiver } from "../test/helpers/webhook-receiver.js";

const COLLECTIONS = Number(process.env.BENCH_WEBHOOK_COLLECTIONS ?? 1000);
const CHANGES = 10;
const CONCURRENCY = 16;
/** The coalescing window; a loaded machine needs a longer one for the 10,000 changes to fit in it. */
const WINDOW_MS = Number(process.env.BENCH_WEBHOOK_WINDOW_MS ?? 60_000);

async function run(_opts: BenchOptions): Promise<ScenarioReport> {
  const receiver = await startReceiver();
  const bench = await startBenchSystem({ DB_POOL_MAX: "16", OUTBOUND_ALLOWED_HOSTS: "localhost", WEBHOOK_COALESCE_MS: String(WINDOW_MS) });
  const { system, userId, call } = bench;
  try {
    // 1,000 published public collections of the bench user, seeded with SQL.
    const cdb = system.dbOf("collections")!;
    const ids: number[] = (await cdb.raw(
      `INSERT INTO collections (user_id, name, position, share_access_level, share_access_configured, is_published, published_at, share_slug, publish_handle)
       SELECT ?, 'Hooked ' || i, i, 'public', true, true, now(), 'hooked-' || i, ? FROM generate_series(1, ?) i RETURNING id`,
      [userId, bench.username, COLLECTIONS],
    )).rows.map((r: { id: number }) => Number(r.id));
    const setStart = Date.now();
    await pool(ids, async (id) => { await call({ op: "collections.webhook_set", collection_id: id, url: receiver.url }); });
    const setMs = Date.now() - setStart;

    const rssBefore = process.memoryUsage().rss;
    const changeStart = Date.now();
    const jobs = ids.flatMap((id) => Array.from({ length: CHANGES }, (_, i) => ({ id, i })));
    await pool(jobs, async ({ id, i }) => { await call({ op: "collections.update", collection_id: id, name: `Hooked ${id} v${i}` }); });
    const changeMs = Date.now() - changeStart;
    if (changeMs > WINDOW_MS * 0.85) throw new Error(`the ${jobs.length} changes took ${changeMs} ms, longer than one window (BENCH_WEBHOOK_WINDOW_MS=${WINDOW_MS})`);

    // Wait for every window to close and deliver.
    const deadline = Date.now() + WINDOW_MS + 90_000;
    while (receiver.received.length < COLLECTIONS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 2000));
    const rssAfter = process.memoryUsage().rss;

    const wdb = system.dbOf("webhooks")!;
    const closedAt = new Map<string, number>((await wdb("deliveries").select("id", "window_closed_at")).map((d: { id: string; window_closed_at: Date }) => [d.id, new Date(d.window_closed_at).getTime()]));
    const delays = Float64Array.from(receiver.received.map((r) => r.at - (closedAt.get(r.json.id) ?? r.at))).sort();
    const perCollection = new Map<number, number>();
    for (const r of receiver.received) perCollection.set(r.json.collection_id, (perCollection.get(r.json.collection_id) ?? 0) + 1);
    const exactlyOne = perCollection.size === COLLECTIONS && [...perCollection.values()].every((n) => n === 1);
    const allChanges = receiver.received.every((r) => r.json.changes.length === CHANGES);
    const first = Math.min(...receiver.received.map((r) => closedAt.get(r.json.id) ?? r.at));
    const last = Math.max(...receiver.received.map((r) => r.at));
    const rate = receiver.received.length / Math.max(0.001, (last - first) / 1000);
    // The windows close as their first changes came (over the ~20 s of updates): the busiest
    // second shows what the senders can do.
    const perSecond = new Map<number, number>();
    for (const r of receiver.received) perSecond.set(Math.floor(r.at / 1000), (perSecond.get(Math.floor(r.at / 1000)) ?? 0) + 1);
    const peak = Math.max(...perSecond.values());
    const p50 = percentile(delays, 50);
    const p99 = percentile(delays, 99);
    const goals = { one_delivery_per_collection: exactlyOne && allChanges, p99_under_2s: p99 < 2000, rss_flat: rssAfter - rssBefore < 64 * 1024 * 1024 };
    return {
      scenario: "webhooks",
      results: [],
      summary: {
        collections: COLLECTIONS, changes: jobs.length, change_ms: changeMs, webhook_set_ms: setMs, deliveries: receiver.received.length,
        deliveries_per_s: round(rate, 1), peak_deliveries_per_s: peak, delay_p50_ms: round(p50, 1), delay_p99_ms: round(p99, 1), rss_before_mb: round(rssBefore / 2 ** 20, 1), rss_after_mb: round(rssAfter / 2 ** 20, 1), goals,
      },
      lines: [
        `${COLLECTIONS} webhooks set in ${(setMs / 1000).toFixed(1)} s; ${jobs.length} collections.update calls in ${(changeMs / 1000).toFixed(1)} s (one ${WINDOW_MS / 1000} s window)`,
        `deliveries: ${receiver.received.length} (${perCollection.size} collections; each listing ${CHANGES} changes: ${allChanges})`,
        `deliveries per second: ${rate.toFixed(1)} over the span of the windows closing, ${peak} in the busiest second; delay from window end to receipt p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms`,
        `server RSS ${(rssBefore / 2 ** 20).toFixed(0)} MiB before the changes, ${(rssAfter / 2 ** 20).toFixed(0)} MiB after the deliveries`,
        `exactly one delivery per collection per window: ${goals.one_delivery_per_collection ? "PASS" : "FAIL"}`,
        `p99 < 2 s after the window closes: ${goals.p99_under_2s ? "PASS" : "FAIL"}`,
        `RSS flat (< 64 MiB growth): ${goals.rss_flat ? "PASS" : "FAIL"}`,
      ],
    };
  } finally {
    await bench.stop();
    await receiver.close();
  }
}

/** Runs `fn` over the items, CONCURRENCY at a time. */
async function pool<T>(items: T[], fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

export const webhooksScenario: Scenario = {
  name: "webhooks",
  description: "webhook fan-out: 1,000 published collections changed 10 times in one window, delivered to a local receiver",
  run,
};
