/** Rules for profile.update: tag shortcuts and the default publishing alias. */
import { AppError } from "@cms/platform/errors";
import { isUuid } from "@cms/platform/ids";

export const MAX_PROFILE_TAGS = 20;
export const MAX_TAG_LENGTH = 50;

/**
 * The caller's tag shortcuts: an array of 1-50 character lowercase strings, at most 20 once
 * duplicates are dropped (first occurrence wins, order kept). Surrounding whitespace is trimmed.
 */
export function normaliseProfileTags(value: unknown): string[] {
  if (!Array.isArray(value)) {
    throw new AppError("invalid_request", "available_tags must be an array of strings.", { field: "available_tags" });
  }
  const out: string[] = [];
  for (const item of value) {
    if (typeof item !== "string") {
      throw new AppError("invalid_request", "available_tags must contain strings only.", { field: "available_tags" });
    }
    const tag = item.trim();
    if (tag.length < 1 || tag.length > MAX_TAG_LENGTH) {
      throw new AppError("invalid_request", `Each tag in available_tags must be 1 to ${MAX_TAG_LENGTH} characters.`, { field: "available_tags" });
    }
    if (tag !== tag.toLowerCase()) {
      throw new AppError("invalid_request", `Tags are lowercase: "${item}" has upper-case letters.`, { field: "available_tags" });
    }
    if (!out.includes(tag)) out.push(tag);
  }
  if (out.length > MAX_PROFILE_TAGS) {
    throw new AppError("invalid_request", `available_tags holds at most ${MAX_PROFILE_TAGS} tags.`, { field: "available_tags" });
  }
  return out;
}

/** default_alias_id: a uuid sets it, null clears it. */
export function parseDefaultAliasId(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== "string" || !isUuid(value)) {
    throw new AppError("invalid_request", "default_alias_id must be the uuid of one of your aliases, or null.", { field: "default_alias_id" });
  }
  return value.toLowerCase();
}

/** The text fields: an empty or blank string clears them. */
export function normaliseProfileText(value: string): string | null {
  const t = value.trim();
  return t.length ? t : null;
}
