/**
 * V8 CPU profiles (node:inspector's Profiler.stop, or a `--cpu-prof` file): their shape, the
 * busy time they sampled, and the text summary bench/profile.ts and bench/profile-split.ts print.
 */

export interface ProfileNode { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number; children?: number[] }
export interface CpuProfile { nodes: ProfileNode[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] }

const IDLE = "(idle)";

/** Microseconds of the samples that are not idle (each weighs the time until the next sample). */
export function busyMicros(p: CpuProfile): number {
  const idle = new Set(p.nodes.filter((n) => n.callFrame.functionName === IDLE).map((n) => n.id));
  let busy = 0;
  let at = p.startTime;
  const times = p.timeDeltas.map((d) => (at += d));
  p.samples.forEach((id, i) => {
    if (!idle.has(id)) busy += (i + 1 < times.length ? times[i + 1]! : p.endTime) - times[i]!;
  });
  return busy;
}

/** The top frames by self and by total time (share of all samples, idle included), as lines. */
export function summarize(p: CpuProfile, selfTop = 30, totalTop = 60): string[] {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const ch of n.children ?? []) parent.set(ch, n.id);
  const label = (n: ProfileNode) => {
    const f = n.callFrame;
    const file = f.url.replace(/^file:\/\//, "").replace(/.*\/node_modules\//, "~/").replace(/.*\/wt-[^/]+\//, "");
    return `${f.functionName || "(anonymous)"} ${file}:${f.lineNumber + 1}`;
  };
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  for (const id of p.samples) {
    const n = byId.get(id)!;
    self.set(label(n), (self.get(label(n)) ?? 0) + 1);
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const l = label(byId.get(cur)!);
      if (!seen.has(l)) { seen.add(l); total.set(l, (total.get(l) ?? 0) + 1); }
    }
  }
  const all = p.samples.length;
  const top = (m: Map<string, number>, k: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, k).map(([l, v]) => `  ${((v / all) * 100).toFixed(1).padStart(5)}%  ${l}`);
  return [`samples ${all}`, "-- self time:", ...top(self, selfTop), ...(totalTop ? ["-- total time:", ...top(total, totalTop)] : [])];
}
