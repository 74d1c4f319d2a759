/** startTogether: all pieces started, or none left running when one fails. */
import test from "ava";
import { startTogether } from "./browser.js";

function piece(kind: "stop" | "close", log: string[], name: string) {
  return kind === "stop" ? { stop: async () => { log.push(`${name} stopped`); } } : { close: async () => { log.push(`${name} closed`); } };
}

test("answers every piece when all start", async (t) => {
  const log: string[] = [];
  const [a, b] = await startTogether(Promise.resolve(piece("stop", log, "a")), Promise.resolve(piece("close", log, "b")));
  t.true("stop" in a);
  t.true("close" in b);
  t.deepEqual(log, [], "nothing stopped");
});

test("when one piece fails, the others are stopped or closed and its error is thrown", async (t) => {
  const log: string[] = [];
  const slow = new Promise<{ stop(): Promise<void> }>((r) => setTimeout(() => r(piece("stop", log, "system") as { stop(): Promise<void> }), 50));
  const err = await t.throwsAsync(startTogether(slow, Promise.reject(new Error("chromium is missing")), Promise.resolve(piece("close", log, "server"))));
  t.is(err?.message, "chromium is missing");
  t.deepEqual(log.sort(), ["server closed", "system stopped"], "the slower piece too, once it started");
});
