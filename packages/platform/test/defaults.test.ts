/** Request defaults declared in the proto, applied once as the request arrives. */
import test from "ava";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { CollectionsService, type ListCollectionsRequest } from "@cms/contracts/collections/v1/collections_pb";
import { applyDefaults, defaulted } from "../src/rpc.ts";

function echo() {
  let seen: ListCollectionsRequest | undefined;
  const transport = createRouterTransport((r) => r.service(CollectionsService, {
    listCollections(req) { seen = req; return {}; },
  }), { router: { interceptors: [applyDefaults] } });
  return { client: createClient(CollectionsService, transport), seen: () => seen! };
}

test("omitted fields get the default_json their request message declares; given ones stay", async (t) => {
  const e = echo();
  await e.client.listCollections({});
  t.is(e.seen().limit, 100);
  t.is(e.seen().offset, 0);
  t.is(e.seen().includeArchived, false);
  t.is(e.seen().nameContains, undefined, "no default, still omitted");
  await e.client.listCollections({ limit: 7, includeArchived: true });
  t.is(e.seen().limit, 7);
  t.is(e.seen().includeArchived, true);
});

test("defaulted() types the defaulted fields as set, and calls a field without a default a bug", (t) => {
  const req = { limit: 5 as number | undefined, tag: undefined as string | undefined };
  const { limit } = defaulted(req, "limit");
  t.is(limit + 1, 6);
  t.throws(() => defaulted(req, "tag"), { message: /has no default/ });
});
