/**
 * Benchmark runner (`npm run bench [-- <scenario>...]`): runs the named scenarios, default all.
 * A new benchmark is a module in bench/ exporting a Scenario, added to SCENARIOS below.
 *
 * Env: BENCH_SECONDS (measuring window per run, default 5), BENCH_CONNECTIONS (concurrent
 * keep-alive clients, default 32), BENCH_WARMUP_SECONDS (default 1).
 */
import "@cms/server/threadpool";
import { cpus } from "node:os";
import { benchOptions, type Scenario, type ScenarioReport } from "./lib.js";
import { gatewayScenario } from "./gateway.js";
import { collectionsScenario } from "./collections.js";
import { mediaScenario } from "./media.js";
import { transfersScenario } from "./transfers.js";
import { webhooksScenario } from "./webhooks.js";
import { splitScenario } from "./split.js";
import { searchScenario } from "./search.js";
import { soakScenario } from "./soak.js";
import { overheadScenario } from "./overhead.js";

const SCENARIOS: Scenario[] = [gatewayScenario, collectionsScenario, mediaScenario, transfersScenario, webhooksScenario, splitScenario, searchScenario, overheadScenario, soakScenario];
/** Scenarios that run only when named: the soak takes ten minutes. */
const ON_REQUEST = new Set(["soak"]);

const names = process.argv.slice(2).filter((a) => !a.startsWith("-"));
if (process.argv.includes("--list")) {
  for (const s of SCENARIOS) console.log(`${s.name.padEnd(12)} ${s.description}`);
  process.exit(0);
}
const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
if (unknown.length) {
  console.error(`unknown scenario(s): ${unknown.join(", ")}; known: ${SCENARIOS.map((s) => s.name).join(", ")}`);
  process.exit(2);
}
const selected = names.length ? SCENARIOS.filter((s) => names.includes(s.name)) : SCENARIOS.filter((s) => !ON_REQUEST.has(s.name));
const opts = benchOptions();
const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model ?? "unknown" };
console.log(`bench: ${selected.map((s) => s.name).join(", ")}; ${opts.connections} connections, ${opts.warmupSeconds} s warm-up (${opts.firstWarmupSeconds} s in overhead's first round), ${opts.seconds} s per run; node ${machine.node}, ${machine.cpus} cores (${machine.cpu})`);

const reports: ScenarioReport[] = [];
let failed = false;
for (const s of selected) {
  console.log(`\n== ${s.name}: ${s.description}`);
  try {
    const report = await s.run(opts);
    reports.push(report);
    for (const line of report.lines) console.log(line);
  } catch (err) {
    failed = true;
    console.error(`scenario ${s.name} failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`);
  }
}
console.log(JSON.stringify({ bench: "summary", date: new Date().toISOString(), machine, options: opts, scenarios: reports.map(({ lines: _lines, ...r }) => r) }));
process.exit(failed ? 1 : 0);
