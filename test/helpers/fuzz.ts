/**
 * Generated requests over every operation, derived from the op registry's request schemas, for
 * the property-based test (test/e2e/fuzz.test.ts) and the longer campaign (`npm run fuzz`,
 * scripts/fuzz.ts).
 *
 * Each case is one operation's body: fields drawn from the op's JSON Schema (required ones
 * always, optional ones at random), ids taken from pools of real ids (the fuzzing user's own,
 * and a second user's private data, which must never show up in an answer), then often broken
 * on purpose: one field replaced by a hostile value (NUL, lone surrogate, integers beyond a
 * column's range, floats, huge arrays, deep nesting, wrong types), an unknown field, a missing
 * required field, or a raw body with a duplicate key or an out-of-range number literal.
 *
 * The checks on each answer: no 5xx, every error has `error` and `detail`, and no answer contains
 * one of the second user's marker strings.
 */
import { createHash, randomBytes } from "node:crypto";
import fc from "fast-check";
import type { OpEntry } from "@cms/gateway/registry";
import { API_KEY, opRegistry, type TestSystem, type TestUser } from "./system.js";

type Schema = Record<string, any>;

/** Kinds of real ids the cases reuse, filled from the seeded data and from answers. */
export type PoolName = "collection" | "media" | "user" | "alias" | "bookmark" | "upload" | "download" | "username" | "handle" | "slug";

/** A value resolved when the case runs: the n-th entry of a pool (pools grow as answers come). */
interface PoolRef { $pool: PoolName; n: number }
/** Bytes for an upload field: content_base64, and content_length/sha256 made to match when asked. */
interface BytesRef { $bytes: Uint8Array; consistent: boolean }

/** One generated request. */
export interface FuzzCase {
  op: string;
  /** Who calls: the fuzzing user's token, or no token. */
  as: "user" | "anonymous";
  body: Record<string, unknown>;
  /** A raw body text instead of JSON.stringify(body) (duplicate keys, number literals). */
  raw?: "duplicate_key" | "huge_literal" | "float_literal";
  /** What was broken on purpose, for the summary. */
  mutation: string;
}

/** Which pool an integer or uuid field's values come from, by its name and operation. */
function poolOf(op: string, field: string): PoolName | undefined {
  if (/collection_id$|^collection_ids$|^ids$/.test(field)) return "collection";
  if (field === "ordered_ids") return op.startsWith("collections.") ? "collection" : "media";
  if (/^media_ids?$/.test(field) || field === "browse_results") return "media";
  if (/user_id$/.test(field)) return "user";
  if (/alias_id$/.test(field)) return "alias";
  if (field === "bookmark_id") return "bookmark";
  if (field === "upload_id") return "upload";
  if (field === "download_id") return "download";
  if (field === "username") return "username";
  if (field === "handle") return "handle";
  if (field === "slug") return "slug";
  return undefined;
}

const ref = (pool: PoolName) => fc.nat({ max: 1_000_000 }).map((n): PoolRef => ({ $pool: pool, n }));

/** Text of every kind: ASCII mostly, any code point sometimes (combining marks, emoji, RTL). */
function text(minLength: number, maxLength: number): fc.Arbitrary<string> {
  const max = Math.max(minLength, Math.min(maxLength, 120));
  return fc.oneof(
    { weight: 4, arbitrary: fc.string({ minLength, maxLength: max }) },
    { weight: 2, arbitrary: fc.string({ unit: "grapheme", minLength, maxLength: max }) },
    { weight: 1, arbitrary: fc.string({ unit: "binary", minLength, maxLength: max }).filter((s) => !s.includes("\u0000")) },
    { weight: 1, arbitrary: fc.constantFrom("'; DROP TABLE collections; --", "%", "_", "\\", "%_\\", "  spaced  ", "ÀÉÎõü", "日本語", "😀👍🏽", "a\u200Bb", "<script>alert(1)</script>").filter((s) => s.length >= minLength && s.length <= Math.max(maxLength, minLength)) },
  );
}

const URLS = [
  "https://example.invalid/a.jpg", "https://vimeo.com/1", "https://www.youtube.com/watch?v=abc", "http://127.0.0.1/x",
  "http://169.254.169.254/latest", "ftp://example.invalid/f", "https://[::1]/", "https://user:pw@example.invalid/", "javascript:alert(1)", "not a url",
];

