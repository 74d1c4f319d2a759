/**
 * The authorization matrix, generated from the op registry: every operation called by the owner
 * of the resource it names, by a collaborator lacking each permission flag, by a collaborator with
 * every flag, by a stranger, anonymously, and with the owner's token lacking the op's scopes.
 *
 * Each operation gets its own owner, collection and (per role) a fresh media item, so that one
 * role's success cannot change what the next one sees. Bodies are derived from the op's request
 * schema: required fields, ids pointing at the owner's collection and media, `dry_run: true`
 * where the op has it. Expectations come from the registry's metadata (anonymous, admin_only,
 * scopes) and the fields the request names (a collection or media id is a resource the caller
 * must own or share), plus the contract's one rule that ties flags to operations (can_upload for
 * media.create, can_edit for media.update, can_delete for media.delete).
 */
import test from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import fc from "fast-check";
import type { OpEntry } from "@cms/gateway/registry";
import { opRegistry as registry, startTestSystem, type CallResult, type TestSystem, type TestUser } from "../helpers/system.js";

const FLAGS = ["can_upload", "can_edit", "can_delete"] as const;
type Flag = (typeof FLAGS)[number];
type Role = "owner" | `without_${Flag}` | "collaborator" | "stranger" | "anonymous" | "missing_scope";

/** The contract's rule for media operations on a collection: the flag each needs. */
const CONTRACT_FLAG: Record<string, Flag> = { "media.create": "can_upload", "media.update": "can_edit", "media.delete": "can_delete" };

const ALL_SCOPES = ["collections:read", "collections:write", "collections:delete", "media:read", "media:write", "media:delete", "profile:write"];

/** A marker in every owner's data, and one in the stranger's: each must stay with its owner. */
const OWNER_MARK = `ownmark${randomBytes(6).toString("hex")}`;
const STRANGER_MARK = `strmark${randomBytes(6).toString("hex")}`;

interface Target { owner: TestUser; collectionId: number; mediaIds: Partial<Record<Role, number>> }

/** A value of a required field that the schema accepts, pointing at the target where it names one. */
function valueFor(op: OpEntry, field: string, schema: Record<string, any>, target: Target, role: Role): unknown {
  const mediaId = target.mediaIds[role]!;
  if (/collection_id$/.test(field)) return target.collectionId;
  if (field === "ids" || field === "collection_ids") return schema.type === "string" ? String(target.collectionId) : [target.collectionId];
  if (field === "ordered_ids") return op.name.startsWith("collections.") ? [target.collectionId] : [mediaId];
  if (field === "media_id") return mediaId;
  if (field === "media_ids" || field === "browse_results") return [mediaId];
  if (/user_id$/.test(field)) return target.owner.userId;
  if (field === "username" || field === "handle") return target.owner.username;
  if (field === "content_base64") return Buffer.from("hi").toString("base64");
  if (field === "content_length") return 2;
  const s = Array.isArray(schema.type) ? { ...schema, type: schema.type.find((t: string) => t !== "null") } : schema.oneOf ? schema.oneOf[0] : schema;
  if (s.enum) return s.enum[0];
  switch (s.type) {
    case "boolean": return false;
    case "integer": case "number": return s.minimum ?? 1;
    case "array": return s.minItems ? [valueFor(op, field, s.items ?? {}, target, role)] : [];
    case "object": return {};
    case "string":
      if (s.format === "uuid") return randomUUID();
      if (s.format === "uri") return "https://example.invalid/a.jpg";
      if (s.pattern === "^[a-fA-F0-9]{64}$") return "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4";
      if (s.pattern) return fc.sample(fc.stringMatching(new RegExp(s.pattern)).filter((v) => v.length >= (s.minLength ?? 0) && v.length <= (s.maxLength ?? 200)), { seed: 1, numRuns: 1 })[0];
      return "x".repeat(Math.max(1, s.minLength ?? 1));
  }
  return undefined;
}

/** The body of `op` for `role`: required fields, ids of the target wherever the op takes them. */
function bodyFor(op: OpEntry, target: Target, role: Role): Record<string, unknown> {
  const props = op.requestSchema.properties as Record<string, Record<string, any>>;
  const required = new Set((op.requestSchema.required as string[] | undefined) ?? []);
  const body: Record<string, unknown> = { op: op.name };
  for (const [field, schema] of Object.entries(props)) {
    const names = ID_FIELD.test(field);
    if (!required.has(field) && !names) continue;
    if (field === "parent_collection_id" && op.name === "collections.list") continue;
    const v = valueFor(op, field, schema, target, role);
    if (v !== undefined) body[field] = v;
  }
  if ("dry_run" in props) body.dry_run = true;
  if (op.name === "media.upload") body.sha256 = undefined;
  return body;
}

const ID_FIELD = /collection_id$|^ids$|^collection_ids$|^media_ids?$|^ordered_ids$/;

/**
 * The request names a resource of the owner: a collection or media id field (not a text that
 * merely holds ids, as bookmarks.create's collection_ids string; not a filter of a listing).
 */
