/**
 * Collaboration rules as plain functions: which collections take invites, permission defaults
 * and merging, and the invite caps (15 per rolling hour, 50 per rolling 24 hours per inviter,
 * 20 pending per collection). No I/O here.
 */
import { AppError } from "@cms/platform";
import type { AccessLevel } from "./rules.js";

export interface Permissions { can_upload: boolean; can_edit: boolean; can_delete: boolean }
export type PermissionPatch = Partial<Permissions>;

/** An invite's state: pending until the invitee answers. */
export type InviteStatus = "pending" | "accepted" | "declined";

/** A row of collaborators: an invite, or (accepted) a collaborator. */
export interface CollaboratorRow extends Permissions {
  collection_id: number;
  user_id: string;
  inviter_user_id: string;
  status: InviteStatus;
  created_at: Date;
  responded_at: Date | null;
}

export const DEFAULT_INVITE_PERMISSIONS: Readonly<Permissions> = Object.freeze({ can_upload: true, can_edit: false, can_delete: false });

export const INVITE_CAPS = Object.freeze({ perHour: 15, perDay: 50, pendingPerCollection: 20 });
export type InviteCaps = { perHour: number; perDay: number; pendingPerCollection: number };

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** Only restricted and private collections take invites. */
export function acceptsInvites(level: AccessLevel): boolean {
  return level === "restricted" || level === "private";
}

/** The flags of an invite: the contract's defaults for what the request leaves out. */
export function invitePermissions(input: PermissionPatch): Permissions {
  return {
    can_upload: input.can_upload ?? DEFAULT_INVITE_PERMISSIONS.can_upload,
    can_edit: input.can_edit ?? DEFAULT_INVITE_PERMISSIONS.can_edit,
    can_delete: input.can_delete ?? DEFAULT_INVITE_PERMISSIONS.can_delete,
  };
}

/** update_permissions: at least one flag must be sent; omitted flags stay unchanged. */
export function mergePermissions(current: Permissions, patch: PermissionPatch): Permissions {
  if (patch.can_upload === undefined && patch.can_edit === undefined && patch.can_delete === undefined) {
    throw new AppError("invalid_request", "Send at least one of can_upload, can_edit or can_delete; omitted flags stay unchanged.");
  }
  return {
    can_upload: patch.can_upload ?? current.can_upload,
    can_edit: patch.can_edit ?? current.can_edit,
    can_delete: patch.can_delete ?? current.can_delete,
  };
}

export function samePermissions(a: Permissions, b: Permissions): boolean {
  return a.can_upload === b.can_upload && a.can_edit === b.can_edit && a.can_delete === b.can_delete;
}

/** A username as typed by a client: optional leading @, case-insensitive (usernames are lowercase). */
export function normalizeUsername(username: string): string {
  return username.trim().replace(/^@/, "").toLowerCase();
}

export type InviteCapName = "pending_per_collection" | "invites_per_24_hours" | "invites_per_hour";

export interface InviteCapBreach {
  cap: InviteCapName;
  detail: string;
  /** Seconds until every time-based cap lets one more invite through; absent when waiting does not help. */
  retryAfterSeconds?: number;
}

export interface InviteCapInput {
  now: Date;
  /** When the inviter sent invites (revoked and declined ones included); older than 24 h may be left out. */
  sentAt: readonly Date[];
  /** Pending invites on the collection now, the invitee's own excluded. */
  pendingOnCollection: number;
}

/** Seconds until fewer than `cap` of the stamps fall inside the window ending now. */
function secondsUntilBelow(stamps: number[], cap: number, windowMs: number, now: number): number {
  // stamps: inside the window, ascending. The (n - cap + 1)-th oldest must leave the window.
  const leaving = stamps[stamps.length - cap]!;
  return Math.max(1, Math.ceil((leaving + windowMs - now) / 1000));
}

/**
 * Which cap one more invite would breach, or undefined. The pending cap is reported first
 * (waiting does not lift it), then the 24-hour cap, then the hourly cap; retryAfterSeconds is
 * the wait until all breached time-based caps let an invite through.
 */
export function inviteCapBreach(input: InviteCapInput, caps: InviteCaps = INVITE_CAPS): InviteCapBreach | undefined {
  const now = input.now.getTime();
  const inDay = input.sentAt.map((d) => d.getTime()).filter((t) => t > now - DAY_MS && t <= now).sort((a, b) => a - b);
  const inHour = inDay.filter((t) => t > now - HOUR_MS);
  const breaches: InviteCapBreach[] = [];
  if (input.pendingOnCollection >= caps.pendingPerCollection) {
    breaches.push({
      cap: "pending_per_collection",
      detail: `Invite cap reached: at most ${caps.pendingPerCollection} pending invites per collection. Revoke a pending invite or wait until one is answered.`,
    });
  }
  let retry = 0;
  if (inDay.length >= caps.perDay) {
    retry = Math.max(retry, secondsUntilBelow(inDay, caps.perDay, DAY_MS, now));
    breaches.push({ cap: "invites_per_24_hours", detail: `Invite cap reached: at most ${caps.perDay} invites per rolling 24 hours (revoked ones count).` });
  }
  if (inHour.length >= caps.perHour) {
    retry = Math.max(retry, secondsUntilBelow(inHour, caps.perHour, HOUR_MS, now));
    breaches.push({ cap: "invites_per_hour", detail: `Invite cap reached: at most ${caps.perHour} invites per rolling hour (revoked ones count).` });
  }
  const first = breaches[0];
  if (!first) return undefined;
  if (first.cap === "pending_per_collection") return first;
  return { ...first, detail: `${first.detail} Retry in ${retry} s.`, retryAfterSeconds: retry };
}

/** The error a breach gives: 429 rate_limited naming the cap. */
export function capError(b: InviteCapBreach): AppError {
  return new AppError("rate_limited", b.detail, {
    cap: b.cap,
    ...(b.retryAfterSeconds !== undefined ? { retry_after_seconds: b.retryAfterSeconds } : {}),
  });
}
