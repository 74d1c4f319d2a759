/**
 * The generated code in packages/contracts/gen is committed; this fails when regenerating from
 * proto/ (buf + protoc-gen-es, as `npm run generate` does) would change it, i.e. when someone
 * edited a .proto without regenerating, or edited generated code by hand.
 */
import test from "ava";
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { ROOT } from "../../../test/helpers/paths.ts";

const run = promisify(execFile);

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else out.push(p);
  }
  return out.sort();
}

test("packages/contracts/gen matches what buf generate produces from proto/", async (t) => {
  t.timeout(120_000);
  const out = mkdtempSync(join(tmpdir(), "cms-gen-"));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const bin = join(ROOT, "node_modules", ".bin");
  await run(join(bin, "buf"), ["generate", "--output", out], { cwd: ROOT, env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
  const committedDir = join(ROOT, "packages/contracts/gen");
  const freshDir = join(out, "packages/contracts/gen");
  const committed = files(committedDir).map((f) => relative(committedDir, f));
  const fresh = files(freshDir).map((f) => relative(freshDir, f));
  t.deepEqual(committed, fresh, "the same files");
  const changed = fresh.filter((f) => readFileSync(join(freshDir, f), "utf8") !== readFileSync(join(committedDir, f), "utf8"));
  t.deepEqual(changed, [], `regenerate with npm run generate: ${changed.join(", ")}`);
});
