/** Free ports: distinct, and free once returned. */
import test from "ava";
import { createServer } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ephemeralPorts, freePorts } from "../src/ports.js";

test("a system's ports are distinct and free once returned", async (t) => {
  for (let round = 0; round < 20; round++) {
    const ports = await freePorts(7);
    t.is(new Set(ports).size, 7, `round ${round}: ${ports.join(", ")}`);
    for (const port of ports) {
      const srv = createServer();
      await new Promise<void>((resolve, reject) => { srv.once("error", reject); srv.listen(port, "127.0.0.1", () => resolve()); });
      await new Promise<void>((r) => srv.close(() => r()));
    }
  }
});

test("ports come from below the ephemeral range, where outgoing connections do not take them", async (t) => {
  const range = ephemeralPorts();
  if (!range) return t.pass("the OS does not say where its ephemeral ports are");
  for (const port of await freePorts(20)) t.true(port >= 10_000 && port < range[0], `${port} against ${range.join("-")}`);
});

test("the ephemeral range as Linux writes it; anything else is unknown", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "cms-ports-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = (text: string) => { const f = join(dir, String(Math.random())); writeFileSync(f, text); return f; };
  t.deepEqual(ephemeralPorts(file("32768\t60999\n")), [32768, 60999]);
  t.is(ephemeralPorts(file("60999 32768\n")), undefined);
  t.is(ephemeralPorts(file("")), undefined);
  t.is(ephemeralPorts(join(dir, "missing")), undefined);
});
