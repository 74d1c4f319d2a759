/**
 * The service ports in split mode, called directly as an internal service or a gRPC tool would:
 * the gRPC protocol through @grpc/grpc-js with typed (protobuf-es) messages, the callers they
 * accept (a user's access token, a service credential) and refuse (none, forged, expired,
 * addressed to another service), deadlines (a call past its deadline commits nothing),
 * grpc.health.v1 and server reflection.
 * Needs real backends (run with npm run test:backends); skipped otherwise.
 */
import test from "ava";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type DescMethod, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { createPrivateKey } from "node:crypto";
import { SignJWT } from "jose";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { Health, HealthCheckResponse_ServingStatus as Serving } from "@cms/contracts/grpc/health/v1/health_pb";
import { ServerReflection, ServerReflectionResponseSchema, ServerReflectionRequestSchema } from "@cms/contracts/grpc/reflection/v1/reflection_pb";
import { ASSERTION_HEADER, createAssertionSigner, generateCallerKeyPem, loadCallerKeys } from "@cms/platform";
import { admin, splitEnabled, startSplitSystem, type SplitSystem } from "../helpers/split.js";
import { LOCK_TEST_DEADLINE_MS, MEDIA_LOCK, linkRowsIn, lockWaiters, systemDb, until } from "../helpers/faults.js";

/** A unary call through grpc-js: the method's path, its messages serialized by protobuf-es. */
function unary<I extends DescMessage, O extends DescMessage>(client: grpc.Client, method: DescMethod & { input: I; output: O }, init: MessageInitShape<I>, metadata: Record<string, string> = {}, options: grpc.CallOptions = {}): Promise<MessageShape<O>> {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      `/${method.parent.typeName}/${method.name}`,
      (m: MessageShape<I>) => Buffer.from(toBinary(method.input, m)),
      (b: Buffer) => fromBinary(method.output, b),
      create(method.input, init),
      md,
      options,
      (err, res) => (err ? reject(err) : resolve(res!)),
    );
  });
}

const statusOf = async (p: Promise<unknown>) => {
  try { await p; return "OK"; } catch (err) { return grpc.status[(err as grpc.ServiceError).code]; }
};

