/** The op registry built from the public service descriptors, and its validation errors. */
import test from "ava";
import { getOption, hasOption } from "@bufbuild/protobuf";
import { op as opOption } from "@cms/contracts/common/v1/options_pb";
import { AppError } from "@cms/platform";
import { PUBLIC_SERVICES } from "../src/app/public-services.ts";
import { buildRegistry, validationError, type OpEntry } from "../src/app/registry.ts";

const registry = buildRegistry(PUBLIC_SERVICES);

function op(name: string): OpEntry {
  const e = registry.get(name);
  if (!e) throw new Error(`no op ${name}`);
  return e;
}

/** Validates body against op and returns the contract error for the first violation. */
function errorOf(name: string, body: Record<string, unknown>): AppError {
  const e = op(name);
  if (e.validate(body)) throw new Error(`${name} accepted ${JSON.stringify(body)}`);
  return validationError(e, e.validate.errors![0]!);
}

test("every annotated RPC is one entry, with a unique name", (t) => {
  const annotated = PUBLIC_SERVICES.flatMap((s) => s.methods.filter((m) => hasOption(m, opOption)).map((m) => getOption(m, opOption).name));
  const names = registry.all().map((e) => e.name);
  t.is(new Set(names).size, names.length, "names are unique");
  t.deepEqual([...names].sort(), [...annotated].sort());
  t.deepEqual(registry.names(), [...names].sort());
  t.true(names.length > 50);
  for (const n of names) t.is(registry.get(n)!.name, n);
  t.is(registry.get("no.such.op"), undefined);
});

test("internal RPCs (without the op option) are not operations", (t) => {
  const methods = registry.all().map((e) => e.method.name);
  t.false(methods.includes("CheckAccess"));
  t.false(methods.includes("InsertCollectionLink"));
});

test("buildRegistry refuses an operation declared twice", (t) => {
  t.throws(() => buildRegistry([...PUBLIC_SERVICES, PUBLIC_SERVICES[0]!]), { message: /declared twice/ });
});

test("entries carry the op options", (t) => {
  const create = op("collections.create");
  t.is(create.owner, "collections");
  t.deepEqual(create.scopes, ["collections:write"]);
  t.deepEqual(create.conditionalScopes, ["media:write"]);
  t.true(create.mutating);
  t.false(create.anonymous);
  t.is(create.method.name, "CreateCollection");
  t.truthy(create.summary);
  t.is(op("operations.list").owner, "gateway");
  t.true(op("operations.list").anonymous);
  t.is(op("media.thumbnail_uploaded").deprecatedAliasOf, "media.thumbnail_finalize");
  t.is(op("media.thumbnail_finalize").deprecatedAliasOf, undefined);
  t.false(op("media.get").mutating);
});

test("every operation's request schema compiles, once, on first use (a start no longer compiles them)", (t) => {
  const fresh = buildRegistry(PUBLIC_SERVICES);
  for (const e of fresh.all()) {
    const first = e.validate;
    t.is(typeof first, "function", e.name);
    t.is(e.validate, first, `${e.name}: compiled once`);
    t.true(e.validate(e.mutating ? { idempotency_key: "k" } : {}) || e.validate.errors!.every((err) => err.keyword === "required"), e.name);
  }
});

test("mutating operations, and only they, accept idempotency_key", (t) => {
  let mutating = 0;
  for (const e of registry.all()) {
    const props = e.requestSchema.properties as Record<string, { type?: string; maxLength?: number }>;
    if (e.mutating) {
      mutating++;
      t.is(props.idempotency_key?.type, "string", e.name);
      t.is(props.idempotency_key?.maxLength, 128, e.name);
    } else {
      t.false("idempotency_key" in props, e.name);
    }
  }
  t.true(mutating > 10);
  t.true(op("collections.create").validate({ name: "x", idempotency_key: "k-1" }));
  t.false(op("collections.create").validate({ name: "x", idempotency_key: "" }));
  t.false(op("collections.create").validate({ name: "x", idempotency_key: "k".repeat(129) }));
  const err = errorOf("collections.get", { collection_id: 1, idempotency_key: "k-1" });
  t.is(err.extra.field, "idempotency_key");
});

