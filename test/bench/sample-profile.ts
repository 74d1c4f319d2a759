/** A small V8 CPU profile for the bench tools' tests: (root) -> serve -> query, and (root) -> (idle). */
import type { CpuProfile } from "../../bench/cpu-profile.js";

/** Node ids of the tree: 2 serve, 3 query (in node_modules/pg), 4 (idle). */
export const SERVE = 2, QUERY = 3, IDLE = 4;

const frame = (id: number, functionName: string, children: number[] = []) => ({
  id, children,
  callFrame: { functionName, scriptId: "0", url: id === QUERY ? "file:///srv/node_modules/pg/lib/query.js" : "", lineNumber: 9, columnNumber: 0 },
});

/** The tree with these samples (node ids), each `timeDeltas` after the one before, from 0 to `endTime`. */
export function sampleProfile(samples: number[], timeDeltas: number[] = samples.map(() => 100), endTime = timeDeltas.reduce((a, b) => a + b, 0)): CpuProfile {
  return {
    nodes: [frame(1, "(root)", [SERVE, IDLE]), frame(SERVE, "serve", [QUERY]), frame(QUERY, "query"), frame(IDLE, "(idle)")],
    startTime: 0, endTime, samples, timeDeltas,
  };
}