/** A value the schema accepts (mostly), for a field named `field` of operation `op`. */
function valueOf(schema: Schema, op: string, field: string, depth = 0): fc.Arbitrary<unknown> {
  if (Array.isArray(schema.oneOf)) return fc.oneof(...schema.oneOf.map((s: Schema) => valueOf(s, op, field, depth + 1)));
  if (Array.isArray(schema.anyOf)) return fc.oneof(...schema.anyOf.map((s: Schema) => valueOf(s, op, field, depth + 1)));
  if (Array.isArray(schema.type)) return fc.oneof(...schema.type.map((t: string) => valueOf({ ...schema, type: t }, op, field, depth + 1)));
  if (schema.enum) return fc.constantFrom(...(schema.enum as unknown[]));
  const pool = poolOf(op, field);
  switch (schema.type) {
    case "boolean":
      return fc.boolean();
    case "integer": {
      const min = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : -Number.MAX_SAFE_INTEGER);
      const max = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : Number.MAX_SAFE_INTEGER);
      const edges = fc.constantFrom(...new Set([min, max, min + 1, Math.min(max, 0), Math.min(max, 1)].filter((v) => v >= min && v <= max)));
      const range = fc.integer({ min, max });
      const small = fc.integer({ min: Math.max(min, -5), max: Math.min(max, 100) });
      if (pool) return fc.oneof({ weight: 8, arbitrary: ref(pool) }, { weight: 1, arbitrary: edges }, { weight: 1, arbitrary: range });
      return fc.oneof({ weight: 4, arbitrary: small }, { weight: 2, arbitrary: edges }, { weight: 1, arbitrary: range });
    }
    case "number":
      return fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer());
    case "string": {
      if (pool === "collection" || pool === "media") {
        // Ids in a string ("12,15", as bookmarks.create takes them).
        return fc.oneof({ weight: 4, arbitrary: fc.array(ref(pool), { minLength: 1, maxLength: 4 }).map((refs) => ({ $join: refs })) }, { weight: 1, arbitrary: text(0, 40) });
      }
      if (pool) return fc.oneof({ weight: 8, arbitrary: ref(pool) }, { weight: 1, arbitrary: fc.uuid() }, { weight: 1, arbitrary: text(0, 40) });
      if (schema.contentEncoding === "base64" || field === "content_base64") {
        return fc.tuple(fc.uint8Array({ maxLength: 3000 }), fc.boolean()).map(([b, consistent]): BytesRef => ({ $bytes: b, consistent }));
      }
      if (field === "sha256") return fc.oneof(fc.constant(createHash("sha256").update("").digest("hex")), fc.stringMatching(/^[0-9a-f]{64}$/), text(0, 70));
      switch (schema.format) {
        case "uuid": return fc.uuid();
        case "email": return fc.emailAddress();
        case "hostname": return fc.domain();
        case "uri": return fc.oneof({ weight: 2, arbitrary: fc.constantFrom(...URLS) }, { weight: 1, arbitrary: fc.webUrl({ withQueryParameters: true }) });
        case "date-time": return fc.date({ noInvalidDate: true, min: new Date(0), max: new Date(4102444800000) }).map((d) => d.toISOString());
      }
      const minLength = schema.minLength ?? 0;
      const maxLength = schema.maxLength ?? 200;
      if (schema.pattern) {
        let matching: fc.Arbitrary<string> | undefined;
        try { matching = fc.stringMatching(new RegExp(schema.pattern)).filter((s) => s.length >= minLength && s.length <= maxLength); } catch { matching = undefined; }
        return matching ? fc.oneof({ weight: 3, arbitrary: matching }, { weight: 1, arbitrary: text(minLength, maxLength) }) : text(minLength, maxLength);
      }
      return text(minLength, maxLength);
    }
    case "array": {
      const items = (schema.items ?? {}) as Schema;
      const minLength = schema.minItems ?? 0;
      const maxLength = Math.max(minLength, Math.min(schema.maxItems ?? 8, 12));
      return fc.array(valueOf(items, op, field, depth + 1), { minLength, maxLength });
    }
    case "object":
      if (schema.properties) return objectOf(schema, op, depth + 1);
      return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 });
  }
  return fc.jsonValue({ maxDepth: 3 });
}

function objectOf(schema: Schema, op: string, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [k, s] of Object.entries(schema.properties as Record<string, Schema>)) {
    if (k === "idempotency_key" && depth === 0) {
      // A few keys, so that replays (same body) and reuse (another body) both happen.
      model[k] = fc.oneof({ weight: 1, arbitrary: fc.constantFrom("k1", "k2", "k3") }, { weight: 6, arbitrary: text(1, 128) });
      continue;
    }
    model[k] = valueOf(s, op, k, depth);
  }
  return fc.record(model, { requiredKeys: (schema.required as string[] | undefined) ?? [] }) as fc.Arbitrary<Record<string, unknown>>;
}