test("nearest suggests the closest operation name", (t) => {
  t.is(registry.nearest("collections.creat"), "collections.create");
  t.is(registry.nearest("collections_create"), "collections.create");
  t.is(registry.nearest("COLLECTIONS.LIST"), "collections.list");
  t.is(registry.nearest("media.uplod"), "media.upload");
  t.is(registry.nearest("pingg"), "ping");
});

test("valid bodies pass", (t) => {
  t.true(op("collections.create").validate({ name: "Trip", tags: ["a", "b"], playback_prefs: { loop: true, kinds: { image: true } }, share_access_level: "public" }));
  t.true(op("collections.create").validate({ name: "Trip", playback_prefs: null }));
  t.true(op("collections.create").validate({ name: "Trip", alias_id: "0b6f1d2e-4c1a-4a53-9d3e-2f7b8c9a0e11" }));
  t.true(op("collections.list").validate({}));
  t.true(op("collections.list").validate({ limit: 500, fields: ["id", "name"] }));
  t.true(op("collections.update").validate({ collection_id: 3, description: null }));
  t.true(op("ping").validate({}));
});

test("additionalProperties at the top level names the field and lists the allowed ones", (t) => {
  const err = errorOf("collections.create", { name: "x", colour: "red" });
  t.is(err.code, "invalid_request");
  t.is(err.status, 400);
  t.deepEqual(err.extra, { field: "colour" });
  t.regex(err.detail, /^Unknown field "colour" for collections\.create\. Allowed fields: op, name, /);
  t.true(err.detail.includes("idempotency_key"));
  t.deepEqual(err.toBody().field, "colour");
});

test("additionalProperties in a nested object gives a dotted path", (t) => {
  const err = errorOf("collections.create", { name: "x", playback_prefs: { speed: 2 } });
  t.deepEqual(err.extra, { field: "playback_prefs.speed" });
  t.is(err.detail, 'Unknown field "playback_prefs.speed" in "playback_prefs".');
  const deeper = errorOf("collections.update", { collection_id: 1, playback_prefs: { kinds: { gif: true } } });
  t.is(deeper.extra.field, "playback_prefs.kinds.gif");
  t.is(deeper.detail, 'Unknown field "playback_prefs.kinds.gif" in "playback_prefs.kinds".');
});

test("required names the missing field", (t) => {
  const err = errorOf("collections.create", {});
  t.deepEqual(err.extra, { field: "name" });
  t.is(err.detail, 'Missing required field "name" for collections.create.');
  const chunk = errorOf("media.upload_chunk", { upload_id: "0b6f1d2e-4c1a-4a53-9d3e-2f7b8c9a0e11", content_base64: "AA==", content_length: 1 });
  t.is(chunk.extra.field, "index");
});

test("type errors name the field (array items by index)", (t) => {
  const err = errorOf("collections.create", { name: 5 });
  t.deepEqual(err.extra, { field: "name" });
  t.is(err.detail, 'Field "name" must be of type string.');
  const item = errorOf("collections.create", { name: "x", tags: ["ok", 3] });
  t.is(item.extra.field, "tags[1]");
  t.regex(item.detail, /^Field "tags\[1\]" must be of type string\.$/);
  // No type coercion: a numeric string is not an integer.
  const id = errorOf("collections.get", { collection_id: "5" });
  t.is(id.extra.field, "collection_id");
  t.regex(id.detail, /must be of type integer/);
  const nested = errorOf("collections.create", { name: "x", playback_prefs: { loop: "yes" } });
  t.is(nested.extra.field, "playback_prefs.loop");
});

test("enum errors list the allowed values", (t) => {
  const err = errorOf("collections.create", { name: "x", share_access_level: "secret" });
  t.deepEqual(err.extra, { field: "share_access_level", allowed_values: ["private", "public", "registered", "restricted"] });
  t.is(err.detail, 'Field "share_access_level" must be one of: "private", "public", "registered", "restricted".');
  const scope = errorOf("collections.search", { query: "abc", scope: ["own", "everyone"] });
  t.is(scope.extra.field, "scope[1]");
});

