/**
 * The contract's JSON from a typed response message: one renderer, driven by the descriptors and
 * the (common.v1.field) options, for every operation. Keys are the proto field names (or
 * json_key); int64 values are JSON numbers; an absent field marked nullable is null, any other
 * absent optional field is left out; google.protobuf.Timestamp is ISO 8601 with milliseconds;
 * Struct, Value and ListValue are plain JSON; an inline message field merges its keys into the
 * parent; a FieldMask field with `selects` picks the rendered fields of a list's items.
 *
 * The plan of each message type is built once (first use) from its descriptor; rendering walks
 * the plan, not the descriptor.
 */
import { getOption, hasOption, toJson, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { ListValueSchema, StructSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import { field as fieldOption } from "@cms/contracts/common/v1/options_pb";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Obj = Record<string, Json>;

/** The (common.v1.field) options of a field, with their defaults. */
export function renderOptions(field: DescField): { nullable: boolean; key: string; inline: boolean; selects: string } {
  const o = hasOption(field, fieldOption) ? getOption(field, fieldOption) : undefined;
  return { nullable: o?.nullable ?? false, key: o?.jsonKey || field.name, inline: o?.inline ?? false, selects: o?.selects ?? "" };
}

/** Converts one present value of a field's element type to JSON. */
type ValueRenderer = (value: unknown) => Json;

interface FieldPlan {
  field: DescField;
  key: string;
  nullable: boolean;
  inline: boolean;
  /** Present in the oneof's {case, value} rather than as its own property. */
  oneof?: string;
  render: ValueRenderer;
  /** For a selecting FieldMask: the key of the list it selects in. */
  selects?: string;
}

interface MessagePlan {
  fields: FieldPlan[];
  /** Proto name of a list field -> the FieldMask field selecting its items' fields. */
  masks: Map<string, FieldPlan>;
  byName: Map<string, FieldPlan>;
}

const plans = new Map<string, MessagePlan>();

function isoOfTimestamp(ts: { seconds: bigint; nanos: number }): string {
  return new Date(Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1_000_000)).toISOString();
}

/**
 * bigint (int64 family) become numbers; every other scalar is already JSON-ready, except bytes,
 * which the contract has no use for in responses but are rendered as base64.
 */
const renderScalar: ValueRenderer = (v) => (typeof v === "bigint" ? Number(v) : v instanceof Uint8Array ? Buffer.from(v).toString("base64") : (v as Json));
const scalarRenderer = (): ValueRenderer => renderScalar;

/** A message value that protobuf-es may hold unboxed (Struct as JsonObject, wrappers as scalars). */
const boxed = (v: unknown): v is Message => typeof v === "object" && v !== null && "$typeName" in v;

function messageRenderer(desc: DescMessage): ValueRenderer {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp": return (v) => isoOfTimestamp(v as { seconds: bigint; nanos: number });
    // A singular Struct field holds a JsonObject already; inside lists it is a message.
    case "google.protobuf.Struct": return (v) => (boxed(v) ? toJson(StructSchema, v as never) : v) as Json;
    case "google.protobuf.Value": return (v) => toJson(ValueSchema, v as never) as Json;
    case "google.protobuf.ListValue": return (v) => toJson(ListValueSchema, v as never) as Json;
    case "google.protobuf.FieldMask": return (v) => (v as { paths: string[] }).paths;
  }
  if (desc.typeName.startsWith("google.protobuf.") && desc.typeName.endsWith("Value")) {
    // Wrappers: unboxed in singular fields, messages elsewhere.
    return (v) => {
      const x = boxed(v) ? (v as unknown as { value: unknown }).value : v;
      return (typeof x === "bigint" ? Number(x) : x) as Json;
    };
  }
  return (v) => renderObject(desc, v as Message);
}

