/**
 * The contract's JSON from a typed response message: one renderer, driven by the descriptors and
 * the (common.v1.field) options, for every operation. Keys are the proto field names (or
 * json_key); int64 values are JSON numbers; an absent field marked nullable is null, any other
 * absent optional field is left out; google.protobuf.Timestamp is ISO 8601 with milliseconds;
 * Struct, Value and ListValue are plain JSON; an inline message field merges its keys into the
 * parent; a FieldMask field with `selects` picks the rendered fields of a list's items.
 *
 * Each message type is compiled once (first use) from its descriptor into one function that
 * appends each present field's `"key":value` text; rendering builds the JSON text directly,
 * without an intermediate object tree.
 */
import { getOption, hasOption, toJson, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { ListValueSchema, StructSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import { field as fieldOption } from "@cms/contracts/common/v1/options_pb";

/** The (common.v1.field) options of a field, with their defaults. */
export function renderOptions(field: DescField): { nullable: boolean; key: string; inline: boolean; selects: string } {
  const o = hasOption(field, fieldOption) ? getOption(field, fieldOption) : undefined;
  return { nullable: o?.nullable ?? false, key: o?.jsonKey || field.name, inline: o?.inline ?? false, selects: o?.selects ?? "" };
}

/** JSON text of one present value of a field's element type. */
type ValueWriter = (value: unknown) => string;

interface Compiled {
  /** The message's members, each written as `,"key":value` ("" when none is present). */
  members(message: Record<string, unknown>): string;
  /** Field name -> [JSON key, value writer, value reader], for selected rendering. */
  byName: Map<string, { key: string; write: ValueWriter; read: (m: Record<string, unknown>) => unknown }>;
}

const compiled = new Map<string, Compiled>();

/** Seconds of 10000-01-01T00:00:00Z: from there on, toISOString writes an extended year. */
const YEAR_10000 = 253_402_300_800;
const two = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const three = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);
// The date part of the last day written: a list's timestamps mostly fall on few days.
let cachedDay = NaN;
let cachedDayText = "";

/**
 * ISO 8601 with milliseconds, as Date#toISOString writes it, without a Date per value: lists
 * render two timestamps per item, and toISOString cost ~2 µs each (bench/notes/overhead.md).
 */
export function isoOfTimestamp(ts: { seconds: bigint; nanos: number }): string {
  const seconds = Number(ts.seconds);
  const millis = Math.floor(ts.nanos / 1_000_000);
  if (!(seconds >= 0 && seconds < YEAR_10000) || !(millis >= 0 && millis < 1000)) return new Date(seconds * 1000 + millis).toISOString();
  const day = Math.floor(seconds / 86_400);
  if (day !== cachedDay) {
    cachedDayText = new Date(day * 86_400_000).toISOString().slice(0, 11);
    cachedDay = day;
  }
  const rest = seconds - day * 86_400;
  return `${cachedDayText}${two(Math.floor(rest / 3600))}:${two(Math.floor(rest / 60) % 60)}:${two(rest % 60)}.${three(millis)}Z`;
}

/** A message value that protobuf-es may hold unboxed (Struct as JsonObject, wrappers as scalars). */
const boxed = (v: unknown): v is Message => typeof v === "object" && v !== null && "$typeName" in v;

const writeString: ValueWriter = (v) => JSON.stringify(v);
const writeScalar: ValueWriter = (v) => (typeof v === "bigint" ? String(Number(v)) : typeof v === "string" ? JSON.stringify(v)
  : v instanceof Uint8Array ? `"${Buffer.from(v).toString("base64")}"` : JSON.stringify(v));

function scalarWriter(field: DescField): ValueWriter {
  return (field.fieldKind === "scalar" || field.fieldKind === "list") && field.scalar === 9 /* STRING */ ? writeString : writeScalar;
}

function enumWriter(field: DescField & { enum: { values: Array<{ number: number; name: string }> } }): ValueWriter {
  const names = new Map(field.enum.values.map((e) => [e.number, JSON.stringify(e.name)]));
  return (v) => names.get(v as number) ?? String(v);
}

function messageWriter(desc: DescMessage): ValueWriter {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp": return (v) => `"${isoOfTimestamp(v as { seconds: bigint; nanos: number })}"`;
    // A singular Struct field holds a JsonObject already; inside lists it is a message.
    case "google.protobuf.Struct": return (v) => JSON.stringify(boxed(v) ? toJson(StructSchema, v as never) : v);
    case "google.protobuf.Value": return (v) => JSON.stringify(toJson(ValueSchema, v as never));
    case "google.protobuf.ListValue": return (v) => JSON.stringify(toJson(ListValueSchema, v as never));
    case "google.protobuf.FieldMask": return (v) => JSON.stringify((v as { paths: string[] }).paths);
  }
  if (desc.typeName.startsWith("google.protobuf.") && desc.typeName.endsWith("Value")) {
    // Wrappers: unboxed in singular fields, messages elsewhere.
    return (v) => writeScalar(boxed(v) ? (v as unknown as { value: unknown }).value : v);
  }
  return (v) => objectOf(compile(desc).members(v as Record<string, unknown>));
}

