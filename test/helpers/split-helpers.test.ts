/** The split helper: how an entry point is run. */
import test from "ava";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { entryArgs } from "./split.js";

test.serial("an entry point runs through tsx, or from dist/ with TEST_RUN_DIST=1 (refused when it was not built)", (t) => {
  const before = process.env.TEST_RUN_DIST;
  const dist = mkdtempSync(join(tmpdir(), "cms-dist-entry-"));
  try {
    mkdirSync(join(dist, "packages/server/src"), { recursive: true });
    writeFileSync(join(dist, "packages/server/src/main.js"), "");
    delete process.env.TEST_RUN_DIST;
    t.deepEqual(entryArgs("packages/server/src/main.ts", dist), ["--import", "tsx", "packages/server/src/main.ts"]);
    process.env.TEST_RUN_DIST = "1";
    t.deepEqual(entryArgs("packages/server/src/main.ts", dist), ["--enable-source-maps", join(dist, "packages/server/src/main.js")]);
    const err = t.throws(() => entryArgs("packages/server/src/admin-cli.ts", dist));
    t.regex(err!.message, /admin-cli\.js is missing: run `npm run build` first/);
  } finally {
    rmSync(dist, { recursive: true, force: true });
    if (before === undefined) delete process.env.TEST_RUN_DIST;
    else process.env.TEST_RUN_DIST = before;
  }
});