/** Values that no field should let through to a service: each must be answered 400 (or ignored). */
const hostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(
    "a\u0000b", "\u0000", "\ud800", "x\udfffy", "", " ", null, true, false, 0, -1, -2147483649, 2147483648, 4294967296,
    9007199254740991, -9007199254740991, 9223372036854775807, 1.5, -0.5, 1e-300, 1e300, 0.1 + 0.2, {}, [], [null], { op: "ping" },
    "18446744073709552000", "1e400", "NaN", "-1", "0x10", "true", "null",
  ),
  fc.array(fc.integer({ min: 1, max: 1000 }), { minLength: 200, maxLength: 5000 }),
  fc.array(fc.string({ maxLength: 3 }), { minLength: 200, maxLength: 3000 }),
  fc.string({ minLength: 5000, maxLength: 70000 }),
  fc.nat({ max: 40 }).map((d) => { let v: unknown = 1; for (let i = 0; i < d; i++) v = [v]; return v; }),
  fc.jsonValue({ maxDepth: 4 }),
  fc.string({ unit: "binary", maxLength: 20 }),
);

/** The cases of one operation: a body from its schema, then maybe one thing broken on purpose. */
function caseOf(op: OpEntry): fc.Arbitrary<FuzzCase> {
  const body = objectOf(op.requestSchema, op.name, 0);
  const fields = Object.keys(op.requestSchema.properties as object);
  const mutation = fc.oneof(
    { weight: 14, arbitrary: fc.constant({ kind: "none" as const }) },
    { weight: 5, arbitrary: fc.record({ kind: fc.constant("hostile" as const), field: fields.length ? fc.constantFrom(...fields) : fc.constant("x"), value: hostile }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("unknown_field" as const), field: fc.string({ minLength: 1, maxLength: 10 }), value: fc.jsonValue({ maxDepth: 1 }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("drop_field" as const), field: fields.length ? fc.constantFrom(...fields) : fc.constant("x") }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("raw" as const), raw: fc.constantFrom("duplicate_key" as const, "huge_literal" as const, "float_literal" as const) }) },
  );
  return fc.tuple(body, mutation, fc.oneof({ weight: 15, arbitrary: fc.constant("user" as const) }, { weight: 1, arbitrary: fc.constant("anonymous" as const) })).map(([b, m, as]) => {
    const c: FuzzCase = { op: op.name, as, body: b, mutation: m.kind };
    if (m.kind === "hostile") { c.body = { ...b, [m.field]: m.value }; c.mutation = `hostile ${m.field}`; }
    if (m.kind === "unknown_field") { c.body = { ...b, [m.field]: m.value }; }
    if (m.kind === "drop_field") { const { [m.field]: _x, ...rest } = b; c.body = rest; c.mutation = `drop ${m.field}`; }
    if (m.kind === "raw") { c.raw = m.raw; c.mutation = `raw ${m.raw}`; }
    return c;
  });
}

/** Every operation of the gateway's registry, equally likely. */
export function fuzzCases(): fc.Arbitrary<FuzzCase> {
  return fc.oneof(...opRegistry.all().map(caseOf));
}

/** Real ids and names to draw from, and the second user's marker strings. */
export interface FuzzWorld {
  sys: TestSystem;
  user: TestUser;
  victim: TestUser;
  pools: Record<PoolName, unknown[]>;
  markers: string[];
}

function remember(world: FuzzWorld, pool: PoolName, value: unknown): void {
  const list = world.pools[pool];
  const numeric = pool === "collection" || pool === "media";
  if (numeric ? !Number.isSafeInteger(value) : typeof value !== "string") return;
  if (list.includes(value)) return;
  list.push(value);
  if (list.length > 300) list.splice(20, 1); // the seeded first entries stay
}

