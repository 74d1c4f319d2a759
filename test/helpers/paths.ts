/**
 * Paths the tests use, the same whether a test runs from its TypeScript source (through tsx) or
 * from the JavaScript `npm test` emits to dist-test/ (scripts/build-tests.mjs).
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The project's folder: the nearest one above this module holding package-lock.json (dist-test/ holds none). */
export const ROOT = ((): string => {
  const here = fileURLToPath(import.meta.url);
  for (let dir = dirname(here); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package-lock.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package-lock.json in a folder above ${here}`);
  }
})();

/**
 * A file beside a test module (its import.meta.url), named as in the sources ("./fixtures/x.ts"):
 * the emitted .js in its place when the test runs emitted.
 */
export function besideModule(moduleUrl: string, relative: string): string {
  const emitted = moduleUrl.endsWith(".js") && relative.endsWith(".ts");
  return fileURLToPath(new URL(emitted ? relative.replace(/\.ts$/, ".js") : relative, moduleUrl));
}

/**
 * Node's arguments that run a module (a fixture from besideModule, an entry point): a TypeScript
 * source through tsx's hooks, emitted JavaScript as it is (loading it through tsx costs the
 * child process twice the CPU).
 */
export function nodeArgsOf(module: string): string[] {
  return module.endsWith(".ts") ? ["--import", "tsx", module] : [module];
}
