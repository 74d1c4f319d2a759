/**
 * Split mode (real PostgreSQL and NATS): a player tab connected to one gateway follows a
 * ui.state.set and a player.command made through another gateway replica.
 */
import test from "ava";
import type { Browser } from "playwright-core";
import { mustCall, splitEnabled, startSplitSystem, type SplitSystem } from "../helpers/split.js";
import { launchBrowser, startTogether, screenshot } from "../helpers/browser.js";

if (!splitEnabled) {
  test.skip("player across gateways (skipped: needs DATABASE_URL and NATS_URL; run with npm run test:backends)", () => {});
} else {
  let sys: SplitSystem;
  let browser: Browser;
  test.before(async () => {
    [sys, browser] = await startTogether(startSplitSystem({ gateways: 2 }), launchBrowser());
  });
  test.after.always(async () => {
    await browser?.close();
    await sys?.stop();
  });

  test("a tab on gateway B follows ui.state.set and player.command made through gateway A within 2 s", async (t) => {
    const [gatewayA, gatewayB] = sys.gateways as [string, string];
    const owner = await sys.user("player_split");
    const must = mustCall(sys, gatewayA, owner.token);
    const { collection } = await must({ op: "collections.create", name: "Across replicas" });
    const notes: number[] = [];
    for (const text of ["first", "second", "third"]) notes.push((await must({ op: "media.text_note.add", collection_id: collection.id, text })).media.id);
    const { collection: published } = await must({ op: "collections.publish", collection_id: collection.id, slug: "across", share_access_level: "public" });

    const context = await browser.newContext({ extraHTTPHeaders: { authorization: `Bearer ${owner.token}` } });
    const tab = await context.newPage();
    const pageUrl = new URL(published.share_url);
    await tab.goto(`${gatewayB}${pageUrl.pathname}`);
    await tab.waitForFunction(() => document.body.dataset.live === "connected", undefined, { timeout: 15_000 });

    await must({ op: "ui.state.set", collection_id: collection.id, media_id: notes[2] });
    await tab.waitForFunction((id) => document.body.dataset.current === id, String(notes[2]), { timeout: 2_000 });
    t.is((await must({ op: "player.command", command: "previous" })).delivered_to, 1);
    await tab.waitForFunction((id) => document.body.dataset.current === id, String(notes[1]), { timeout: 2_000 });
    await screenshot(tab, "player-split");
    await context.close();
  });
}
