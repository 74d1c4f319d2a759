/** AppError statuses and bodies, and the AppError <-> ConnectError mapping between services. */
import test from "ava";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { MetaService } from "@cms/contracts/gateway/v1/meta_pb";
import { AppError, ERROR_CODES, STATUS_OF, errors, fromConnectError, isTransientFailure, toConnectError, type ErrorCode } from "../src/errors.ts";

test("each code carries its HTTP status", (t) => {
  const expected: Partial<Record<ErrorCode, number>> = {
    unauthorized: 401,
    insufficient_scope: 403,
    forbidden: 403,
    not_found: 404,
    invalid_request: 400,
    duplicate_collection_name: 409,
    idempotency_key_reused: 409,
    restore_window_expired: 410,
    payload_too_large: 413,
    rate_limited: 429,
    server_error: 500,
    not_implemented: 501,
    unavailable: 503,
  };
  for (const [code, status] of Object.entries(expected)) {
    t.is(STATUS_OF[code as ErrorCode], status, code);
    t.is(new AppError(code as ErrorCode, "x").status, status, code);
  }
  // Every code has a status in the 4xx/5xx range.
  for (const [code, status] of Object.entries(STATUS_OF)) t.true(status >= 400 && status < 600, code);
});

test("an explicit status overrides the code's default", (t) => {
  t.is(new AppError("conflict", "x", {}, 423).status, 423);
});

test("toBody is {error, detail, ...extra}", (t) => {
  const e = new AppError("invalid_request", "Field \"name\" is required.", { field: "name", max: 3 });
  t.deepEqual(e.toBody(), { error: "invalid_request", detail: "Field \"name\" is required.", field: "name", max: 3 });
  t.deepEqual(new AppError("not_found", "gone").toBody(), { error: "not_found", detail: "gone" });
  t.is(e.message, "invalid_request: Field \"name\" is required.");
  t.true(e instanceof Error);
});

test("errors shorthands", (t) => {
  t.deepEqual(errors.invalid("bad", "name").toBody(), { error: "invalid_request", detail: "bad", field: "name" });
  t.deepEqual(errors.invalid("bad").toBody(), { error: "invalid_request", detail: "bad" });
  t.is(errors.notFound("nope").status, 404);
  t.is(errors.notImplemented("x.y").code, "not_implemented");
  t.regex(errors.notImplemented("x.y").detail, /x\.y/);
});

const SAMPLES: AppError[] = [
  new AppError("duplicate_collection_name", "A collection with that name exists.", { field: "name", existing_id: 42 }),
  new AppError("rate_limited", "Slow down.", { retry_after_seconds: 12, limit: 60 }),
  new AppError("insufficient_scope", "Needs more.", { need: ["media:write", "collections:write"], nested: { a: true, b: null } }),
  new AppError("not_found", "No such collection."),
  new AppError("conflict", "Locked.", { field: "x" }, 423),
];

test("AppError -> ConnectError -> AppError keeps code, status, detail and extra (in memory)", (t) => {
  for (const e of SAMPLES) {
    const ce = toConnectError(e);
    t.true(ce instanceof ConnectError);
    const back = fromConnectError(ce);
    t.true(back instanceof AppError);
    t.is(back.code, e.code);
    t.is(back.status, e.status);
    t.is(back.detail, e.detail);
    t.deepEqual(back.extra, e.extra);
    t.deepEqual(back.toBody(), e.toBody());
  }
});

test("the ConnectError code follows the HTTP status", (t) => {
  t.is(toConnectError(new AppError("not_found", "x")).code, Code.NotFound);
  t.is(toConnectError(new AppError("invalid_request", "x")).code, Code.InvalidArgument);
  t.is(toConnectError(new AppError("unauthorized", "x")).code, Code.Unauthenticated);
  t.is(toConnectError(new AppError("rate_limited", "x")).code, Code.ResourceExhausted);
  t.is(toConnectError(new AppError("not_implemented", "x")).code, Code.Unimplemented);
  t.is(toConnectError(new AppError("server_error", "x")).code, Code.Internal);
  // Internal callers see the gRPC status that says what happened, from one table.
  t.is(toConnectError(new AppError("cycle_detected", "x")).code, Code.FailedPrecondition);
  t.is(toConnectError(new AppError("publish_handle_locked", "x")).code, Code.FailedPrecondition);
  t.is(toConnectError(new AppError("duplicate_collection_name", "x")).code, Code.AlreadyExists);
  t.is(toConnectError(new AppError("insufficient_permission", "x")).code, Code.PermissionDenied);
  t.is(toConnectError(new AppError("conflict", "x")).code, Code.Aborted);
  for (const [code, s] of Object.entries(ERROR_CODES)) t.is(STATUS_OF[code as keyof typeof STATUS_OF], s.http);
});

