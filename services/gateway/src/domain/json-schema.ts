/**
 * JSON Schemas of operation requests, derived from the request messages: field names and types
 * from the descriptor, lengths, ranges, enums, patterns and requiredness from the buf.validate
 * rules, and the JSON shape of google.protobuf.Value fields from the common.v1.field option.
 * These schemas validate requests at the gateway and are what operation.describe, schema.get
 * and the MCP tool list publish.
 */
import { ScalarType, getOption, hasOption, isFieldSet, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { field as validateField, StringRulesSchema, type FieldRules } from "@cms/contracts/buf/validate/validate_pb";
import { field as fieldOption } from "@cms/contracts/common/v1/options_pb";

export type JsonSchema = Record<string, unknown>;

const INT32 = { minimum: -2147483648, maximum: 2147483647 };
const UINT32 = { minimum: 0, maximum: 4294967295 };
const SAFE_INT = { minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER };

function numberBounds(rules: { greaterThan: { case?: string; value?: unknown }; lessThan: { case?: string; value?: unknown }; in?: unknown[] }, out: JsonSchema) {
  const g = rules.greaterThan;
  if (g.case === "gte") out.minimum = Number(g.value);
  if (g.case === "gt") out.exclusiveMinimum = Number(g.value);
  const l = rules.lessThan;
  if (l.case === "lte") out.maximum = Number(l.value);
  if (l.case === "lt") out.exclusiveMaximum = Number(l.value);
  if (rules.in?.length) out.enum = rules.in.map(Number);
}

/** Schema of one value (not the list around it) under the given rules. */
function scalarSchema(scalar: ScalarType, rules: FieldRules | undefined): JsonSchema {
  const r = rules?.type;
  switch (scalar) {
    case ScalarType.STRING: {
      const s: JsonSchema = { type: "string" };
      if (r?.case === "string") {
        const v = r.value;
        if (isFieldSet(v, StringRulesSchema.field.minLen)) s.minLength = Number(v.minLen);
        if (isFieldSet(v, StringRulesSchema.field.maxLen)) s.maxLength = Number(v.maxLen);
        if (isFieldSet(v, StringRulesSchema.field.len)) s.minLength = s.maxLength = Number(v.len);
        if (v.pattern) s.pattern = v.pattern;
        if (v.in.length) s.enum = [...v.in];
        if (v.prefix) s.pattern = `^${v.prefix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`;
        switch (v.wellKnown.case) {
          case "uuid": if (v.wellKnown.value) s.format = "uuid"; break;
          case "email": if (v.wellKnown.value) s.format = "email"; break;
          case "uri": if (v.wellKnown.value) s.format = "uri"; break;
          case "hostname": if (v.wellKnown.value) s.format = "hostname"; break;
        }
      }
      return s;
    }
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.INT32: case ScalarType.SINT32: case ScalarType.SFIXED32: {
      const s: JsonSchema = { type: "integer", ...INT32 };
      if (r?.case === "int32" || r?.case === "sint32" || r?.case === "sfixed32") numberBounds(r.value, s);
      return s;
    }
    case ScalarType.UINT32: case ScalarType.FIXED32: {
      const s: JsonSchema = { type: "integer", ...UINT32 };
      if (r?.case === "uint32" || r?.case === "fixed32") numberBounds(r.value, s);
      return s;
    }
    case ScalarType.INT64: case ScalarType.SINT64: case ScalarType.SFIXED64: case ScalarType.UINT64: case ScalarType.FIXED64: {
      const s: JsonSchema = { type: "integer", ...SAFE_INT };
      if (scalar === ScalarType.UINT64 || scalar === ScalarType.FIXED64) s.minimum = 0;
      if (r && (r.case === "int64" || r.case === "sint64" || r.case === "sfixed64" || r.case === "uint64" || r.case === "fixed64")) numberBounds(r.value, s);
      return s;
    }
    case ScalarType.DOUBLE: case ScalarType.FLOAT: {
      const s: JsonSchema = { type: "number" };
      if (r?.case === "double" || r?.case === "float") numberBounds(r.value, s);
      return s;
    }
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
  }
}

function optionsOf(field: DescField) {
  return hasOption(field, fieldOption) ? getOption(field, fieldOption) : undefined;
}

function rulesOf(field: DescField): FieldRules | undefined {
  return hasOption(field, validateField) ? getOption(field, validateField) : undefined;
}

function valueSchema(field: DescField, rules: FieldRules | undefined, seen: Set<string>): JsonSchema {
  const opt = optionsOf(field);
  switch (field.fieldKind) {
    case "scalar":
      return scalarSchema(field.scalar, rules);
    case "enum":
      return { type: "string", enum: field.enum.values.map((v) => v.name) };
    case "message":
      return messageValueSchema(field.message, opt?.jsonSchema, seen);
    case "list": {
      const itemRules = rules?.type.case === "repeated" ? rules.type.value.items : undefined;
      const items = field.listKind === "scalar" ? scalarSchema(field.scalar, itemRules)
        : field.listKind === "enum" ? { type: "string", enum: field.enum.values.map((v) => v.name) }
        : messageValueSchema(field.message, undefined, seen);
      const s: JsonSchema = { type: "array", items };
      if (rules?.type.case === "repeated") {
        const rr = rules.type.value;
        if (rr.minItems) s.minItems = Number(rr.minItems);
        if (rr.maxItems) s.maxItems = Number(rr.maxItems);
        if (rr.unique) s.uniqueItems = true;
      }
      return s;
    }
    case "map":
      return { type: "object" };
  }
}

function messageValueSchema(message: DescMessage, jsonSchema: string | undefined, seen: Set<string>): JsonSchema {
  if (jsonSchema) return JSON.parse(jsonSchema) as JsonSchema;
  switch (message.typeName) {
    case "google.protobuf.Value": return {};
    case "google.protobuf.Struct": return { type: "object" };
    case "google.protobuf.ListValue": return { type: "array" };
    case "google.protobuf.Timestamp": return { type: "string", format: "date-time" };
  }
  return requestSchema(message, seen);
}

/**
 * A field is required when the client must send it: implicit presence (a proto3 singular
 * field without `optional`), an explicit `(buf.validate.field).required`, or a list with
 * min_items >= 1.
 */
export function isRequired(field: DescField): boolean {
  const rules = rulesOf(field);
  if (rules?.required) return true;
  if (field.fieldKind === "list") return rules?.type.case === "repeated" && Number(rules.type.value.minItems) >= 1;
  if (field.fieldKind === "scalar" || field.fieldKind === "enum") return field.presence === 2 /* IMPLICIT */;
  return false;
}

export function requestSchema(message: DescMessage, seen = new Set<string>()): JsonSchema {
  if (seen.has(message.typeName)) return { type: "object" };
  seen.add(message.typeName);
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const field of message.fields) {
    const rules = rulesOf(field);
    const s = valueSchema(field, rules, seen);
    const opt = optionsOf(field);
    if (opt?.description) s.description = opt.description;
    if (opt?.defaultJson) s.default = JSON.parse(opt.defaultJson);
    properties[field.name] = s;
    if (isRequired(field)) required.push(field.name);
  }
  seen.delete(message.typeName);
  const schema: JsonSchema = { type: "object", properties, additionalProperties: false };
  if (required.length) schema.required = required;
  return schema;
}

