/** The shared identifier shapes. */
import test from "ava";
import { isUuid } from "../src/ids.js";

test("isUuid accepts uuids only", (t) => {
  t.true(isUuid("0b0f8a3e-3f0e-4c39-9b1c-6f2a7a1c2d3e"));
  t.false(isUuid("not-a-uuid"));
  t.false(isUuid(""));
});
