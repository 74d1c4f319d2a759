/**
 * `npm run fuzz [-- --cases N] [--seed S] [--path P] [--concurrency C]`: a longer campaign of
 * generated requests over every operation (the cases and checks of test/helpers/fuzz.ts, which
 * the suite's test/e2e/fuzz.test.ts runs 2,000 of), against an all-in-one system on embedded
 * defaults in a temporary DATA_DIR. It runs every case even after failures and prints a summary:
 * cases, statuses, error codes, what was broken on purpose, and each failure with the seed and
 * the path that replays it (`--seed S --path P` runs that one case after the seeding). Exit 1
 * when anything failed.
 */
import { parseArgs } from "node:util";
import fc from "fast-check";
import { startTestSystem } from "../test/helpers/system.js";
import { fuzzCases, runCase, seedWorld, sorted, victimIntact, type FuzzCase, type FuzzFailure } from "../test/helpers/fuzz.js";

const { values } = parseArgs({
  options: {
    cases: { type: "string", default: "50000" },
    seed: { type: "string", default: String(Date.now() % 2 ** 31) },
    path: { type: "string" },
    concurrency: { type: "string", default: "1" },
    verbose: { type: "boolean", default: false },
  },
});
const cases = Number(values.cases);
const seed = Number(values.seed);
const concurrency = Number(values.concurrency);
if (!Number.isInteger(cases) || cases < 1) throw new Error(`--cases must be a positive integer, got ${values.cases}`);
if (!Number.isInteger(seed)) throw new Error(`--seed must be an integer, got ${values.seed}`);
if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) throw new Error(`--concurrency must be 1..64, got ${values.concurrency}`);

const sys = await startTestSystem();
const started = performance.now();
const statuses: Record<string, number> = {};
const codes: Record<string, number> = {};
const mutations: Record<string, number> = {};
const byOp: Record<string, Record<string, number>> = {};
const failures: Array<FuzzFailure & { path: number; mutation: string }> = [];
let ran = 0;
try {
  const world = await seedWorld(sys);
  console.error(`fuzz: ${cases} cases, seed ${seed}${values.path ? `, path ${values.path}` : ""}, concurrency ${concurrency}, system at ${sys.url}`);
  // fast-check draws the cases in order (the path of the n-th is n); they run `concurrency` at a time.
  const inFlight = new Set<Promise<void>>();
  let index = 0;
  const one = async (c: FuzzCase, path: number) => {
    const outcome = await runCase(world, c);
    ran++;
    statuses[outcome.status] = (statuses[outcome.status] ?? 0) + 1;
    if (outcome.code) codes[outcome.code] = (codes[outcome.code] ?? 0) + 1;
    const m = c.mutation.split(" ")[0]!;
    mutations[m] = (mutations[m] ?? 0) + 1;
    const o = (byOp[c.op] ??= {});
    o[outcome.status] = (o[outcome.status] ?? 0) + 1;
    if (outcome.failure) {
      failures.push({ ...outcome.failure, path, mutation: c.mutation });
      console.error(`FAIL seed ${seed} path ${path}: ${c.op} ${outcome.failure.why}\n  request: ${outcome.failure.request}\n  answer: ${outcome.failure.answer}`);
    }
    if (values.verbose) console.error(`${path} ${c.op} ${outcome.status} ${outcome.code ?? ""} ${c.mutation} ${outcome.detail ?? ""}`);
    if (ran % 5000 === 0) console.error(`... ${ran} cases, ${failures.length} failures, ${(ran / ((performance.now() - started) / 1000)).toFixed(0)} cases/s`);
  };
  await fc.assert(
    fc.asyncProperty(fuzzCases(), async (c) => {
      const path = values.path ? Number(values.path.split(":")[0]) : index;
      index++;
      const p = one(c, path).finally(() => inFlight.delete(p));
      inFlight.add(p);
      if (inFlight.size >= concurrency) await Promise.race(inFlight);
    }),
    { seed, numRuns: values.path ? 1 : cases, path: values.path, endOnFailure: true },
  );
  await Promise.all(inFlight);
  // A fresh token: the last cases may have revoked the user's (mcp.revoke_session).
  const ping = await sys.call(await sys.token(world.user.username), { op: "ping" });
  if (ping.status !== 200) failures.push({ op: "ping", status: ping.status, why: "the server no longer answers ping", request: "", answer: JSON.stringify(ping.body), path: -1, mutation: "" });
  const intact = await victimIntact(world);
  if (intact) failures.push({ op: "-", status: 0, why: intact, request: "", answer: "", path: -1, mutation: "" });
} finally {
  await sys.stop();
}
const seconds = (performance.now() - started) / 1000;
const unhealthy = Object.entries(byOp).filter(([, h]) => !h["200"]).map(([op]) => op).sort();
console.log(JSON.stringify({
  fuzz: "summary",
  seed,
  cases: ran,
  seconds: Number(seconds.toFixed(1)),
  cases_per_second: Number((ran / seconds).toFixed(1)),
  statuses: sorted(statuses),
  errors_by_code: sorted(codes),
  mutations: sorted(mutations),
  ops_never_200: unhealthy,
  failures: failures.map((f) => ({ seed, path: f.path, op: f.op, status: f.status, why: f.why, mutation: f.mutation, request: f.request, answer: f.answer })),
}, null, 2));
process.exit(failures.length ? 1 : 0);