/** An object's JSON text from its members (each with a leading comma). */
const objectOf = (members: string) => `{${members.slice(1)}}`;

function elementWriter(field: DescField): ValueWriter {
  switch (field.fieldKind) {
    case "scalar": return scalarWriter(field);
    case "enum": return enumWriter(field as never);
    case "message": return messageWriter(field.message);
    case "list": {
      const item = field.listKind === "message" ? messageWriter(field.message)
        : field.listKind === "enum" ? enumWriter(field as never)
        : scalarWriter(field);
      return (v) => {
        const list = v as unknown[];
        let out = "[";
        for (let i = 0; i < list.length; i++) out += (i ? "," : "") + item(list[i]);
        return `${out}]`;
      };
    }
    case "map": {
      const value = field.mapKind === "message" ? messageWriter(field.message) : field.mapKind === "enum" ? enumWriter(field as never) : writeScalar;
      return (v) => {
        const parts: string[] = [];
        for (const [k, x] of Object.entries(v as Record<string, unknown>)) parts.push(`${JSON.stringify(k)}:${value(x)}`);
        return `{${parts.join(",")}}`;
      };
    }
  }
}

/**
 * The expression that reads the field's value from a message `m`: undefined when absent (unset
 * explicit presence, or another oneof case). The compiled members function inlines it; `reader`
 * makes a function of it for the selected fields and the masks.
 */
function readExpression(field: DescField): string {
  const name = JSON.stringify(field.localName);
  const oneof = field.oneof?.localName;
  return oneof === undefined ? `m[${name}]` : `(m[${JSON.stringify(oneof)}]?.case === ${name} ? m[${JSON.stringify(oneof)}].value : undefined)`;
}

/** Reads the field's value from a message (see readExpression). */
function reader(field: DescField): (m: Record<string, unknown>) => unknown {
  return new Function("m", `return ${readExpression(field)};`) as (m: Record<string, unknown>) => unknown;
}

/**
 * The JSON text of a present value, as an expression of `v` in the compiled function: the common
 * scalars and timestamps inline, anything else through its writer (`w[i]`).
 */
function valueExpression(field: DescField, writer: number): string {
  if (field.fieldKind === "scalar") {
    switch (field.scalar) {
      case 9 /* STRING */: return "JSON.stringify(v)";
      case 8 /* BOOL */: return '(v ? "true" : "false")';
      case 5 /* INT32 */: case 13 /* UINT32 */: case 17 /* SINT32 */: case 7 /* FIXED32 */: case 15 /* SFIXED32 */: return '("" + v)';
      case 3 /* INT64 */: case 4 /* UINT64 */: case 18 /* SINT64 */: case 6 /* FIXED64 */: case 16 /* SFIXED64 */: return `(typeof v === "bigint" ? "" + Number(v) : w[${writer}](v))`;
    }
  }
  if (field.fieldKind === "message" && field.message.typeName === "google.protobuf.Timestamp") return '"\\"" + iso(v) + "\\""';
  return `w[${writer}](v)`;
}

