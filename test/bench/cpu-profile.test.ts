/** bench/cpu-profile.ts: the busy time a profile sampled, and its summary. */
import test from "ava";
import { busyMicros, summarize } from "../../bench/cpu-profile.js";
import { sampleProfile as profile } from "./sample-profile.js";

test("busyMicros adds the time from each sample that is not idle to the next one (the last to the end)", (t) => {
  // Samples at 100 (query), 150 (idle), 450 (serve), 470 (idle), 540 (query); the end at 600.
  const p = profile([3, 4, 2, 4, 3], [100, 50, 300, 20, 70], 600);
  t.is(busyMicros(p), 50 + 20 + 60);
  t.is(busyMicros(profile([4, 4], [10, 10], 100)), 0);
});

test("summarize lists frames by self time and by total time, as shares of every sample", (t) => {
  const lines = summarize(profile([3, 3, 2, 4], [100, 100, 100, 100], 500), 2, 3);
  t.deepEqual(lines, [
    "samples 4",
    "-- self time:",
    "   50.0%  query ~/pg/lib/query.js:10",
    "   25.0%  serve :10",
    "-- total time:",
    "  100.0%  (root) :10",
    "   75.0%  serve :10",
    "   50.0%  query ~/pg/lib/query.js:10",
  ]);
  t.false(summarize(profile([3], [100], 200), 5, 0).includes("-- total time:"));
});
