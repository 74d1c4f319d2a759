/**
 * Property-based test over every operation (fast-check, cases derived from the op registry's
 * request schemas, see test/helpers/fuzz.ts): 2,000 generated requests on the embedded defaults,
 * with a fixed seed (FUZZ_SEED overrides it; FUZZ_CASES the count). Each answer: no 5xx, every
 * error has `error` and `detail`, no answer contains the second user's marker strings; afterwards
 * the server still answers and the second user's data is untouched. A failure names the seed and
 * the path that replays it (`npm run fuzz -- --seed <seed> --path <path>`).
 */
import test from "ava";
import fc from "fast-check";
import { startTestSystem, type TestSystem } from "../helpers/system.js";
import { fuzzCases, runCase, seedWorld, victimIntact, type FuzzWorld } from "../helpers/fuzz.js";

const SEED = Number(process.env.FUZZ_SEED ?? 20261124);
const CASES = Number(process.env.FUZZ_CASES ?? 2000);

let sys: TestSystem;
let world: FuzzWorld;
test.before(async () => {
  sys = await startTestSystem();
  world = await seedWorld(sys);
});
test.after.always(async () => { await sys?.stop(); });

test(`${CASES} generated requests over every operation: no 5xx, errors with error and detail, no other user's data (seed ${SEED})`, async (t) => {
  t.timeout(180_000);
  let ran = 0;
  const statuses: Record<number, number> = {};
  const answered = new Set<string>();
  try {
    await fc.assert(
      fc.asyncProperty(fuzzCases(), async (c) => {
        const outcome = await runCase(world, c);
        ran++;
        statuses[outcome.status] = (statuses[outcome.status] ?? 0) + 1;
        if (outcome.status === 200) answered.add(c.op);
        if (outcome.failure) throw new Error(`${outcome.failure.why}\nrequest: ${outcome.failure.request}\nanswer: ${outcome.failure.answer}`);
      }),
      { seed: SEED, numRuns: CASES, endOnFailure: true },
    );
  } catch (err) {
    t.fail(`fuzz failure (seed ${SEED}; replay: npm run fuzz -- --seed ${SEED} --cases ${ran}): ${(err as Error).message}`);
    return;
  }
  t.log(`statuses: ${JSON.stringify(statuses)}`);
  t.is(ran, CASES);
  // Many cases must get past validation and permissions, over most operations, or the test
  // would only exercise the schema check.
  t.true((statuses[200] ?? 0) > CASES * 0.15, `too few 200 answers: ${JSON.stringify(statuses)}`);
  t.true(answered.size >= 50, `only ${answered.size} operations answered 200 at least once`);
  const ping = await sys.call(await sys.token(world.user.username), { op: "ping" });
  t.is(ping.status, 200);
  t.is(await victimIntact(world), undefined);
});
