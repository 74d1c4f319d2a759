/** ping, operations.list, operation.describe and schema.get through the JSON endpoint. */
import test from "ava";
import { startTestSystem, type TestSystem, type TestUser } from "../helpers/system.js";

let sys: TestSystem;
let alice: TestUser;

test.before(async () => {
  sys = await startTestSystem();
  alice = await sys.user();
});
test.after.always(async () => { await sys?.stop(); });

// Every operation the contract names (thirdparty-api.md, Endpoints).
const CONTRACT_OPS = [
  "ping", "operations.list", "operation.describe", "schema.get",
  "collections.create", "collections.update", "collections.get", "collections.get_by_slug", "collections.batch.get",
  "collections.list", "collections.search", "collections.browse", "collections.liked.list", "collections.like",
  "collections.unlike", "collections.stats.get", "collections.share_url", "collections.archive", "collections.unarchive",
  "collections.delete", "collections.restore", "collections.export", "collections.move", "collections.reorder",
  "collections.publish", "collections.unpublish", "collections.get_upload_url", "collections.webhook_set",
  "collections.webhook_get", "collections.webhook_remove", "collections.webhook_test",
  "media.get", "media.describe", "media.list", "media.batch.list", "media.search", "media.create", "media.update",
  "media.replace", "media.delete", "media.archive", "media.unarchive", "media.restore", "media.copy", "media.move",
  "media.reorder", "media.text_note.add", "media.text_note.update", "media.text_note.get", "media.text_note.delete",
  "media.get_upload_url", "media.thumbnail_finalize", "media.thumbnail_uploaded", "media.upload", "media.upload_begin",
  "media.upload_chunk", "media.upload_finish", "media.upload_abort", "media.download", "media.download_begin",
  "media.download_chunk", "media.download_url", "media.drop_link",
  "aliases.create", "aliases.list", "aliases.follow", "aliases.unfollow", "aliases.following.list",
  "collaborators.invite", "collaborators.invite.accept", "collaborators.invite.decline", "collaborators.invites.list",
  "collaborators.invites.received", "collaborators.list", "collaborators.revoke", "collaborators.update_permissions",
  "tags.vocabulary.get", "profile.get", "profile.update", "bookmarks.create", "bookmarks.delete", "bookmarks.list",
  "ui.state.get", "ui.state.set", "bug.report", "bug.list", "mcp.revoke_session", "player.command",
];

test("operations.list names every operation of the contract with its scopes", async (t) => {
  const res = await sys.call(alice.token, { op: "operations.list" });
  t.is(res.status, 200);
  const names = res.body.operations.map((o: { name: string }) => o.name);
  for (const op of CONTRACT_OPS) t.true(names.includes(op), `missing ${op}`);
  const del = res.body.operations.find((o: { name: string }) => o.name === "media.delete");
  t.deepEqual(del.scopes, ["media:delete"]);
  const create = res.body.operations.find((o: { name: string }) => o.name === "collections.create");
  t.deepEqual(create.scopes, ["collections:write"]);
  const ping = res.body.operations.find((o: { name: string }) => o.name === "ping");
  t.deepEqual(ping.scopes, []);
});

test("operations.list works without a token", async (t) => {
  const res = await sys.call(undefined, { op: "operations.list" });
  t.is(res.status, 200);
  t.true(res.body.operations.length >= CONTRACT_OPS.length);
});

test("operation.describe returns the request schema of an operation", async (t) => {
  const res = await sys.call(alice.token, { op: "operation.describe", operation: "collections.create" });
  t.is(res.status, 200);
  const op = res.body.operation;
  t.is(op.name, "collections.create");
  t.deepEqual(op.scopes, ["collections:write"]);
  t.deepEqual(op.conditional_scopes, ["media:write"]);
  const s = op.request_schema;
  t.false(s.additionalProperties);
  t.true(s.required.includes("name"));
  t.is(s.properties.description.maxLength, 4000);
  t.deepEqual(s.properties.share_access_level.enum, ["private", "public", "registered", "restricted"]);
  t.is(s.properties.parent_collection_id.minimum, 1);
  t.is(s.properties.idempotency_key.maxLength, 128);
  t.is(s.properties.alias_id.format, "uuid");
  const update = await sys.call(alice.token, { op: "operation.describe", operation: "collections.update" });
  t.deepEqual(update.body.operation.request_schema.properties.alias_id.type, ["string", "null"]);
});

test("operation.describe of an unknown name gives 404 with did_you_mean and allowed_operations", async (t) => {
  const res = await sys.call(alice.token, { op: "operation.describe", operation: "collections_create" });
  t.is(res.status, 404);
  t.is(res.body.error, "not_found");
  t.is(res.body.did_you_mean, "collections.create");
  t.true(res.body.allowed_operations.includes("media.upload"));
});

test("schema.get carries version 1.28.0 and every op with scopes and JSON Schemas", async (t) => {
  const res = await sys.call(alice.token, { op: "schema.get" });
  t.is(res.status, 200);
  t.is(res.body.version, "1.28.0");
  const byName = new Map(res.body.operations.map((o: any) => [o.name, o]));
  for (const name of CONTRACT_OPS) {
    const op: any = byName.get(name);
    t.truthy(op, name);
    t.true(Array.isArray(op.scopes), name);
    t.is(op.request_schema.type, "object", name);
    t.is(op.request_schema.properties.op.const, name);
  }
  const alias: any = byName.get("media.thumbnail_uploaded");
  t.is(alias.deprecated_alias_of, "media.thumbnail_finalize");
  t.is(res.body.errors.restore_window_expired.status, 410);
});

test("meta ops validate their own fields", async (t) => {
  const res = await sys.call(alice.token, { op: "operation.describe" });
  t.is(res.status, 400);
  t.is(res.body.field, "operation");
  const extra = await sys.call(alice.token, { op: "ping", foo: 1 });
  t.is(extra.status, 400);
  t.is(extra.body.field, "foo");
});
