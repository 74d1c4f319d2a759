/** Ids between the wire (int64 as bigint) and the application (numbers): converted here only. */

/** An int64 id from a request. */
export function idOf(v: bigint): number {
  return Number(v);
}

/** A list of int64 ids from a request. */
export function idsOf(v: readonly bigint[]): number[] {
  return v.map(Number);
}

/** An optional int64 id from a request (unset stays undefined). */
export function optionalIdOf(v: bigint | undefined): number | undefined {
  return v === undefined ? undefined : Number(v);
}

/** An id for a response. */
export function wireId(id: number): bigint {
  return BigInt(id);
}
