/** TtlCache (expiry with an explicit clock, size bound) and the Authorization header parser. */
import test from "ava";
import { AppError, TtlCache, sha256Hex } from "@cms/platform";
import { bearerOf } from "../src/http/admission.ts";

test("TtlCache returns a value until its expiry", (t) => {
  const c = new TtlCache<string>(1000);
  c.set("k", "v", undefined, 10_000);
  t.is(c.get("k", 10_000), "v");
  t.is(c.get("k", 10_999), "v");
  t.is(c.get("k", 11_000), undefined, "expired at now + ttl");
  t.is(c.get("k", 10_500), undefined, "an expired entry is gone for good");
});

test("TtlCache honours a per-entry ttl and skips ttl <= 0", (t) => {
  const c = new TtlCache<number>(1000);
  c.set("short", 1, 10, 0);
  c.set("default", 2, undefined, 0);
  c.set("never", 3, 0, 0);
  c.set("negative", 4, -5, 0);
  t.is(c.get("short", 9), 1);
  t.is(c.get("short", 10), undefined);
  t.is(c.get("default", 999), 2);
  t.is(c.get("never", 0), undefined);
  t.is(c.get("negative", 0), undefined);
});

test("TtlCache keeps falsy values (null caches a negative answer)", (t) => {
  const c = new TtlCache<string | null | boolean>(1000);
  c.set("n", null, undefined, 0);
  c.set("f", false, undefined, 0);
  t.is(c.get("n", 1), null);
  t.is(c.get("f", 1), false);
  t.is(c.get("missing", 1), undefined);
});

test("TtlCache is bounded: the oldest entry goes first", (t) => {
  const c = new TtlCache<number>(60_000, 3);
  for (const [i, k] of ["a", "b", "c", "d"].entries()) c.set(k, i, undefined, 0);
  t.is(c.get("a", 1), undefined, "the oldest was evicted");
  t.is(c.get("b", 1), 1);
  t.is(c.get("c", 1), 2);
  t.is(c.get("d", 1), 3);
  c.set("e", 4, undefined, 0);
  t.is(c.get("b", 1), undefined);
  t.is(c.get("e", 1), 4);
});

test("TtlCache delete and clear", (t) => {
  const c = new TtlCache<number>(60_000);
  c.set("a", 1, undefined, 0);
  c.set("b", 2, undefined, 0);
  c.delete("a");
  t.is(c.get("a", 1), undefined);
  t.is(c.get("b", 1), 2);
  c.clear();
  t.is(c.get("b", 1), undefined);
});

test("bearerOf extracts the token", (t) => {
  t.is(bearerOf(undefined), undefined);
  t.is(bearerOf(""), undefined);
  t.is(bearerOf("Bearer abc.def-123"), "abc.def-123");
  t.is(bearerOf("bearer tok"), "tok");
  t.is(bearerOf("BEARER   tok  "), "tok");
});

test("bearerOf refuses other schemes and malformed headers with unauthorized", (t) => {
  for (const h of ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Bearer a b", "Token abc", "abc", "Bearerabc"]) {
    const err = t.throws(() => bearerOf(h), { instanceOf: AppError }, h);
    t.is((err as AppError).code, "unauthorized", h);
    t.is((err as AppError).status, 401, h);
  }
});

test("sha256Hex", (t) => {
  t.is(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
});