/** Collects ids and names from an answer into the pools, so later cases reach real rows. */
function harvest(world: FuzzWorld, value: unknown, key = ""): void {
  if (Array.isArray(value)) { for (const v of value) harvest(world, v, key); return; }
  if (value === null || typeof value !== "object") return;
  const o = value as Record<string, unknown>;
  const kind: Partial<Record<string, PoolName>> = { collection: "collection", collections: "collection", media: "media", bookmark: "bookmark", bookmarks: "bookmark", alias: "alias", aliases: "alias" };
  const pool = kind[key];
  if (pool && "id" in o) remember(world, pool, o.id);
  for (const [k, v] of Object.entries(o)) {
    if (k === "upload_id" || k === "download_id") remember(world, k === "upload_id" ? "upload" : "download", v);
    else if (k === "user_id" || k === "inviter_user_id") remember(world, "user", v);
    else if (k === "handle" && typeof v === "string") remember(world, "handle", v);
    else if (k === "slug" && typeof v === "string") remember(world, "slug", v);
    else if (v && typeof v === "object") harvest(world, v, k);
  }
}

function resolve(world: FuzzWorld, value: unknown, body: Record<string, unknown>): unknown {
  if (Array.isArray(value)) return value.map((v) => resolve(world, v, body));
  if (value === null || typeof value !== "object" || value instanceof Uint8Array) return value;
  const o = value as Record<string, unknown>;
  if ("$pool" in o && typeof o.n === "number") {
    const list = world.pools[o.$pool as PoolName];
    if (list.length) return list[o.n % list.length];
    return o.$pool === "collection" || o.$pool === "media" ? o.n : `00000000-0000-4000-8000-${String(o.n).padStart(12, "0")}`;
  }
  if ("$join" in o) return (resolve(world, o.$join, body) as unknown[]).join(",");
  if ("$bytes" in o) {
    const bytes = Buffer.from(o.$bytes as Uint8Array);
    if (o.consistent) {
      if ("content_length" in body) body.content_length = bytes.length;
      if ("sha256" in body) body.sha256 = createHash("sha256").update(bytes).digest("hex");
    }
    return bytes.toString("base64");
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) out[k] = resolve(world, v, body);
  return out;
}

/** The JSON text of a case with its pool references and bytes resolved. */
function bodyText(world: FuzzWorld, c: FuzzCase): string {
  const body: Record<string, unknown> = { op: c.op, ...c.body };
  const resolved: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) resolved[k] = resolve(world, v, body);
  // content_length/sha256 set by a consistent upload's bytes win over their drawn values
  for (const k of ["content_length", "sha256"]) if (k in body && body[k] !== c.body[k]) resolved[k] = body[k];
  const json = JSON.stringify(resolved);
  switch (c.raw) {
    case "duplicate_key": return json.replace(/^\{/, `{"op":${JSON.stringify(c.op)},`);
    case "huge_literal": return json.replace(/\}$/, `${json === "{}" ? "" : ","}"limit":18446744073709551616}`);
    case "float_literal": return json.replace(/\}$/, `${json === "{}" ? "" : ","}"offset":2.5e1}`);
  }
  return json;
}

/** What one case found, when it found something wrong. */
export interface FuzzFailure { op: string; status: number; why: string; request: string; answer: string }

/** The outcome of one case: its status, its error code, and what was wrong with the answer. */
export interface FuzzOutcome { status: number; code?: string; detail?: string; failure?: FuzzFailure }

/** Sends one case and checks its answer. */
export async function runCase(world: FuzzWorld, c: FuzzCase): Promise<FuzzOutcome> {
  const request = bodyText(world, c);
  const headers: Record<string, string> = { "content-type": "application/json", apikey: API_KEY };
  if (c.as === "user") headers.authorization = `Bearer ${world.user.token}`;
  let res: Response;
  try {
    res = await fetch(`${world.sys.url}/functions/v1/thirdparty-v1`, { method: "POST", headers, body: request, signal: AbortSignal.timeout(30_000) });
  } catch (err) {
    return { status: 0, failure: { op: c.op, status: 0, why: `no answer: ${(err as Error).message}`, request: request.slice(0, 500), answer: "" } };
  }
  const bytes = Buffer.from(await res.arrayBuffer());
  const answer = bytes.toString("utf8");
  const fail = (why: string): FuzzOutcome => ({ status: res.status, failure: { op: c.op, status: res.status, why, request: request.slice(0, 500), answer: answer.slice(0, 500) } });
  for (const marker of world.markers) {
    if (answer.includes(marker)) return fail(`the answer contains the other user's data (${marker})`);
  }
  if (res.status >= 500) return fail(`a ${res.status} answer`);
  const json = (res.headers.get("content-type") ?? "").startsWith("application/json");
  let parsed: any;
  if (json) {
    try { parsed = JSON.parse(answer); } catch { return fail("a JSON content type with a body that is not JSON"); }
  }
  if (res.status >= 400) {
    if (!parsed || typeof parsed.error !== "string" || !parsed.error || typeof parsed.detail !== "string" || !parsed.detail) return fail("an error without `error` and `detail`");
    if (res.status === 401 && c.as === "user" && /token/i.test(parsed.detail)) {
      // mcp.revoke_session revokes the token the cases use: mint a fresh one.
      world.user.token = await world.sys.token(world.user.username);
    }
    return { status: res.status, code: parsed.error, detail: parsed.detail };
  }
  if (parsed) harvest(world, parsed);
  return { status: res.status };
}