function elementRenderer(field: DescField): ValueRenderer {
  switch (field.fieldKind) {
    case "scalar": return scalarRenderer();
    case "enum": return (v) => field.enum.values.find((e) => e.number === v)?.name ?? (v as number);
    case "message": return messageRenderer(field.message);
    case "list": {
      const item = field.listKind === "message" ? messageRenderer(field.message)
        : field.listKind === "enum" ? (v: unknown) => field.enum.values.find((e) => e.number === v)?.name ?? (v as number)
        : scalarRenderer();
      return (v) => (v as unknown[]).map(item);
    }
    case "map": {
      const value = field.mapKind === "message" ? messageRenderer(field.message) : scalarRenderer();
      return (v) => {
        const out: Obj = {};
        for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[k] = value(x);
        return out;
      };
    }
  }
}

function planOf(desc: DescMessage): MessagePlan {
  let plan = plans.get(desc.typeName);
  if (plan) return plan;
  plan = { fields: [], masks: new Map(), byName: new Map() };
  // Registered before the fields are planned, so that a recursive message type terminates.
  plans.set(desc.typeName, plan);
  for (const field of desc.fields) {
    const o = renderOptions(field);
    const fp: FieldPlan = {
      field, key: o.key, nullable: o.nullable, inline: o.inline && field.fieldKind === "message",
      oneof: field.oneof?.localName, render: elementRenderer(field),
    };
    if (o.selects) {
      fp.selects = o.selects;
      plan.masks.set(o.selects, fp);
    }
    plan.fields.push(fp);
    plan.byName.set(field.name, fp);
  }
  return plan;
}

/** The field's value as stored on the message, or undefined when it is absent. */
function valueOf(fp: FieldPlan, message: Record<string, unknown>): unknown {
  if (fp.oneof !== undefined) {
    const o = message[fp.oneof] as { case?: string; value?: unknown } | undefined;
    return o?.case === fp.field.localName ? o.value : undefined;
  }
  const v = message[fp.field.localName];
  // Implicit-presence scalars always have a value; explicit presence (proto3 optional, message
  // fields) is undefined when unset.
  return v;
}

function put(out: Obj, fp: FieldPlan, value: unknown): void {
  if (value === undefined) {
    if (fp.nullable) out[fp.key] = null;
    return;
  }
  if (fp.inline) {
    Object.assign(out, fp.render(value) as Obj);
    return;
  }
  out[fp.key] = fp.render(value);
}

/** Only the fields named by paths, in that order (a selecting FieldMask). */
function renderSelected(desc: DescMessage, message: Message, paths: readonly string[]): Obj {
  const plan = planOf(desc);
  const out: Obj = {};
  for (const path of paths) {
    const fp = plan.byName.get(path);
    if (!fp) continue;
    const value = valueOf(fp, message as unknown as Record<string, unknown>);
    // A selected field is always present in the answer: null when absent.
    if (value === undefined) out[fp.key] = null;
    else put(out, fp, value);
  }
  return out;
}

/** The contract's JSON object of a message (as a plain object, ready for JSON.stringify). */
export function renderObject(desc: DescMessage, message: Message): Obj {
  const plan = planOf(desc);
  const m = message as unknown as Record<string, unknown>;
  const out: Obj = {};
  for (const fp of plan.fields) {
    if (fp.selects !== undefined) continue;
    const value = valueOf(fp, m);
    const mask = plan.masks.get(fp.field.name);
    const paths = mask ? (valueOf(mask, m) as { paths: string[] } | undefined)?.paths : undefined;
    if (paths && fp.field.fieldKind === "list" && fp.field.listKind === "message") {
      const item = fp.field.message;
      out[fp.key] = (value as Message[]).map((x) => renderSelected(item, x, paths));
      continue;
    }
    put(out, fp, value);
  }
  return out;
}

/** The contract's JSON text of a response message. */
export function renderJson(desc: DescMessage, message: Message): string {
  return JSON.stringify(renderObject(desc, message));
}