/** JSON Schema type of a response scalar. */
function responseScalarSchema(scalar: ScalarType): JsonSchema {
  switch (scalar) {
    case ScalarType.STRING: return { type: "string" };
    case ScalarType.BOOL: return { type: "boolean" };
    case ScalarType.BYTES: return { type: "string", contentEncoding: "base64" };
    case ScalarType.DOUBLE: case ScalarType.FLOAT: return { type: "number" };
    default: return { type: "integer" };
  }
}

function responseMessageSchema(message: DescMessage, seen: Set<string>): JsonSchema {
  switch (message.typeName) {
    case "google.protobuf.Timestamp": return { type: "string", format: "date-time" };
    case "google.protobuf.Struct": return { type: "object" };
    case "google.protobuf.Value": return {};
    case "google.protobuf.ListValue": return { type: "array" };
    case "google.protobuf.StringValue": return { type: "string" };
    case "google.protobuf.BoolValue": return { type: "boolean" };
    case "google.protobuf.DoubleValue": case "google.protobuf.FloatValue": return { type: "number" };
    case "google.protobuf.Int32Value": case "google.protobuf.Int64Value": case "google.protobuf.UInt32Value": case "google.protobuf.UInt64Value":
      return { type: "integer" };
  }
  return responseSchema(message, seen);
}