test("the round trip survives a real Connect transport (serialized details)", async (t) => {
  let current: AppError = SAMPLES[0]!;
  const transport = createRouterTransport((router) => {
    router.service(MetaService, {
      ping() { throw toConnectError(current); },
    });
  });
  const client = createClient(MetaService, transport);
  for (const e of SAMPLES) {
    current = e;
    const err = await t.throwsAsync(client.ping({}));
    const back = fromConnectError(err);
    t.is(back.code, e.code);
    t.is(back.status, e.status);
    t.is(back.detail, e.detail);
    t.deepEqual(back.extra, e.extra);
  }
});

test("an unknown Error becomes server_error 500 without leaking its message", (t) => {
  const secret = "password=hunter2 at db.internal:5432";
  const ce = toConnectError(new Error(secret));
  t.is(ce.code, Code.Internal);
  t.false(ce.message.includes("hunter2"));
  const back = fromConnectError(ce);
  t.is(back.code, "server_error");
  t.is(back.status, 500);
  t.false(back.detail.includes("hunter2"));
  t.false(JSON.stringify(back.toBody()).includes("hunter2"));
  // A plain Error handed straight to fromConnectError is also opaque.
  const direct = fromConnectError(new Error(secret));
  t.is(direct.code, "server_error");
  t.is(direct.status, 500);
  t.false(JSON.stringify(direct.toBody()).includes("hunter2"));
});

test("a thrown non-AppError crossing a real transport is opaque", async (t) => {
  const transport = createRouterTransport((router) => {
    router.service(MetaService, { ping() { throw toConnectError(new TypeError("cannot read secret_field of undefined")); } });
  });
  const err = await t.throwsAsync(createClient(MetaService, transport).ping({}));
  const back = fromConnectError(err);
  t.is(back.code, "server_error");
  t.is(back.status, 500);
  t.false(JSON.stringify(back.toBody()).includes("secret_field"));
});

test("a ConnectError with Code.Unimplemented and no detail becomes not_implemented 501", async (t) => {
  const back = fromConnectError(new ConnectError("method not found", Code.Unimplemented));
  t.is(back.code, "not_implemented");
  t.is(back.status, 501);
  // Same through a transport whose router does not implement the method.
  const transport = createRouterTransport((router) => { router.service(MetaService, {}); });
  const err = await t.throwsAsync(createClient(MetaService, transport).ping({}));
  const viaWire = fromConnectError(err);
  t.is(viaWire.code, "not_implemented");
  t.is(viaWire.status, 501);
});

test("detail-less ConnectErrors map by code", (t) => {
  const inv = fromConnectError(new ConnectError("name too long", Code.InvalidArgument));
  t.is(inv.code, "invalid_request");
  t.is(inv.status, 400);
  t.is(inv.detail, "name too long");
  t.is(fromConnectError(new ConnectError("down", Code.Unavailable)).status, 503);
  const late = fromConnectError(new ConnectError("slow", Code.DeadlineExceeded));
  t.is(late.code, "unavailable");
  t.is(late.status, 503);
  // A deadline says so: the service answered nothing in time, it is not down.
  t.regex(late.detail, /did not finish within its time limit; safe to retry/);
});

test("fromConnectError returns an AppError unchanged and toConnectError a ConnectError unchanged", (t) => {
  const e = new AppError("forbidden", "no");
  t.is(fromConnectError(e), e);
  const ce = new ConnectError("x", Code.Aborted);
  t.is(toConnectError(ce), ce);
});

/** A driver error as pg raises it: a message and, for server errors, a SQLSTATE code. */
function pgError(message: string, code?: string): Error {
  return Object.assign(new Error(message), code ? { code } : {});
}

test("a dependency going away is transient: lost connections, engine shutdown, pool timeouts, socket resets", (t) => {
  t.true(isTransientFailure(pgError("terminating connection due to administrator command", "57P01")));
  t.true(isTransientFailure(pgError("the database system is shutting down", "57P03")));
  t.true(isTransientFailure(pgError("connection failure", "08006")));
  t.true(isTransientFailure(pgError("sorry, too many clients already", "53300")));
  t.true(isTransientFailure(pgError("Connection terminated unexpectedly")));
  t.true(isTransientFailure(pgError("Client has encountered a connection error and is not queryable")));
  t.true(isTransientFailure(Object.assign(new Error("Knex: Timeout acquiring a connection. The pool is probably full."), { name: "KnexTimeoutError" })));
  t.true(isTransientFailure(pgError("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED")));
  t.true(isTransientFailure(new Error("insert failed", { cause: pgError("read ECONNRESET", "ECONNRESET") })), "through a cause");
});

