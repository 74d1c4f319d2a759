/**
 * Ids between the wire (int64 as bigint) and the application (numbers: PostgreSQL bigserial
 * values stay far below 2^53), converted here only.
 */

/** A request's id. */
export function idOf(wire: bigint): number {
  return Number(wire);
}

/** A request's optional id. */
export function optionalIdOf(wire: bigint | undefined): number | undefined {
  return wire === undefined ? undefined : Number(wire);
}

/** An id in a response. */
export function wireId(id: number): bigint {
  return BigInt(id);
}

/** An optional id in a response. */
export function optionalWireId(id: number | undefined): bigint | undefined {
  return id === undefined ? undefined : BigInt(id);
}
