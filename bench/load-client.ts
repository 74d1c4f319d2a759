/**
 * Child-process entry of the load driver (see lib.ts drive()): reads a LoadSpec as JSON on
 * stdin, runs it, prints one LoadResult JSON line on stdout.
 */
import { driveInProcess, type LoadSpec } from "./lib.js";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const spec = JSON.parse(input) as LoadSpec;
const host = new URL(spec.url).hostname;
if (host !== "127.0.0.1" && host !== "localhost") throw new Error(`benchmarks only send traffic to 127.0.0.1, not ${host}`);
const result = await driveInProcess(spec);
process.stdout.write(JSON.stringify(result) + "\n");