test("maximum, minimum, length and format errors name the field", (t) => {
  const max = errorOf("collections.list", { limit: 501 });
  t.deepEqual(max.extra, { field: "limit" });
  t.is(max.detail, 'Field "limit" must be <= 500.');
  const min = errorOf("collections.list", { limit: 0 });
  t.is(min.extra.field, "limit");
  t.is(min.detail, 'Field "limit" must be >= 1.');
  const nestedMax = errorOf("collections.create", { name: "x", playback_prefs: { interval_seconds: 3601 } });
  t.is(nestedMax.extra.field, "playback_prefs.interval_seconds");
  const long = errorOf("collections.create", { name: "x".repeat(501) });
  t.is(long.extra.field, "name");
  t.regex(long.detail, /^Field "name" must NOT have more than 500 characters\.$/);
  const uuid = errorOf("collections.create", { name: "x", alias_id: "not-a-uuid" });
  t.is(uuid.extra.field, "alias_id");
  t.regex(uuid.detail, /uuid/);
  const tooMany = errorOf("collections.batch.get", { ids: [] });
  t.is(tooMany.extra.field, "ids");
});

test("a body of the wrong type is reported on 'body'", (t) => {
  const e = op("collections.create");
  t.false(e.validate([]));
  const err = validationError(e, e.validate.errors![0]!);
  t.is(err.extra.field, "body");
  t.is(err.detail, 'Field "body" must be of type object.');
});

/**
 * Every value a request may carry is bounded by the schema the gateway derives: integers within
 * their column's range (int32 or a bigint id below 2^53), arrays with a maximum length, strings
 * with a maximum length (or a closed set, a uuid, a fixed-length pattern; base64 bytes are bounded
 * by the body limit). An unbounded field would let a request reach PostgreSQL out of range.
 */
test("every request field is bounded: integers, arrays and strings", (t) => {
  const problems: string[] = [];
  const walk = (s: Record<string, any>, path: string) => {
    if (!s || typeof s !== "object") return;
    for (const k of ["oneOf", "anyOf"]) if (Array.isArray(s[k])) for (const sub of s[k]) walk(sub, path);
    const types: string[] = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
    if (types.includes("integer")) {
      const min = s.minimum ?? s.exclusiveMinimum;
      const max = s.maximum ?? s.exclusiveMaximum;
      if (!(typeof min === "number" && typeof max === "number" && min >= -Number.MAX_SAFE_INTEGER && max <= Number.MAX_SAFE_INTEGER)) problems.push(`${path}: integer without bounds [${min}, ${max}]`);
    }
    if (types.includes("number") && (typeof s.minimum !== "number" || typeof s.maximum !== "number")) problems.push(`${path}: number without bounds`);
    if (types.includes("array")) {
      if (typeof s.maxItems !== "number") problems.push(`${path}: array without maxItems`);
      walk(s.items, `${path}[]`);
    }
    // content_base64 is bounded by the service while it decodes (against content_length, itself
    // bounded) and by the body limit: counting its characters first would cost more than that.
    if (types.includes("string") && !path.endsWith(".content_base64") && s.maxLength === undefined && !s.enum && s.format !== "uuid" && s.contentEncoding !== "base64" && !/^\^[^*+]*\{\d+\}\$$/.test(s.pattern ?? "")) problems.push(`${path}: string without maxLength`);
    if (types.includes("object") && s.properties) for (const [k, v] of Object.entries(s.properties)) walk(v as Record<string, any>, `${path}.${k}`);
  };
  for (const e of registry.all()) walk(e.requestSchema, e.name);
  t.deepEqual(problems, []);
});

test("integers beyond their column, floats where integers belong and huge arrays are refused naming the field", (t) => {
  // An int32 column (position) and an int32 request field past its range.
  t.is(errorOf("collections.update", { collection_id: 1, position: 2147483648 }).extra.field, "position");
  t.is(errorOf("media.move", { media_ids: [1], target_collection_id: 2, start_position: -1 }).extra.field, "start_position");
  // A float for an id and for a page size.
  t.is(errorOf("collections.get", { collection_id: 1.5 }).extra.field, "collection_id");
  t.regex(errorOf("collections.list", { limit: 10.25 }).detail, /must be of type integer/);
  // An id list longer than its bound, and an item that is no id.
  t.is(errorOf("media.delete", { media_ids: Array.from({ length: 101 }, (_, i) => i + 1), confirm: true }).extra.field, "media_ids");
  t.is(errorOf("media.delete", { media_ids: [1, 2.5] }).extra.field, "media_ids[1]");
  t.is(errorOf("collections.list", { fields: Array.from({ length: 16 }, () => "id") }).extra.field, "fields");
  t.is(errorOf("collections.move", { collection_id: 1, parent_collection_id: 9007199254740992 }).extra.field, "parent_collection_id");
});
