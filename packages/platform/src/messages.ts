/**
 * Building response messages cheaply. Encoders of the resources that lists carry by the hundred
 * (collections, media) write complete message objects themselves (typed, so the compiler checks
 * that every field is there) instead of init objects that create() copies field by field.
 */
import type { Timestamp } from "@bufbuild/protobuf/wkt";

/** A google.protobuf.Timestamp message of a Date (or a value Date accepts). */
export function timestampOf(value: Date | string | number): Timestamp {
  const ms = value instanceof Date ? value.getTime() : new Date(value).getTime();
  const seconds = Math.floor(ms / 1000);
  return { $typeName: "google.protobuf.Timestamp", seconds: BigInt(seconds), nanos: (ms - seconds * 1000) * 1_000_000 };
}
