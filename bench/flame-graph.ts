/**
 * A flame graph of a V8 CPU profile, as a PNG: speedscope's own page (the release build the
 * speedscope package ships, opened from disk, no server) in headless Chromium, in its "left
 * heavy" view (every sample's stack merged into one call tree, the heaviest callers first: a
 * flame graph drawn top-down, roots at the top), then a screenshot of it.
 * `bench/profile.ts <case> --flame` writes one beside its .cpuprofile; bench/notes links the
 * ones it shows.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { launchBrowser } from "../test/helpers/browser.js";
import type { CpuProfile } from "./cpu-profile.js";

const SPEEDSCOPE_PAGE = join(dirname(createRequire(import.meta.url).resolve("speedscope/package.json")), "dist", "release", "index.html");

/** One graph to draw: the profile, the PNG to write, and the title speedscope shows above it. */
export interface FlameGraph { profile: CpuProfile; out: string; name: string }

/**
 * Renders each profile to its PNG, in one browser. speedscope's importer leaves the "(idle)"
 * samples out: a graph's width is the busy time. Fails when the page did not load a profile,
 * rather than saving a blank page.
 */
export async function renderFlameGraphs(graphs: FlameGraph[], viewport = { width: 1600, height: 1000 }): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "cms-flame-"));
  const browser = await launchBrowser();
  try {
    for (const [i, { profile, out, name }] of graphs.entries()) {
      // The page takes a profile from a script beside it that calls its loader (as speedscope's
      // own command line does), named in the URL's fragment.
      const script = join(dir, `profile-${i}.js`);
      const body = Buffer.from(JSON.stringify(profile)).toString("base64");
      writeFileSync(script, `speedscope.loadFileFromBase64(${JSON.stringify(name)}, ${JSON.stringify(body)})`);
      const page = await browser.newPage({ viewport });
      await page.goto(`${pathToFileURL(SPEEDSCOPE_PAGE).href}#localProfilePath=${encodeURIComponent(script)}&view=left-heavy`);
      // The page is titled after the profile once it has imported it; then two frames to draw.
      await page.waitForFunction((title) => document.title.startsWith(title), name, { timeout: 30_000 });
      await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
      await page.screenshot({ path: out });
      await page.close();
    }
  } finally {
    await browser.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
