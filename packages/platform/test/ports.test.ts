/** Free ports: distinct, and free once returned. */
import test from "ava";
import { createServer } from "node:net";
import { freePorts } from "../src/ports.js";

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
