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

/**
 * Renders `profile` to `out` (PNG). `name` is the title speedscope shows above the graph. Its
 * importer leaves the "(idle)" samples out: the graph's width is the busy time. Fails when the
 * page did not load the profile, rather than saving a blank page.
 */
export async function renderFlameGraph(profile: CpuProfile, out: string, opts: { name: string; width?: number; height?: number }): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "cms-flame-"));
  const browser = await launchBrowser();
  try {
    // The page takes a profile from a script beside it that calls its loader (as speedscope's
    // own command line does), named in the URL's fragment.
    const script = join(dir, "profile.js");
    const body = Buffer.from(JSON.stringify(profile)).toString("base64");
    writeFileSync(script, `speedscope.loadFileFromBase64(${JSON.stringify(opts.name)}, ${JSON.stringify(body)})`);
    const page = await browser.newPage({ viewport: { width: opts.width ?? 1600, height: opts.height ?? 1000 } });
    await page.goto(`${pathToFileURL(SPEEDSCOPE_PAGE).href}#localProfilePath=${encodeURIComponent(script)}&view=left-heavy`);
    // The page is titled after the profile once it has imported it; then two frames to draw.
    await page.waitForFunction((title) => document.title.startsWith(title), opts.name, { timeout: 30_000 });
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    await page.screenshot({ path: out });
  } finally {
    await browser.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
