/**
 * The token resolver: one introspection per token at a time, answers cached for the TTL, and a
 * revocation (forget) arriving while an introspection is under way keeps its answer out of the cache.
 */
import test from "ava";
import { create } from "@bufbuild/protobuf";
import { IntrospectTokenResponseSchema, type IntrospectTokenResponse } from "@cms/contracts/auth/v1/auth_pb";
import { createTokenResolver, sha256Hex } from "../src/tokens.ts";

const active = (): IntrospectTokenResponse => create(IntrospectTokenResponseSchema, {
  active: true, user: { userId: "u1", username: "ann", plan: "paid", isAdmin: false }, scopes: ["media:read"], tokenId: "t1",
});

/** An introspection that answers when told to, counting its calls. */
function gate() {
  const waiting: Array<(r: IntrospectTokenResponse) => void> = [];
  let calls = 0;
  return {
    introspect: () => { calls++; return new Promise<IntrospectTokenResponse>((r) => waiting.push(r)); },
    answer: (r = active()) => { for (const w of waiting.splice(0)) w(r); },
    /** Answers the i-th introspection still waiting. */
    answerOne: (i: number, r: IntrospectTokenResponse) => waiting.splice(i, 1)[0]!(r),
    get calls() { return calls; },
  };
}

test("concurrent requests with one token share one introspection, then the cached answer", async (t) => {
  const g = gate();
  const resolver = createTokenResolver(g.introspect, 60_000);
  const all = Promise.all(Array.from({ length: 20 }, () => resolver.resolve("tok")));
  await new Promise((r) => setImmediate(r));
  t.is(g.calls, 1);
  g.answer();
  const users = await all;
  t.true(users.every((p) => p?.user?.userId === "u1"));
  t.is((await resolver.resolve("tok"))?.user?.username, "ann");
  t.is(g.calls, 1);
});

test("a token forgotten while its introspection runs is introspected again next time", async (t) => {
  const g = gate();
  const resolver = createTokenResolver(g.introspect, 60_000);
  const first = resolver.resolve("tok");
  await new Promise((r) => setImmediate(r));
  resolver.forget(sha256Hex("tok"));
  // A request after the revocation does not join the lookup that started before it.
  const second = resolver.resolve("tok");
  await new Promise((r) => setImmediate(r));
  t.is(g.calls, 2);
  // The lookup after the revocation answers first; the one from before arrives late.
  g.answerOne(1, create(IntrospectTokenResponseSchema, { active: false }));
  t.is(await second, undefined);
  g.answerOne(0, active());
  t.is((await first)?.user?.userId, "u1", "the request from before the revocation gets what it asked");
  t.is(await resolver.resolve("tok"), undefined, "the stale answer is not cached over the revoked one");
  t.is(g.calls, 2);
});

test("a failed introspection is not cached and does not block the next one", async (t) => {
  let calls = 0;
  const resolver = createTokenResolver(async () => { calls++; if (calls === 1) throw new Error("down"); return active(); }, 60_000);
  await t.throwsAsync(resolver.resolve("tok"));
  t.is((await resolver.resolve("tok"))?.user?.userId, "u1");
  t.is(calls, 2);
});
