/** The bench's options and its alternated rounds' warm-ups (bench/lib.ts). */
import test from "ava";
import { benchOptions, warmupOf } from "../../bench/lib.js";

test("the first round of alternated rows warms each row at least firstWarmupMs; the later rounds as the row says", (t) => {
  t.is(warmupOf({ warmupMs: 1000 }, 0, 5000), 5000);
  t.is(warmupOf({ warmupMs: 8000 }, 0, 5000), 8000);
  t.is(warmupOf({ warmupMs: 1000 }, 1, 5000), 1000);
  t.is(warmupOf({ warmupMs: 1000 }, 2, 5000), 1000);
  t.is(warmupOf({ warmupMs: 0 }, 0, 0), 0);
});

test("BENCH_FIRST_WARMUP_SECONDS: 5 by default, a number in 0..120 else refused", (t) => {
  t.is(benchOptions({}).firstWarmupSeconds, 5);
  t.is(benchOptions({ BENCH_FIRST_WARMUP_SECONDS: "0" }).firstWarmupSeconds, 0);
  t.is(benchOptions({ BENCH_FIRST_WARMUP_SECONDS: "12.5" }).firstWarmupSeconds, 12.5);
  t.throws(() => benchOptions({ BENCH_FIRST_WARMUP_SECONDS: "-1" }), { message: /BENCH_FIRST_WARMUP_SECONDS must be a number in 0\.\.120/ });
  t.throws(() => benchOptions({ BENCH_FIRST_WARMUP_SECONDS: "soon" }), { message: /BENCH_FIRST_WARMUP_SECONDS/ });
});