function responseValueSchema(field: DescField, seen: Set<string>): JsonSchema {
  switch (field.fieldKind) {
    case "scalar": return responseScalarSchema(field.scalar);
    case "enum": return { type: "string", enum: field.enum.values.map((v) => v.name) };
    case "message": return responseMessageSchema(field.message, seen);
    case "list": {
      const items = field.listKind === "message" ? responseMessageSchema(field.message, seen)
        : field.listKind === "enum" ? { type: "string", enum: field.enum.values.map((v) => v.name) }
        : responseScalarSchema(field.scalar);
      return { type: "array", items };
    }
    case "map":
      return { type: "object", additionalProperties: field.mapKind === "message" ? responseMessageSchema(field.message, seen) : field.mapKind === "enum" ? { type: "string" } : responseScalarSchema(field.scalar) };
  }
}

/** `schema` that also admits null. */
function orNull(schema: JsonSchema): JsonSchema {
  if (typeof schema.type === "string") return { ...schema, type: [schema.type, "null"] };
  if (!Object.keys(schema).length) return schema;
  return { anyOf: [schema, { type: "null" }] };
}

/**
 * JSON Schema of the contract's JSON that a response message renders to (services/gateway
 * render.ts): the same descriptors and (common.v1.field) options, so the published schema and
 * the rendered answers cannot disagree. A key is required when it is always present: scalars
 * without explicit presence, lists, maps, nullable fields, and message fields declared without
 * `optional` outside a oneof (the proto's way of saying "always set"); the keys of an inline
 * message are required in the parent when the inline field itself is.
 */
export function responseSchema(message: DescMessage, seen = new Set<string>()): JsonSchema {
  if (seen.has(message.typeName)) return { type: "object" };
  seen.add(message.typeName);
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  const selected = new Set<string>();
  for (const field of message.fields) {
    const opt = optionsOf(field);
    if (opt?.selects) selected.add(opt.selects);
  }
  for (const field of message.fields) {
    const opt = optionsOf(field);
    if (opt?.selects) continue;
    const declaredOptional = Boolean(field.proto.proto3Optional) || field.oneof !== undefined;
    if (opt?.inline && field.fieldKind === "message") {
      // Its keys appear in this object when the field is set.
      const inner = responseSchema(field.message, seen);
      Object.assign(properties, inner.properties as object);
      if (!declaredOptional) required.push(...((inner.required as string[] | undefined) ?? []));
      continue;
    }
    let s = responseValueSchema(field, seen);
    if (selected.has(field.name) && s.type === "array") {
      // Items may carry only the fields the request selected.
      const { required: _r, ...items } = s.items as JsonSchema;
      s = { ...s, items };
    }
    if (opt?.nullable) s = orNull(s);
    if (opt?.description) s.description = opt.description;
    const key = opt?.jsonKey || field.name;
    properties[key] = s;
    const alwaysPresent = field.fieldKind === "list" || field.fieldKind === "map" || Boolean(opt?.nullable)
      || ((field.fieldKind === "scalar" || field.fieldKind === "enum") && field.presence === 2 /* IMPLICIT */ && !field.oneof)
      || (field.fieldKind === "message" && !declaredOptional);
    if (alwaysPresent) required.push(key);
  }
  seen.delete(message.typeName);
  const schema: JsonSchema = { type: "object", properties };
  if (required.length) schema.required = required;
  return schema;
}