function targets(op: OpEntry): boolean {
  const props = op.requestSchema.properties as Record<string, Record<string, unknown>>;
  return Object.entries(props).some(([f, s]) => ID_FIELD.test(f) && f !== "parent_collection_id" && s.type !== "string")
    && op.name !== "collections.list";
}

let sys: TestSystem;
let stranger: TestUser;
const collaborators = {} as Record<"collaborator" | `without_${Flag}`, TestUser>;
const results = new Map<string, Partial<Record<Role, CallResult>>>();

const ROLES: Role[] = ["anonymous", "missing_scope", "stranger", ...FLAGS.map((f) => `without_${f}` as const), "collaborator", "owner"];

/**
 * An owner with a restricted collection shared with the four collaborators, and a media item
 * per role (one for all roles when `shared`: operations that change nothing share it).
 */
async function newTarget(shared: boolean): Promise<Target> {
  const owner = await sys.user({ plan: "paid" });
  const c = await sys.must(owner.token, { op: "collections.create", name: `owned ${OWNER_MARK}`, description: OWNER_MARK, share_access_level: "restricted" });
  const target: Target = { owner, collectionId: c.collection.id, mediaIds: {} };
  await Promise.all(Object.entries(collaborators).map(async ([role, user]) => {
    const flags = Object.fromEntries(FLAGS.map((f) => [f, role !== `without_${f}`]));
    await sys.must(owner.token, { op: "collaborators.invite", collection_id: target.collectionId, username: user.username, ...flags });
    await sys.must(await sys.token(user.username), { op: "collaborators.invite.accept", collection_id: target.collectionId, inviter_user_id: owner.userId });
  }));
  const note = () => sys.must(owner.token, { op: "media.text_note.add", collection_id: target.collectionId, name: `note ${OWNER_MARK}`, text: OWNER_MARK }).then((r) => r.media.id as number);
  if (shared) {
    const id = await note();
    for (const role of ROLES) target.mediaIds[role] = id;
  } else {
    const ids = await Promise.all(ROLES.map(note));
    ROLES.forEach((role, i) => { target.mediaIds[role] = ids[i]; });
  }
  return target;
}

/** Calls `op` as `role`, with a token minted for the call (mcp.revoke_session revokes the caller's). */
async function callAs(op: OpEntry, role: Role, target: Target): Promise<CallResult> {
  const body = bodyFor(op, target, role);
  switch (role) {
    case "owner": return sys.call(target.owner.token, body);
    case "stranger": return sys.call(await sys.token(stranger.username), body);
    case "anonymous": return sys.call(undefined, body);
    case "missing_scope": return sys.call(await sys.token(target.owner.username, ALL_SCOPES.filter((s) => !op.scopes.includes(s))), body);
    default: return sys.call(await sys.token(collaborators[role].username), body);
  }
}

test.before(async (t) => {
  t.timeout(240_000);
  sys = await startTestSystem();
  stranger = await sys.user({ plan: "paid" });
  const own = await sys.must(stranger.token, { op: "collections.create", name: `stranger's ${STRANGER_MARK}`, share_access_level: "restricted" });
  await sys.must(stranger.token, { op: "media.text_note.add", collection_id: own.collection.id, name: STRANGER_MARK, text: STRANGER_MARK });
  for (const role of ["collaborator", ...FLAGS.map((f) => `without_${f}` as const)] as const) collaborators[role] = await sys.user();
  // Operations that change nothing share one target; each mutating one gets its own. A few
  // operations at a time; within one, the roles one after the other, the owner last.
  const readTarget = await newTarget(true);
  const queue = [...registry.all()];
  await Promise.all(Array.from({ length: 4 }, async () => {
    for (let op = queue.shift(); op; op = queue.shift()) {
      const target = op.mutating ? await newTarget(false) : readTarget;
      const row: Partial<Record<Role, CallResult>> = {};
      for (const role of ROLES) row[role] = await callAs(op, role, target);
      results.set(op.name, row);
    }
  }));
});
test.after.always(async () => { await sys?.stop(); });

/** What went wrong with one answer, or undefined. */
type Check = (op: OpEntry, r: CallResult, row: Partial<Record<Role, CallResult>>) => string | undefined;

const isError = (r: CallResult, status: number, code: string) => r.status === status && r.body?.error === code;

