/** The MCP SDK is loaded by the first MCP request, not by importing the gateway (mcp/sdk.ts). */
import test from "ava";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { besideModule } from "../../../test/helpers/paths.ts";

const RECORD = fileURLToPath(new URL("./fixtures/record-loads.mjs", import.meta.url));
const SDK = pathToFileURL(besideModule(import.meta.url, "../src/mcp/sdk.ts")).href;

test("importing the gateway loads no module of the MCP SDK or zod; loadMcpSdk loads them", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "mcp-sdk-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, "loads.txt");
  const script = `
    import { appendFileSync } from "node:fs";
    await import("@cms/gateway");
    appendFileSync(process.env.LOADS_FILE, "-- imported\\n");
    const sdk = await (await import(${JSON.stringify(SDK)})).loadMcpSdk();
    if (typeof sdk.Server !== "function" || typeof sdk.isInitializeRequest !== "function") throw new Error("the SDK's parts are missing");
  `;
  await new Promise<void>((resolve, reject) => execFile(process.execPath, ["--import", "tsx", "--import", RECORD, "--input-type=module", "-e", script],
    { env: { ...process.env, LOADS_FILE: file }, timeout: 60_000 }, (err, _stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve())));
  const [before, after] = readFileSync(file, "utf8").split("-- imported\n") as [string, string];
  const sdkModules = (urls: string) => urls.split("\n").filter((u) => /node_modules\/(@modelcontextprotocol\/sdk|zod)\//.test(u));
  t.true(before.includes("/services/gateway/src/"), "the gateway's own modules were recorded");
  t.deepEqual(sdkModules(before), [], "loaded by importing the gateway");
  t.true(sdkModules(after).length > 10, "loadMcpSdk loaded the SDK");
});
