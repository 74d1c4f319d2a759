/** bench/flame-graph.ts: a CPU profile drawn as a flame graph in a PNG. */
import test from "ava";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { renderFlameGraphs } from "../../bench/flame-graph.js";
import { IDLE, QUERY, SERVE, sampleProfile } from "./sample-profile.js";


/** Samples every 100 µs in turn: query, query, idle, serve, idle. */
const drawnProfile = () => sampleProfile([QUERY, QUERY, IDLE, SERVE, IDLE]);

test("renderFlameGraphs draws the busy samples' call tree as a PNG of the size asked", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cms-flame-test-"));
  try {
    const drawn = join(dir, "drawn.png");
    const empty = join(dir, "empty.png");
    // A profile that is all idle has nothing to draw (speedscope leaves the idle samples out):
    // the same page without a graph.
    await renderFlameGraphs([
      { profile: drawnProfile(), out: drawn, name: "sample profile" },
      { profile: sampleProfile([IDLE, IDLE, IDLE]), out: empty, name: "idle profile" },
    ], { width: 800, height: 500 });
    const meta = await sharp(drawn).metadata();
    t.is(meta.format, "png");
    t.deepEqual([meta.width, meta.height], [800, 500]);
    t.true(readFileSync(drawn).length > 5_000);
    // The graph's rows (below the toolbar and the minimap): coloured frames where the profile has
    // some, the page's plain background where it has none.
    // (stats() reads its input, not the pipeline's output: the strip is cut out first.)
    const rows = async (file: string) => {
      const strip = await sharp(file).extract({ left: 0, top: 140, width: 800, height: 200 }).png().toBuffer();
      return (await sharp(strip).stats()).channels.map((c) => c.stdev);
    };
    const [drawnSpread, emptySpread] = [await rows(drawn), await rows(empty)];
    t.true(Math.max(...drawnSpread) > 20, `the drawn profile's rows vary: ${drawnSpread.join(", ")}`);
    t.true(Math.max(...emptySpread) < Math.max(...drawnSpread) / 4, `the empty profile's rows are blank: ${emptySpread.join(", ")}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
