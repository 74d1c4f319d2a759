/** Identifier shapes shared by the services. */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a textual uuid (any version), so that storage never sees a malformed id. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}