test("a full disk or quota is transient: the file store's ENOSPC and EDQUOT, PostgreSQL's insufficient resources (class 53)", (t) => {
  // As node:fs raises them (the message names the call, and for a path the path).
  t.true(isTransientFailure(Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC", errno: -28, syscall: "write" })));
  t.true(isTransientFailure(Object.assign(new Error("EDQUOT: disk quota exceeded, open '/data/objects/.tmp/x.tmp'"), { code: "EDQUOT", errno: -122, syscall: "open" })));
  t.true(isTransientFailure(pgError("could not extend file \"base/16384/16385\": No space left on device", "53100")));
  t.true(isTransientFailure(pgError("out of memory", "53200")));
  t.true(isTransientFailure(pgError("out of shared memory", "53200")));
  t.true(isTransientFailure(new Error("put failed", { cause: Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" }) })), "through a cause");
  // Answered as 503 with the one sentence, never the path or the driver's words.
  const full = fromConnectError(toConnectError(Object.assign(new Error("ENOSPC: no space left on device, open '/data/objects/.tmp/x.tmp'"), { code: "ENOSPC" })));
  t.is(full.code, "unavailable");
  t.is(full.status, 503);
  t.notRegex(JSON.stringify(full.toBody()), /ENOSPC|\/data/);
});

test("out of file descriptors is transient: the process's EMFILE and the system's ENFILE, opening a file or a connection", (t) => {
  t.true(isTransientFailure(Object.assign(new Error("EMFILE: too many open files, open '/data/objects/u/1/a.jpg'"), { code: "EMFILE", errno: -24, syscall: "open" })));
  t.true(isTransientFailure(Object.assign(new Error("connect EMFILE 127.0.0.1:5432 - Local (undefined:undefined)"), { code: "EMFILE", errno: -24, syscall: "connect" })));
  t.true(isTransientFailure(Object.assign(new Error("ENFILE: file table overflow, open 'x'"), { code: "ENFILE", errno: -23, syscall: "open" })));
  t.is(fromConnectError(toConnectError(Object.assign(new Error("EMFILE: too many open files, open 'x'"), { code: "EMFILE" }))).status, 503);
});

test("the S3 client's timeouts are transient: no connection within its bound, no answer within its bound", (t) => {
  // As @smithy/node-http-handler raises them.
  t.true(isTransientFailure(Object.assign(new Error("@smithy/node-http-handler - the request socket did not establish a connection with the server within the configured timeout of 5000 ms."), { name: "TimeoutError" })));
  t.true(isTransientFailure(Object.assign(new Error("@smithy/node-http-handler - [ERROR] a request has exceeded the configured 15000 ms requestTimeout."), { name: "TimeoutError", code: "ETIMEDOUT" })));
});

test("a lock not had within the session's lock_timeout is transient (55P03): another session holds the row for now", (t) => {
  t.true(isTransientFailure(pgError("canceling statement due to lock timeout", "55P03")));
  t.is(fromConnectError(toConnectError(new Error("update failed", { cause: pgError("canceling statement due to lock timeout", "55P03") }))).status, 503);
  t.false(isTransientFailure(pgError("object is in use", "55006")), "the rest of class 55 (an object in use, a wrong state) stays a bug");
});

test("bugs and bad input are not transient", (t) => {
  t.false(isTransientFailure(pgError("value \"99999999999\" is out of range for type integer", "22003")));
  t.false(isTransientFailure(pgError("duplicate key value violates unique constraint", "23505")));
  t.false(isTransientFailure(pgError("deadlock detected", "40P01")));
  t.false(isTransientFailure(pgError("program limit exceeded", "54000")));
  t.false(isTransientFailure(Object.assign(new Error("ENOENT: no such file or directory, open 'x'"), { code: "ENOENT" })));
  t.false(isTransientFailure(Object.assign(new Error("EACCES: permission denied, open 'x'"), { code: "EACCES" })));
  t.false(isTransientFailure(new TypeError("Cannot read properties of undefined")));
  t.false(isTransientFailure(undefined));
  t.false(isTransientFailure("a string"));
});

test("a transient failure leaves a service as 503 unavailable, with no driver message; a bug as 500", (t) => {
  const down = toConnectError(pgError("terminating connection due to administrator command", "57P01"));
  t.is(down.code, Code.Unavailable);
  const back = fromConnectError(down);
  t.is(back.code, "unavailable");
  t.is(back.status, 503);
  t.notRegex(JSON.stringify(back.toBody()), /administrator command/);
  t.is(fromConnectError(toConnectError(pgError("out of range", "22003"))).status, 500);
  // The gateway's own store failing the same way (no Connect in between).
  t.is(fromConnectError(pgError("Connection terminated unexpectedly")).code, "unavailable");
});

test("a call whose service died mid-call (stream reset, session gone) is 503 unavailable; a service's own internal error stays 500", (t) => {
  t.is(fromConnectError(new ConnectError("http/2 stream closed with error code INTERNAL_ERROR (0x2)", Code.Internal)).code, "unavailable");
  t.is(fromConnectError(new ConnectError("expected open session, but it is closed", Code.Internal)).code, "unavailable");
  t.is(fromConnectError(new ConnectError("read ECONNRESET", Code.Aborted)).code, "unavailable");
  t.is(fromConnectError(new ConnectError("stream error", Code.Internal, undefined, undefined, Object.assign(new Error("x"), { code: "ERR_HTTP2_STREAM_ERROR" }))).code, "unavailable");
  t.is(fromConnectError(new ConnectError("cannot encode message", Code.Internal)).code, "server_error");
  t.is(fromConnectError(toConnectError(new TypeError("a bug"))).status, 500);
});
