/**
 * Rules for publish aliases: the handle's shape, reserved names, plan caps and what a caller may
 * follow. Plain functions that throw the contract's errors; no storage here.
 */
import { AppError } from "@cms/platform/errors";
import { reservedMatch } from "./reserved-names.js";

export type Plan = "free" | "paid" | "founding";

/** The contract's handle: 1 to 63 characters of a-z, 0-9, "_" and "-", without a leading @. */
export const HANDLE_PATTERN = /^[a-z0-9_-]{1,63}$/;

/** Aliases a plan may hold, beside the primary username (founding is at least paid). */
export const ALIAS_CAPS: Readonly<Record<Plan, number>> = { free: 1, paid: 5, founding: 5 };

/** A handle as the caller gave it must already be valid; nothing is silently rewritten. */
export function validateHandle(handle: string): string {
  if (typeof handle !== "string" || handle.length === 0) {
    throw new AppError("invalid_request", "handle is required: 1 to 63 characters of a-z, 0-9, _ and -.", { field: "handle" });
  }
  if (handle.startsWith("@")) {
    throw new AppError("invalid_request", "Give the handle without a leading @.", { field: "handle" });
  }
  if (!HANDLE_PATTERN.test(handle)) {
    throw new AppError("invalid_request", "handle must be 1 to 63 characters of lowercase a-z, 0-9, _ and -.", { field: "handle" });
  }
  return handle;
}

/** Refuses reserved names on every plan, naming the class of the reserved word. */
export function assertNotReserved(handle: string): void {
  const match = reservedMatch(handle);
  if (match) {
    throw new AppError("name_reserved", `The handle "${handle}" is reserved (${match.class} name "${match.word}"); choose another one.`, {
      class: match.class,
      field: "handle",
    });
  }
}

/** The alias cap of a plan; an unknown plan gets the free cap. */
export function aliasCap(plan: string): number {
  return ALIAS_CAPS[plan as Plan] ?? ALIAS_CAPS.free;
}

/** Refuses one more alias when the caller already holds `current` (the primary username is not counted). */
export function assertBelowAliasCap(plan: string, current: number): void {
  const max = aliasCap(plan);
  if (current >= max) {
    throw new AppError("alias_limit_reached", `The ${plan} plan allows ${max} alias${max === 1 ? "" : "es"} and you already have ${current}.`, {
      current,
      max,
    });
  }
}

/** A handle somebody else (or the caller's own primary username or alias) already uses. */
export function handleTaken(handle: string): AppError {
  // The contract's error table has no conflict code; a taken handle is a request that cannot be
  // carried out as sent (schema.get's decisions say so).
  return new AppError("invalid_request", `The handle "${handle}" is already taken; choose another.`, { field: "handle" });
}

/** Nobody follows their own handles. */
export function assertNotOwnHandle(callerId: string, ownerId: string): void {
  if (callerId === ownerId) {
    throw new AppError("invalid_request", "You cannot follow one of your own handles.", { field: "alias_id" });
  }
}

export interface PageRequest { limit?: number; offset?: number }
export interface Page { limit: number; offset: number; /** The request named limit or offset. */ explicit: boolean }

export const FOLLOWING_DEFAULT_LIMIT = 100;
export const FOLLOWING_MAX_LIMIT = 500;

/** Paging of aliases.following.list: limit 1-500 (default 100), offset >= 0 (default 0). */
export function followingPage(req: PageRequest): Page {
  const { limit, offset } = req;
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > FOLLOWING_MAX_LIMIT)) {
    throw new AppError("invalid_request", `limit must be an integer from 1 to ${FOLLOWING_MAX_LIMIT}.`, { field: "limit" });
  }
  if (offset !== undefined && (!Number.isInteger(offset) || offset < 0)) {
    throw new AppError("invalid_request", "offset must be an integer of at least 0.", { field: "offset" });
  }
  return { limit: limit ?? FOLLOWING_DEFAULT_LIMIT, offset: offset ?? 0, explicit: limit !== undefined || offset !== undefined };
}
