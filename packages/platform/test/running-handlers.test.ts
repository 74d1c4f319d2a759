/** The count of running unary handlers a stop waits for (rpc.ts, runningHandlers). */
import test from "ava";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { runningHandlers } from "../src/rpc.ts";

/** A service whose listCollections runs until `finish()`, after its caller was answered or not. */
function held() {
  const running = runningHandlers();
  const finishes: Array<() => void> = [];
  const transport = createRouterTransport((r) => r.service(CollectionsService, {
    async listCollections() {
      await new Promise<void>((resolve) => finishes.push(resolve));
      return {};
    },
  }), { router: { interceptors: [running.interceptor] } });
  return { running, client: createClient(CollectionsService, transport), finish: () => finishes.shift()!() };
}

test("a handler counts from its call's start to its own end", async (t) => {
  const { running, client, finish } = held();
  t.is(running.count(), 0);
  t.true(await running.settled(0), "none runs: settled at once");
  const answers = [client.listCollections({}), client.listCollections({})];
  await new Promise((r) => setImmediate(r));
  t.is(running.count(), 2);
  const settled = running.settled(10_000);
  finish();
  await answers[0];
  t.is(running.count(), 1);
  finish();
  t.true(await settled, "settled once the last one ended");
  await answers[1];
  t.is(running.count(), 0);
});

test("settled() answers false once its time ran out with a handler still running", async (t) => {
  const { running, client, finish } = held();
  const answer = client.listCollections({});
  await new Promise((r) => setImmediate(r));
  t.false(await running.settled(20));
  t.is(running.count(), 1);
  finish();
  await answer;
  t.true(await running.settled(20));
});

test("a handler that throws is counted out too", async (t) => {
  const running = runningHandlers();
  const transport = createRouterTransport((r) => r.service(CollectionsService, {
    listCollections() { throw new Error("broken"); },
  }), { router: { interceptors: [running.interceptor] } });
  await t.throwsAsync(createClient(CollectionsService, transport).listCollections({}));
  t.is(running.count(), 0);
});
