/** Profile rules: tag shortcuts, default alias id, text fields. */
import test from "ava";
import { AppError } from "@cms/platform/errors";
import { normaliseProfileTags, normaliseProfileText, parseDefaultAliasId } from "../src/domain/profile.js";

function thrown(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error("expected an AppError");
}

test("tags are deduplicated in order and trimmed", (t) => {
  t.deepEqual(normaliseProfileTags(["b", "a", "b", " a "]), ["b", "a"]);
  t.deepEqual(normaliseProfileTags([]), []);
});

test("tags must be lowercase strings of 1 to 50 characters", (t) => {
  for (const bad of [["Upper"], [1], [""], ["x".repeat(51)], "a,b", null, { a: 1 }]) {
    const e = thrown(() => normaliseProfileTags(bad));
    t.is(e.code, "invalid_request");
    t.is(e.extra.field, "available_tags");
  }
});

test("at most 20 distinct tags; duplicates do not count", (t) => {
  const twenty = Array.from({ length: 20 }, (_, i) => `t${i}`);
  t.is(normaliseProfileTags([...twenty, "t0", "t1"]).length, 20);
  t.is(thrown(() => normaliseProfileTags([...twenty, "t20"])).extra.field, "available_tags");
});

test("default_alias_id: a uuid sets it, null clears it, anything else is invalid", (t) => {
  t.is(parseDefaultAliasId(null), null);
  t.is(parseDefaultAliasId("0B0F8A3E-3F0E-4C39-9B1C-6F2A7A1C2D3E"), "0b0f8a3e-3f0e-4c39-9b1c-6f2a7a1c2d3e");
  for (const bad of ["nope", 3, true, ""]) t.is(thrown(() => parseDefaultAliasId(bad)).extra.field, "default_alias_id");
});

test("blank text clears a field", (t) => {
  t.is(normaliseProfileText("  "), null);
  t.is(normaliseProfileText(" Alice "), "Alice");
});
