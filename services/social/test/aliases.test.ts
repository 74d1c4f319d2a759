/** Alias rules: handle shape, reserved names as errors, plan caps, follow rules and paging. */
import test from "ava";
import { AppError } from "@cms/platform/errors";
import {
  ALIAS_CAPS, aliasCap, assertBelowAliasCap, assertNotOwnHandle, assertNotReserved, followingPage, handleTaken, validateHandle,
} from "../src/domain/aliases.js";

function thrown(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error("expected an AppError");
}

test("valid handles pass unchanged", (t) => {
  for (const h of ["a", "alice", "a_b-c", "x".repeat(63), "0", "my-alias_2"]) t.is(validateHandle(h), h);
});

test("invalid handles give invalid_request on field handle", (t) => {
  for (const h of ["", "Bad@Handle", "Alice", "@alice", "x".repeat(64), "with space", "dot.ted", "ümlaut"]) {
    const e = thrown(() => validateHandle(h));
    t.is(e.code, "invalid_request", h);
    t.is(e.status, 400);
    t.is(e.extra.field, "handle");
    t.truthy(e.detail);
  }
});

test("a reserved handle gives name_reserved with its class", (t) => {
  const e = thrown(() => assertNotReserved("adm1n"));
  t.is(e.code, "name_reserved");
  t.is(e.status, 400);
  t.is(e.extra.class, "operational");
  t.is(thrown(() => assertNotReserved("login")).extra.class, "route");
  t.is(thrown(() => assertNotReserved("cms")).extra.class, "brand");
  t.notThrows(() => assertNotReserved("alice"));
});

test("plan caps: free 1, paid 5, founding at least paid", (t) => {
  t.is(ALIAS_CAPS.free, 1);
  t.is(ALIAS_CAPS.paid, 5);
  t.true(ALIAS_CAPS.founding >= ALIAS_CAPS.paid);
  t.is(aliasCap("unknown"), 1);
});

test("the cap refuses the alias beyond it with current and max", (t) => {
  t.notThrows(() => assertBelowAliasCap("free", 0));
  const e = thrown(() => assertBelowAliasCap("free", 1));
  t.is(e.code, "alias_limit_reached");
  t.is(e.status, 409);
  t.deepEqual(e.extra, { current: 1, max: 1 });
  t.notThrows(() => assertBelowAliasCap("paid", 4));
  t.deepEqual(thrown(() => assertBelowAliasCap("paid", 5)).extra, { current: 5, max: 5 });
  t.notThrows(() => assertBelowAliasCap("founding", 4));
  t.deepEqual(thrown(() => assertBelowAliasCap("founding", 5)).extra, { current: 5, max: 5 });
});

test("a taken handle is a 400 invalid_request on field handle", (t) => {
  const e = handleTaken("alice");
  t.is(e.code, "invalid_request");
  t.is(e.status, 400);
  t.is(e.extra.field, "handle");
  t.regex(e.detail, /taken/);
});

test("following one's own handle is refused", (t) => {
  const e = thrown(() => assertNotOwnHandle("u1", "u1"));
  t.is(e.code, "invalid_request");
  t.is(e.extra.field, "alias_id");
  t.notThrows(() => assertNotOwnHandle("u1", "u2"));
});

test("following paging: defaults, bounds and whether the request named it", (t) => {
  t.deepEqual(followingPage({}), { limit: 100, offset: 0, explicit: false });
  t.deepEqual(followingPage({ limit: 5 }), { limit: 5, offset: 0, explicit: true });
  t.deepEqual(followingPage({ offset: 0 }), { limit: 100, offset: 0, explicit: true });
  t.is(thrown(() => followingPage({ limit: 0 })).extra.field, "limit");
  t.is(thrown(() => followingPage({ limit: 501 })).extra.field, "limit");
  t.is(thrown(() => followingPage({ offset: -1 })).extra.field, "offset");
});
