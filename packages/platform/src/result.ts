/** Building the OpResult every public RPC returns: the contract's JSON body as a Struct. */
import { create, toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import { OpResultSchema, type OpResult } from "@cms/contracts/common/v1/common_pb";

/** bigint ids become JSON numbers; Dates become ISO strings and undefined disappears as usual. */
function replacer(_key: string, value: unknown): unknown {
  return typeof value === "bigint" ? Number(value) : value;
}

export function result(body: Record<string, unknown>): OpResult {
  return create(OpResultSchema, { json: JSON.stringify(body, replacer) });
}

/** The body of an OpResult received from another service. */
export function bodyOf(res: OpResult): Record<string, unknown> {
  return res.json ? (JSON.parse(res.json) as Record<string, unknown>) : {};
}

/**
 * A google.protobuf.Value request field as plain JSON: undefined when the client omitted the
 * field, null when it sent null (nullable fields such as alias_id or description).
 */
export function jsonOf(value: Value | undefined): JsonValue | undefined {
  return value === undefined ? undefined : toJson(ValueSchema, value);
}
