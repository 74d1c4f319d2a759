/** google.protobuf.Value request fields as plain JSON. */
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";

/**
 * A google.protobuf.Value request field as plain JSON: undefined when the client omitted the
 * field, null when it sent null (nullable fields such as alias_id or description).
 */
export function jsonOf(value: Value | undefined): JsonValue | undefined {
  return value === undefined ? undefined : toJson(ValueSchema, value);
}