/** A unique string that only the second user's data contains. */
function marker(): string {
  return `zqmark${randomBytes(6).toString("hex")}`;
}

/**
 * The fuzzing user (paid, every scope) with a few collections, media and an upload of its own,
 * and a second user whose private collections, media, notes, bookmarks, webhook and UI state all
 * carry marker strings that no answer to the fuzzing user may contain.
 */
export async function seedWorld(sys: TestSystem): Promise<FuzzWorld> {
  const user = await sys.user({ plan: "paid" });
  const victim = await sys.user({ plan: "paid" });
  const markers: string[] = [];
  const m = () => { const s = marker(); markers.push(s); return s; };
  const pools: Record<PoolName, unknown[]> = { collection: [], media: [], user: [user.userId, victim.userId], alias: [], bookmark: [], upload: [], download: [], username: [user.username, victim.username], handle: [], slug: [] };
  const world: FuzzWorld = { sys, user, victim, pools, markers };

  for (let i = 0; i < 3; i++) {
    const c = await sys.must(victim.token, { op: "collections.create", name: `secret ${m()}`, description: `private ${m()}`, tags: [m()], share_access_level: "restricted" });
    const id = c.collection.id as number;
    pools.collection.push(id);
    const note = await sys.must(victim.token, { op: "media.text_note.add", collection_id: id, name: `note ${m()}`, text: `body ${m()}`, description: `about ${m()}` });
    pools.media.push(note.media.id);
    const bytes = Buffer.from(`file ${m()}`);
    const up = await sys.must(victim.token, { op: "media.upload", collection_id: id, name: `file ${m()}`, filename: "secret.txt", content_base64: bytes.toString("base64"), content_length: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") });
    pools.media.push(up.media.id);
  }
  const sub = await sys.must(victim.token, { op: "collections.create", name: `child ${m()}`, parent_collection_id: pools.collection[0] });
  pools.collection.push(sub.collection.id);
  const bm = await sys.must(victim.token, { op: "bookmarks.create", title: `bookmark ${m()}`, collection_ids: String(pools.collection[0]) });
  pools.bookmark.push(bm.bookmark.id);
  await sys.must(victim.token, { op: "ui.state.set", collection_id: pools.collection[0], browse_title: `browsing ${m()}` });
  await sys.must(victim.token, { op: "profile.update", bio: `bio ${m()}` }).catch(() => undefined);
  const begun = await sys.must(victim.token, { op: "media.upload_begin", collection_id: pools.collection[1], filename: `${m()}.bin`, content_type: "application/octet-stream", content_length: 10 });
  pools.upload.push(begun.upload_id);

  // The fuzzing user's own data, so that cases also get past the permission checks.
  for (let i = 0; i < 3; i++) {
    const c = await sys.must(user.token, { op: "collections.create", name: `mine ${i}` });
    pools.collection.push(c.collection.id);
    const note = await sys.must(user.token, { op: "media.text_note.add", collection_id: c.collection.id, name: `n${i}`, text: "hello" });
    pools.media.push(note.media.id);
  }
  const alias = await sys.call(user.token, { op: "aliases.create", handle: `fz${randomBytes(3).toString("hex")}` });
  if (alias.status === 200) harvest(world, alias.body);
  return world;
}

/** Checks that the second user's data is all still there, unchanged by the fuzzing user. */
export async function victimIntact(world: FuzzWorld): Promise<string | undefined> {
  const list = await world.sys.must(world.victim.token, { op: "collections.list", include_subcollections: true, limit: 100 });
  const names = (list.collections as Array<{ name: string }>).map((c) => c.name).join(" ");
  const missing = world.markers.filter((mk) => names.includes(mk)).length;
  if ((list.collections as unknown[]).length < 4 || missing < 4) return `the second user's collections changed: ${names}`;
  return undefined;
}

/** A histogram, sorted by key. */
export function sorted(h: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(h).sort(([a], [b]) => a.localeCompare(b)));
}
