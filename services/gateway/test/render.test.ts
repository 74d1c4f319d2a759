/**
 * The descriptor-driven renderer and the response schema derived from the same descriptors,
 * on message types built here from a FileDescriptorProto, so every rule has a case of its own.
 */
import test from "ava";
import { create, createFileRegistry, setExtension, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import {
  FieldDescriptorProto_Label as Label, FieldDescriptorProto_Type as Type, FieldOptionsSchema, FileDescriptorProtoSchema,
  file_google_protobuf_field_mask, file_google_protobuf_struct, file_google_protobuf_timestamp, timestampFromMs, type FieldDescriptorProto,
} from "@bufbuild/protobuf/wkt";
import { field as fieldOption, FieldSchema, file_common_v1_options } from "@cms/contracts/common/v1/options_pb";
import { Ajv } from "ajv";
import { responseSchema } from "../src/domain/json-schema.js";
import fc from "fast-check";
import { isoOfTimestamp, renderJson, renderObject } from "../src/domain/render.js";

type Opts = { nullable?: boolean; jsonKey?: string; inline?: boolean; selects?: string };

let optionalIndex = 0;
const optionalOneofs: string[] = [];

function f(name: string, number: number, type: Type, extra: Partial<FieldDescriptorProto> & { opts?: Opts; optional?: boolean; repeated?: boolean } = {}) {
  const { opts, optional, repeated, ...rest } = extra;
  const options = create(FieldOptionsSchema);
  if (opts) setExtension(options, fieldOption, create(FieldSchema, opts));
  const field: Record<string, unknown> = {
    name, number, type, jsonName: name, label: repeated ? Label.REPEATED : Label.OPTIONAL, options, ...rest,
  };
  if (optional) {
    field.proto3Optional = true;
    field.oneofIndex = optionalIndex++;
    optionalOneofs.push(`_${name}`);
  }
  return field;
}

function buildItem() {
  optionalIndex = 0;
  optionalOneofs.length = 0;
  const item = {
    name: "Item",
    field: [
      f("id", 1, Type.INT64),
      f("name", 2, Type.STRING),
      f("description", 3, Type.STRING, { optional: true, opts: { nullable: true } }),
      f("note", 4, Type.STRING, { optional: true }),
      f("tags", 5, Type.STRING, { repeated: true }),
      f("created_at", 6, Type.MESSAGE, { typeName: ".google.protobuf.Timestamp" }),
      f("deleted_at", 7, Type.MESSAGE, { typeName: ".google.protobuf.Timestamp", opts: { nullable: true } }),
      f("prefs", 8, Type.MESSAGE, { typeName: ".google.protobuf.Struct", opts: { nullable: true } }),
      f("is_own", 9, Type.BOOL, { opts: { jsonKey: "isOwn" } }),
      f("extra", 10, Type.MESSAGE, { typeName: ".test.Extra", opts: { inline: true } }),
      f("size", 11, Type.INT64, { optional: true, opts: { nullable: true } }),
    ],
    oneofDecl: [] as Array<{ name: string }>,
  };
  item.oneofDecl = optionalOneofs.map((name) => ({ name }));
  const extra = { name: "Extra", field: [f("text_note", 1, Type.STRING), f("placeholder", 2, Type.STRING, { optional: true, opts: { nullable: true } })], oneofDecl: [] as Array<{ name: string }> };
  extra.oneofDecl = optionalOneofs.splice(optionalOneofs.length - 1).map((name) => ({ name }));
  // Extra's optional field got index 0 of its own message's oneofs.
  (extra.field[1] as { oneofIndex: number }).oneofIndex = 0;
  optionalIndex = 0;
  const list = {
    name: "ListResponse",
    field: [
      f("items", 1, Type.MESSAGE, { typeName: ".test.Item", repeated: true }),
      f("fields", 2, Type.MESSAGE, { typeName: ".google.protobuf.FieldMask", opts: { selects: "items" } }),
      f("total", 3, Type.INT32),
      f("json", 4, Type.MESSAGE, { typeName: ".test.Extra", oneofIndex: 0, opts: { inline: true } }),
      f("csv", 5, Type.STRING, { oneofIndex: 0 }),
    ],
    oneofDecl: [{ name: "body" }],
  };
  const file = create(FileDescriptorProtoSchema, {
    name: "test/render.proto", package: "test", syntax: "proto3",
    dependency: ["google/protobuf/timestamp.proto", "google/protobuf/struct.proto", "google/protobuf/field_mask.proto", "common/v1/options.proto"],
    messageType: [item, extra, list] as never,
  });
  const deps = [file_google_protobuf_timestamp, file_google_protobuf_struct, file_google_protobuf_field_mask, file_common_v1_options];
  const reg = createFileRegistry(file, (name) => deps.find((d) => d.name === name.replace(/\.proto$/, "")) ?? deps.find((d) => `${d.name}.proto` === name));
  return { Item: reg.getMessage("test.Item")!, List: reg.getMessage("test.ListResponse")! };
}

const { Item, List } = buildItem();
const make = (desc: DescMessage, init: Record<string, unknown>) => create(desc, init as never) as MessageShape<DescMessage>;

test("int64 as JSON numbers, implicit scalars always present, lists as arrays", (t) => {
  const out = renderObject(Item, make(Item, { id: 42n, tags: [] }));
  t.is(out.id, 42);
  t.is(out.name, "");
  t.deepEqual(out.tags, []);
  t.is(out.isOwn, false);
});

test("an absent nullable field is null, an absent plain optional field is left out", (t) => {
  const out = renderObject(Item, make(Item, { id: 1n }));
  t.true("description" in out);
  t.is(out.description, null);
  t.is(out.deleted_at, null);
  t.is(out.prefs, null);
  t.is(out.size, null);
  t.false("note" in out);
  t.false("created_at" in out, "a message field without nullable is left out when unset");
});

test("present values: timestamps in ISO 8601 with milliseconds, Struct as plain JSON, json_key", (t) => {
  const out = renderObject(Item, make(Item, {
    id: 7n, description: "d", note: "n", createdAt: timestampFromMs(Date.UTC(2026, 10, 24, 6, 0, 0)), prefs: { loop: true, kinds: { image: false } },
    isOwn: true, size: 9007199254740991n,
  }));
  t.is(out.description, "d");
  t.is(out.note, "n");
  t.is(out.created_at, "2026-11-24T06:00:00.000Z");
  t.deepEqual(out.prefs, { loop: true, kinds: { image: false } });
  t.is(out.isOwn, true);
  t.false("is_own" in out);
  t.is(out.size, Number.MAX_SAFE_INTEGER);
});

test("an inline message puts its keys in the parent at its place, and nothing when unset", (t) => {
  const withNote = renderObject(Item, make(Item, { id: 1n, extra: { textNote: "hello" }, size: 3n }));
  t.is(withNote.text_note, "hello");
  t.is(withNote.placeholder, null);
  t.false("extra" in withNote);
  const keys = Object.keys(withNote);
  t.deepEqual(keys.slice(keys.indexOf("isOwn") + 1), ["text_note", "placeholder", "size"]);
  const without = renderObject(Item, make(Item, { id: 1n }));
  t.false("text_note" in without);
});

test("a oneof renders only its chosen member, inline or not", (t) => {
  t.deepEqual(renderObject(List, make(List, { body: { case: "csv", value: "a,b" } })), { items: [], total: 0, csv: "a,b" });
  t.deepEqual(renderObject(List, make(List, { body: { case: "json", value: { textNote: "x" } } })), { items: [], total: 0, text_note: "x", placeholder: null });
});

test("a selecting FieldMask renders only the chosen fields of each item, in the mask's order, null when absent", (t) => {
  const items = [{ id: 1n, name: "a", description: "x" }, { id: 2n, name: "b" }];
  const selected = JSON.parse(renderJson(List, make(List, { items, fields: { paths: ["name", "id", "description", "note"] }, total: 2 })));
  t.deepEqual(selected, { items: [{ name: "a", id: 1, description: "x", note: null }, { name: "b", id: 2, description: null, note: null }], total: 2 });
  t.deepEqual(Object.keys(selected.items[0]), ["name", "id", "description", "note"]);
  const whole = JSON.parse(renderJson(List, make(List, { items: [{ id: 1n }], total: 1 })));
  t.is(whole.items[0].id, 1);
  t.true("tags" in whole.items[0], "no mask: whole items");
  t.false("fields" in whole, "the mask itself is never rendered");
});

test("the response schema follows the same options, and validates what the renderer produces", (t) => {
  const schema = responseSchema(Item);
  const props = schema.properties as Record<string, Record<string, unknown>>;
  t.deepEqual(props.id, { type: "integer" });
  t.deepEqual(props.description!.type, ["string", "null"]);
  t.deepEqual(props.created_at, { type: "string", format: "date-time" });
  t.deepEqual(props.prefs!.type, ["object", "null"]);
  t.truthy(props.isOwn);
  t.falsy(props.is_own);
  t.truthy(props.text_note, "inline fields appear in the parent");
  t.falsy(props.extra);
  const required = schema.required as string[];
  // created_at is a message field declared without `optional`: the proto's way of saying "always set".
  for (const k of ["id", "name", "tags", "isOwn", "description", "deleted_at", "prefs", "size", "created_at", "text_note"]) t.true(required.includes(k), k);
  t.false(required.includes("note"));
  t.true(required.includes("placeholder"), "nullable, in an inline message that is always set");

  const listSchema = responseSchema(List);
  const itemSchema = (listSchema.properties as Record<string, { items: Record<string, unknown> }>).items.items;
  t.is(itemSchema.required, undefined, "items of a selectable list may carry only some fields");
  t.falsy((listSchema.properties as Record<string, unknown>).fields);

  const ajv = new Ajv({ strict: false, validateFormats: false });
  const validate = ajv.compile(schema);
  for (const m of [make(Item, { id: 1n, createdAt: timestampFromMs(0), extra: {} }), make(Item, { id: 2n, description: "d", createdAt: timestampFromMs(0), extra: { textNote: "x" }, size: 1n })]) {
    t.true(validate(renderObject(Item, m)), JSON.stringify(validate.errors));
  }
});

test("a Timestamp is written as Date#toISOString writes its millisecond, at every second (before 1970 and past 9999 too)", (t) => {
  const expected = (seconds: number, nanos: number) => new Date(seconds * 1000 + Math.floor(nanos / 1_000_000)).toISOString();
  for (const [seconds, nanos] of [[0, 0], [-1, 999_999_999], [86_399, 999_000_000], [86_400, 1_000_000], [253_402_300_799, 999_999_999], [253_402_300_800, 0], [-62_135_596_800, 0], [1_795_000_000, 5_123_456]]) {
    t.is(isoOfTimestamp({ seconds: BigInt(seconds!), nanos: nanos! }), expected(seconds!, nanos!), `${seconds}s ${nanos}ns`);
  }
  // Runs of one day and jumps between days (the date part is kept from the previous value).
  const seconds = fc.oneof(fc.integer({ min: -8_640_000_000, max: 8_640_000_000 }), fc.integer({ min: 1_795_000_000, max: 1_795_200_000 }));
  fc.assert(fc.property(fc.array(fc.tuple(seconds, fc.integer({ min: 0, max: 999_999_999 })), { minLength: 1, maxLength: 20 }), (values) => {
    for (const [s, n] of values) if (isoOfTimestamp({ seconds: BigInt(s), nanos: n }) !== expected(s, n)) return false;
    return true;
  }), { numRuns: 2000, seed: 1124 });
  t.pass();
});

test("strings, booleans and integers written inline read back as the same values (any text, negative numbers)", (t) => {
  fc.assert(fc.property(
    fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" }), fc.bigInt({ min: -(2n ** 53n) + 1n, max: 2n ** 53n - 1n }), fc.boolean(), fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
    (name, tag, id, isOwn, total) => {
      const text = renderJson(List, make(List, { items: [make(Item, { id, name, tags: [tag, name], isOwn })], total }));
      const out = JSON.parse(text) as { items: Array<Record<string, unknown>>; total: number };
      t.deepEqual([out.items[0]!.id, out.items[0]!.name, out.items[0]!.tags, out.items[0]!.isOwn, out.total], [Number(id), name, [tag, name], isOwn, total]);
    },
  ), { numRuns: 500 });
  t.pass();
});