/**
 * Compiles a message type into one function that writes its members. A list of a hundred items
 * called three closures and pushed a string per field, then joined; the compiled function reads
 * each field and appends its text in one place. The generated source holds only string literals
 * made with JSON.stringify (keys, property names) and indexes into `w`, the field writers.
 */
function compile(desc: DescMessage): Compiled {
  const known = compiled.get(desc.typeName);
  if (known) return known;
  const byName: Compiled["byName"] = new Map();
  // Registered before the fields are compiled, so that a recursive message type terminates (the
  // writers compile the types they hold when they first run, by then `members` is in place).
  const self: Compiled = { members: () => "", byName };
  compiled.set(desc.typeName, self);
  const masks = new Map<string, (m: Record<string, unknown>) => unknown>();
  for (const field of desc.fields) {
    const o = renderOptions(field);
    if (o.selects) masks.set(o.selects, reader(field));
  }
  const w: Array<(v: never) => string> = [];
  const source: string[] = ['let s = "", v;'];
  for (const field of desc.fields) {
    const o = renderOptions(field);
    if (o.selects) continue;
    const read = reader(field);
    const write = elementWriter(field);
    const key = `${JSON.stringify(o.key)}:`;
    byName.set(field.name, { key, write, read });
    source.push(`v = ${readExpression(field)};`);
    const member = JSON.stringify(`,${key}`);
    const mask = masks.get(field.name);
    if (mask && field.fieldKind === "list" && field.listKind === "message") {
      const item = field.message;
      w.push((m: Record<string, unknown>) => {
        const paths = (mask(m) as { paths: string[] } | undefined)?.paths;
        return paths ? `[${(read(m) as Message[]).map((x) => renderSelected(item, x as never, paths)).join(",")}]` : write(read(m));
      });
      source.push(`s += ${member} + w[${w.length - 1}](m);`);
      continue;
    }
    if (o.inline && field.fieldKind === "message") {
      const inner = field.message;
      w.push((v) => compile(inner).members(v as Record<string, unknown>));
      source.push(`if (v !== undefined) s += w[${w.length - 1}](v);`);
      continue;
    }
    w.push(write);
    source.push(`if (v !== undefined) s += ${member} + ${valueExpression(field, w.length - 1)};${o.nullable ? ` else s += ${JSON.stringify(`,${key}null`)};` : ""}`);
  }
  source.push("return s;");
  self.members = new Function("w", "iso", `return function members(m) { ${source.join("\n")} };`)(w, isoOfTimestamp) as Compiled["members"];
  return self;
}

/** Only the fields named by paths, in that order (a selecting FieldMask); a selected field is always present, null when absent. */
function renderSelected(desc: DescMessage, message: Record<string, unknown>, paths: readonly string[]): string {
  const { byName } = compile(desc);
  const parts: string[] = [];
  for (const path of paths) {
    const f = byName.get(path);
    if (!f) continue;
    const v = f.read(message);
    parts.push(f.key + (v === undefined ? "null" : f.write(v)));
  }
  return `{${parts.join(",")}}`;
}

/** The contract's JSON text of a response message. */
export function renderJson(desc: DescMessage, message: Message): string {
  return objectOf(compile(desc).members(message as unknown as Record<string, unknown>));
}

/** The contract's JSON object of a message (for embedding in a larger answer). */
export function renderObject(desc: DescMessage, message: Message): Record<string, unknown> {
  return JSON.parse(renderJson(desc, message)) as Record<string, unknown>;
}