const CHECKS: Record<Role, Check> = {
  anonymous: (op, r) => op.anonymous ? (r.status === 401 ? "an anonymous operation refused without a token" : undefined)
    : isError(r, 401, "unauthorized") ? undefined : "expected 401 unauthorized without a token",
  missing_scope: (op, r) => {
    if (op.adminOnly) return isError(r, 403, "forbidden") ? undefined : "expected 403 forbidden (admin only)";
    if (!op.scopes.length) return r.body?.error === "insufficient_scope" ? "an operation without scopes refused for a scope" : undefined;
    if (!isError(r, 403, "insufficient_scope")) return `expected 403 insufficient_scope (needs ${op.scopes.join(", ")})`;
    const need = [r.body.need].flat();
    return op.scopes.every((s) => need.includes(s)) ? undefined : `insufficient_scope names ${JSON.stringify(r.body.need)}, not ${op.scopes.join(", ")}`;
  },
  stranger: (op, r, row) => {
    if (op.adminOnly) return isError(r, 403, "forbidden") ? undefined : "expected 403 forbidden (admin only)";
    if (!targets(op)) return undefined;
    if (isError(r, 403, "forbidden") || isError(r, 404, "not_found")) return undefined;
    // Refused as an invalid id (a list of ids that must be the caller's), or a body that the
    // owner is refused as well: no more said than to the owner.
    if (isError(r, 400, "invalid_request") && ID_FIELD.test(String(r.body.field ?? ""))) return undefined;
    const owner = row.owner!;
    if (r.status >= 400 && r.status === owner.status && r.body.error === owner.body?.error && ![401, 403].includes(owner.status)) return undefined;
    // A read may answer without the resource (collections.batch.get lists it as missing); the
    // marker check below makes sure nothing of it is in the answer. A change may not succeed.
    if (r.status < 300 && !op.mutating) return undefined;
    return "expected 403 forbidden or 404 not_found on another user's resource";
  },
  owner: (op, r) => {
    if (op.adminOnly) return isError(r, 403, "forbidden") ? undefined : "expected 403 forbidden (admin only)";
    return [401, 403].includes(r.status) ? "the owner refused" : undefined;
  },
  collaborator: (op, r) => op.adminOnly && !isError(r, 403, "forbidden") ? "expected 403 forbidden (admin only)" : undefined,
  without_can_upload: (op, r, row) => flagCheck("can_upload", op, r, row),
  without_can_edit: (op, r, row) => flagCheck("can_edit", op, r, row),
  without_can_delete: (op, r, row) => flagCheck("can_delete", op, r, row),
};

/**
 * A collaborator lacking one flag answers as a collaborator with every flag, or 403
 * insufficient_permission naming that flag; the contract's three media operations must be the
 * latter.
 */
function flagCheck(flag: Flag, op: OpEntry, r: CallResult, row: Partial<Record<Role, CallResult>>): string | undefined {
  const refused = isError(r, 403, "insufficient_permission");
  if (refused && r.body.permission !== flag) return `insufficient_permission names ${r.body.permission}, not the missing ${flag}`;
  if (CONTRACT_FLAG[op.name] === flag) return refused ? undefined : `expected 403 insufficient_permission (${flag})`;
  const full = row.collaborator!;
  if (refused) return ![401, 403].includes(full.status) ? undefined : `refused for ${flag} although a collaborator with every flag is refused too (${full.status})`;
  return r.status === full.status || (r.status < 300 && full.status < 300) ? undefined : `answered ${r.status}, a collaborator with every flag ${full.status}`;
}

/** Markers that must not appear in the role's answers. */
function foreignMarks(role: Role): string[] {
  if (role === "stranger" || role === "anonymous") return [OWNER_MARK, ...(role === "anonymous" ? [STRANGER_MARK] : [])];
  return [STRANGER_MARK];
}

test("every operation × owner, collaborator without each flag, collaborator, stranger, anonymous, missing scope", (t) => {
  const problems: string[] = [];
  let cells = 0;
  for (const op of registry.all()) {
    const row = results.get(op.name);
    if (!row) { problems.push(`${op.name}: not run`); continue; }
    for (const [role, r] of Object.entries(row) as Array<[Role, CallResult]>) {
      cells++;
      const line = `${op.name} as ${role}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`;
      if (r.status >= 500) problems.push(`${line}: a 5xx`);
      const why = CHECKS[role](op, r, row);
      if (why) problems.push(`${line}: ${why}`);
      const text = JSON.stringify(r.body);
      for (const mark of foreignMarks(role)) if (text.includes(mark)) problems.push(`${line}: another user's data in the answer`);
    }
  }
  t.is(cells, registry.all().length * 8);
  const histogram: Record<string, Record<number, number>> = {};
  for (const row of results.values()) for (const [role, r] of Object.entries(row)) (histogram[role] ??= {})[r.status] = (histogram[role][r.status] ?? 0) + 1;
  t.log(`statuses by role: ${JSON.stringify(histogram)}`);
  t.deepEqual(problems, []);
});

test("the matrix reaches real answers: owners succeed on most operations, collaborators are refused for each flag", (t) => {
  const ownerOk = registry.all().filter((op) => (results.get(op.name)?.owner?.status ?? 0) < 300).length;
  t.true(ownerOk > registry.all().length * 0.6, `the owner succeeded on only ${ownerOk} operations`);
  for (const flag of FLAGS) {
    const refused = registry.all().filter((op) => results.get(op.name)?.[`without_${flag}`]?.body?.permission === flag).map((op) => op.name);
    t.true(refused.length >= 1, `no operation refused a collaborator without ${flag}`);
  }
  const strangerRefused = registry.all().filter((op) => targets(op) && [403, 404].includes(results.get(op.name)?.stranger?.status ?? 0)).length;
  t.true(strangerRefused >= 40, `only ${strangerRefused} operations refused the stranger`);
});
