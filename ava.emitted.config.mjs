// `npm test`'s configuration: the tests emitted to dist-test/ by scripts/build-tests.mjs, run as
// plain JavaScript. package.json's "ava" runs the TypeScript sources through tsx instead
// (`npx ava <file>.test.ts` while working on a test); the two keep the same settings.
import { readFileSync } from "node:fs";

const sources = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8")).ava;

export default {
  ...sources,
  extensions: ["js"],
  nodeArguments: ["--enable-source-maps"],
  files: sources.files.map((glob) => `dist-test/${glob.replace(/\.ts$/, ".js")}`),
};