if (!splitEnabled) {
  test.skip("service ports (skipped: needs DATABASE_URL and NATS_URL; run with npm run test:backends)", () => {});
} else {
  let sys: SplitSystem;
  const clients: grpc.Client[] = [];
  const clientOf = (service: keyof SplitSystem["servicePorts"]) => {
    const c = new grpc.Client(`127.0.0.1:${sys.servicePorts[service]}`, grpc.credentials.createInsecure());
    clients.push(c);
    return c;
  };

  test.before(async () => {
    sys = await startSplitSystem({ gateways: 1 });
  });
  test.after.always(async () => {
    for (const c of clients) c.close();
    await sys?.stop();
  });

  test("grpc-js calls CollectionsService and MediaService with a user's access token and gets typed responses", async (t) => {
    const alice = await sys.user("alice");
    const auth = { authorization: `Bearer ${alice.token}` };
    const collections = clientOf("collections");
    const media = clientOf("media");
    const created = await unary(collections, CollectionsService.method.createCollection, { name: "Through gRPC", tags: ["grpc"] }, auth);
    t.is(created.$typeName, "collections.v1.CreateCollectionResponse");
    t.is(created.collection?.name, "Through gRPC");
    t.is(created.collection?.userId, alice.userId);
    t.is(typeof created.collection?.id, "bigint");
    const note = await unary(media, MediaService.method.addTextNote, { collectionId: created.collection!.id, name: "a note", text: "hello" }, auth);
    t.is(note.media?.note?.textNote, "hello");
    const listed = await unary(media, MediaService.method.listMedia, { collectionId: created.collection!.id }, auth);
    t.deepEqual(listed.media.map((m) => m.name), ["a note"]);
    t.is(listed.pagination?.total, 1n);

    // The same token without the scope is refused by the service itself, as by the gateway.
    const reader = await admin(sys.cliEnv, ["token", "mint", alice.username, "--scopes", "media:read"]);
    t.is(await statusOf(unary(collections, CollectionsService.method.createCollection, { name: "no" }, { authorization: `Bearer ${reader.access_token}` })), "PERMISSION_DENIED");
    // Internal RPCs are for processes of this system, not for a user's token.
    t.is(await statusOf(unary(collections, CollectionsService.method.checkAccess, { userId: alice.userId, collectionId: created.collection!.id, action: "read" }, auth)), "PERMISSION_DENIED");
  });

  test("a service credential calls the operations that need no user", async (t) => {
    const cred = await admin(sys.cliEnv, ["service", "create", "analytics"]);
    t.regex(cred.credential, /^cms_svc_/);
    const collections = clientOf("collections");
    const auth = { authorization: `Bearer ${cred.credential}` };
    const found = await unary(collections, CollectionsService.method.searchCollections, { query: "nothing-like-this", scope: ["public"] }, auth);
    t.deepEqual(found.collections, []);
    t.is(await statusOf(unary(collections, CollectionsService.method.listCollections, {}, auth)), "UNAUTHENTICATED", "a service is no user");
  });

  test("a service port refuses an unsigned, forged, expired or wrongly addressed caller", async (t) => {
    const alice = await sys.user("mallory");
    const collections = clientOf("collections");
    const list = (md: Record<string, string>) => statusOf(unary(collections, CollectionsService.method.listCollections, {}, md));
    t.is(await list({}), "UNAUTHENTICATED", "unsigned");
    t.is(await list({ "x-cms-caller": Buffer.from(JSON.stringify({ userId: alice.userId, scopes: ["collections:read"] })).toString("base64url") }), "UNAUTHENTICATED", "the old plain header");

    const caller = { userId: alice.userId, username: alice.username, plan: "paid" as const, isAdmin: true, scopes: ["collections:read"], tokenId: "x" };
    const forgedKeys = await loadCallerKeys(generateCallerKeyPem().privateKey, [], sys.env.DATA_DIR!);
    t.is(await list({ [ASSERTION_HEADER]: await createAssertionSigner(forgedKeys).sign({ user: caller, service: "gateway" }, "collections") }), "UNAUTHENTICATED", "forged");

    const keys = await loadCallerKeys(sys.env.CALLER_SIGNING_KEY, [], sys.env.DATA_DIR!);
    const good = await createAssertionSigner(keys).sign({ user: caller, service: "gateway" }, "collections");
    t.is(await list({ [ASSERTION_HEADER]: good }), "OK", "the system's own key");
    const expired = await createAssertionSigner(keys, () => Date.now() - 5 * 60_000).sign({ user: caller, service: "gateway" }, "collections");
    t.is(await list({ [ASSERTION_HEADER]: expired }), "UNAUTHENTICATED", "expired");
    const forMedia = await createAssertionSigner(keys).sign({ user: caller, service: "gateway" }, "media");
    t.is(await list({ [ASSERTION_HEADER]: forMedia }), "UNAUTHENTICATED", "addressed to media");
    const tampered = await new SignJWT({ svc: "gateway", usr: { name: "x", plan: "paid", adm: true, scope: "collections:read", tid: "x" } })
      .setProtectedHeader({ alg: "EdDSA", kid: keys.kid }).setIssuer("cms").setSubject(alice.userId).setAudience("collections").setIssuedAt().setExpirationTime("60s")
      .sign(createPrivateKey(generateCallerKeyPem().privateKey));
    t.is(await list({ [ASSERTION_HEADER]: tampered }), "UNAUTHENTICATED", "this system's key id, another key");
  });

  test("a call whose deadline passes while it waits for a lock commits nothing once the lock is let go (gRPC and Connect)", async (t) => {
    const alice = await sys.user("deadline");
    const auth = { authorization: `Bearer ${alice.token}` };
    const grpcClient = clientOf("collections");
    const connectClient = createClient(CollectionsService, createConnectTransport({
      baseUrl: `http://127.0.0.1:${sys.servicePorts.collections}`, httpVersion: "2",
      interceptors: [(next) => (req) => { req.header.set("authorization", auth.authorization); return next(req); }],
    }));
    const protocols: Array<[string, (id: bigint, name: string) => Promise<string>]> = [
      ["gRPC", (id, name) => statusOf(unary(grpcClient, CollectionsService.method.updateCollection, { collectionId: id, name }, auth, { deadline: Date.now() + LOCK_TEST_DEADLINE_MS }))],
      ["Connect", async (id, name) => {
        try { await connectClient.updateCollection({ collectionId: id, name }, { timeoutMs: LOCK_TEST_DEADLINE_MS }); return "OK"; } catch (err) { return Code[ConnectError.from(err).code]!; }
      }],
    ];
    const holder = await systemDb(t, sys);
    for (const [protocol, update] of protocols) {
      const created = await unary(grpcClient, CollectionsService.method.createCollection, { name: `Kept (${protocol})` }, auth);
      const id = created.collection!.id;
      await holder.query("BEGIN");
      await holder.query("SELECT id FROM collections.collections WHERE id = $1 FOR UPDATE", [id]);
      const late = update(id, `Too late (${protocol})`);
      t.true(await until(async () => (await lockWaiters(holder, "%collections%for update%")) > 0, LOCK_TEST_DEADLINE_MS + 2_000), `${protocol}: the update waits for the row`);
      t.is(await late, protocol === "gRPC" ? "DEADLINE_EXCEEDED" : "DeadlineExceeded", protocol);
      // The service's update goes on waiting for the row past its caller's deadline
      // (DB_LOCK_TIMEOUT_MS is 5 s): it is let go only now.
      t.is(await lockWaiters(holder, "%collections%for update%"), 1, `${protocol}: the update still waits for the row`);
      await holder.query("ROLLBACK");
      // Locking the row again waits until the update's transaction has ended, one way or the other.
      await holder.query("BEGIN");
      const after = await holder.query("SELECT name FROM collections.collections WHERE id = $1 FOR UPDATE", [id]);
      await holder.query("COMMIT");
      t.is(after.rows[0].name, `Kept (${protocol})`, `${protocol}: its caller was told it failed, and nothing was written`);
      // In time, the same update is written.
      const renamed = await unary(grpcClient, CollectionsService.method.updateCollection, { collectionId: id, name: `Renamed (${protocol})` }, auth);
      t.is(renamed.collection?.name, `Renamed (${protocol})`);
    }
  });

  test("a gRPC caller's deadline reaches the service its call calls: media, waiting for a lock, writes no link row once the caller was answered", async (t) => {
    const alice = await sys.user("nested");
    const auth = { authorization: `Bearer ${alice.token}` };
    const collections = clientOf("collections");
    const parentId = (await unary(collections, CollectionsService.method.createCollection, { name: "Parent" }, auth)).collection!.id;
    const holder = await systemDb(t, sys);
    // The lock the media process takes on a collection's rows while it changes them (MediaStore.lockCollections).
    const lock = () => holder.query("SELECT pg_advisory_xact_lock($1, $2)", [MEDIA_LOCK, Number(parentId)]);
    await holder.query("BEGIN");
    await lock();
    // The collections process commits the sub-collection, then asks the media process for its
    // link row in the parent, whose lock the holder has.
    const late = statusOf(unary(collections, CollectionsService.method.createCollection, { name: "Child", parentCollectionId: parentId }, auth, { deadline: Date.now() + LOCK_TEST_DEADLINE_MS }));
    t.true(await until(async () => (await lockWaiters(holder, "%pg_advisory_xact_lock%")) > 0, LOCK_TEST_DEADLINE_MS + 2_000), "the media process's link insert waits for the parent's lock");
    t.is(await late, "DEADLINE_EXCEEDED");
    t.is(await lockWaiters(holder, "%pg_advisory_xact_lock%"), 1, "the media process's link insert still waits past the deadline");
    await holder.query("ROLLBACK");
    // Taking the lock again waits until the media process's transaction has ended.
    await holder.query("BEGIN");
    await lock();
    await holder.query("COMMIT");
    t.is(await linkRowsIn(holder, parentId), 0, "no link row for a caller answered deadline_exceeded: the media call ended with the call that made it");
    await unary(collections, CollectionsService.method.createCollection, { name: "Child in time", parentCollectionId: parentId }, auth);
    t.is(await linkRowsIn(holder, parentId), 1);
  });

  test("grpc.health.v1: Check and Watch answer SERVING on every service port; an unknown service is NOT_FOUND", async (t) => {
    for (const s of ["auth", "collections", "media", "social", "webhooks"] as const) {
      const c = clientOf(s);
      t.is((await unary(c, Health.method.check, { service: "" })).status, Serving.SERVING, s);
    }
    const c = clientOf("collections");
    t.is((await unary(c, Health.method.check, { service: "collections.v1.CollectionsService" })).status, Serving.SERVING);
    t.is(await statusOf(unary(c, Health.method.check, { service: "nope.v1.Nothing" })), "NOT_FOUND");
    const first = await new Promise<number>((resolve, reject) => {
      const stream = c.makeServerStreamRequest(`/grpc.health.v1.Health/Watch`, (m: unknown) => Buffer.from(toBinary(Health.method.watch.input, m as never)),
        (b: Buffer) => fromBinary(Health.method.watch.output, b), create(Health.method.watch.input, { service: "" }));
      stream.once("data", (m: { status: number }) => { resolve(m.status); stream.cancel(); });
      stream.once("error", (err: grpc.ServiceError) => { if (err.code !== grpc.status.CANCELLED) reject(err); });
    });
    t.is(first, Serving.SERVING);
  });

  test("server reflection lists the services and describes them from their descriptors", async (t) => {
    const c = clientOf("media");
    const ask = (init: MessageInitShape<typeof ServerReflectionRequestSchema>[]) => new Promise<Array<MessageShape<typeof ServerReflectionResponseSchema>>>((resolve, reject) => {
      const out: Array<MessageShape<typeof ServerReflectionResponseSchema>> = [];
      const stream = c.makeBidiStreamRequest(`/${ServerReflection.typeName}/ServerReflectionInfo`,
        (m: unknown) => Buffer.from(toBinary(ServerReflectionRequestSchema, m as never)), (b: Buffer) => fromBinary(ServerReflectionResponseSchema, b));
      stream.on("data", (m: MessageShape<typeof ServerReflectionResponseSchema>) => { out.push(m); if (out.length === init.length) stream.end(); });
      stream.on("end", () => resolve(out));
      stream.on("error", reject);
      for (const m of init) stream.write(create(ServerReflectionRequestSchema, m));
    });
    const [list, file, missing] = await ask([
      { messageRequest: { case: "listServices", value: "" } },
      { messageRequest: { case: "fileContainingSymbol", value: "media.v1.MediaService" } },
      { messageRequest: { case: "fileContainingSymbol", value: "no.such.Symbol" } },
    ]);
    const names = list!.messageResponse.case === "listServicesResponse" ? list!.messageResponse.value.service.map((s) => s.name) : [];
    t.true(names.includes("media.v1.MediaService"));
    t.true(names.includes("grpc.health.v1.Health"));
    t.true(names.includes("grpc.reflection.v1.ServerReflection"));
    t.is(file!.messageResponse.case, "fileDescriptorResponse");
    const protos = file!.messageResponse.case === "fileDescriptorResponse" ? file!.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b)) : [];
    const mediaFile = protos.find((p) => p.name === "media/v1/media.proto");
    t.truthy(mediaFile);
    t.true(mediaFile!.service[0]!.method.some((m) => m.name === "ListMedia" && m.outputType === ".media.v1.ListMediaResponse"));
    t.true(protos.some((p) => p.name === "media/v1/resources.proto"), "dependencies come along");
    t.is(missing!.messageResponse.case, "errorResponse");
  });
}
