/** JSON Schemas derived from the request messages and their buf.validate / common.v1.field options. */
import test from "ava";
import {
  BatchGetCollectionsRequestSchema,
  CreateCollectionRequestSchema,
  ListCollectionsRequestSchema,
  MoveCollectionRequestSchema,
  SearchCollectionsRequestSchema,
  UpdateCollectionRequestSchema,
} from "@cms/contracts/collections/v1/collections_pb";
import { DescribeOperationRequestSchema } from "@cms/contracts/gateway/v1/meta_pb";
import { DownloadChunkRequestSchema, FinishUploadRequestSchema, GetMediaUploadUrlRequestSchema, UploadChunkRequestSchema } from "@cms/contracts/media/v1/media_pb";
import { EmptyRequestSchema } from "@cms/contracts/common/v1/common_pb";
import { isRequired, requestSchema } from "../src/domain/json-schema.ts";

type Props = Record<string, Record<string, unknown>>;
const propsOf = (s: Record<string, unknown>) => s.properties as Props;

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const INT32_MAX = 2147483647;

test("every schema is a closed object (additionalProperties false)", (t) => {
  for (const m of [CreateCollectionRequestSchema, DescribeOperationRequestSchema, UploadChunkRequestSchema, EmptyRequestSchema]) {
    const s = requestSchema(m);
    t.is(s.type, "object", m.typeName);
    t.is(s.additionalProperties, false, m.typeName);
  }
  t.deepEqual(requestSchema(EmptyRequestSchema), { type: "object", properties: {}, additionalProperties: false });
});

test("DescribeOperationRequest: required string with min/max length", (t) => {
  t.deepEqual(requestSchema(DescribeOperationRequestSchema), {
    type: "object",
    properties: { operation: { type: "string", minLength: 1, maxLength: 100 } },
    additionalProperties: false,
    required: ["operation"],
  });
});

test("CreateCollectionRequest: required fields are the implicit-presence ones", (t) => {
  const s = requestSchema(CreateCollectionRequestSchema);
  t.deepEqual(s.required, ["name"]);
  t.deepEqual(Object.keys(propsOf(s)), [
    "name", "thumbnail_url", "description", "is_nsfw", "share_access_level", "tags", "searchable",
    "alias_id", "playback_prefs", "parent_collection_id", "link_position", "link_description",
  ]);
});

test("CreateCollectionRequest: lengths, enum from `in`, uuid format, int ranges, defaults", (t) => {
  const p = propsOf(requestSchema(CreateCollectionRequestSchema));
  t.deepEqual(p.name, { type: "string", minLength: 1, maxLength: 500 });
  t.deepEqual(p.description, { type: "string", maxLength: 4000 });
  // Its default is described, not declared: an omitted level is "never configured" (publish rule 2),
  // which a default filled in on arrival would erase.
  t.is(p.share_access_level!.default, undefined);
  t.deepEqual(p.share_access_level!.enum, ["private", "public", "registered", "restricted"]);
  t.regex(String(p.share_access_level!.description), /Default private/);
  t.deepEqual(p.alias_id, { type: "string", format: "uuid" });
  t.deepEqual(p.is_nsfw, { type: "boolean", default: false });
  // int64 (JS number) with gte 1: the safe-integer range with the rule's minimum.
  t.deepEqual(p.parent_collection_id, { type: "integer", minimum: 1, maximum: MAX_SAFE });
  // int32 with gte 0 keeps the int32 maximum.
  t.deepEqual(p.link_position, { type: "integer", minimum: 0, maximum: INT32_MAX });
  t.deepEqual(p.tags, { type: "array", items: { type: "string", minLength: 1, maxLength: 50 }, maxItems: 10 });
});

test("google.protobuf.Value fields take the schema of their json_schema option", (t) => {
  const create = propsOf(requestSchema(CreateCollectionRequestSchema));
  const prefs = create.playback_prefs!;
  t.deepEqual(prefs.type, ["object", "null"]);
  t.is(prefs.additionalProperties, false);
  t.deepEqual((prefs.properties as Props).interval_seconds, { type: "integer", minimum: 1, maximum: 3600 });
  t.deepEqual(Object.keys((prefs.properties as Props).kinds!.properties as object), ["image", "video", "audio", "embed", "other"]);

  const update = propsOf(requestSchema(UpdateCollectionRequestSchema));
  t.deepEqual(update.description, { type: ["string", "null"], maxLength: 4000 });
  t.deepEqual(update.alias_id, { type: ["string", "null"], format: "uuid" });
  t.deepEqual(update.tags, { type: "array", maxItems: 10, items: { type: "string", minLength: 1, maxLength: 50 } });
  t.deepEqual(propsOf(requestSchema(MoveCollectionRequestSchema)).parent_collection_id, { type: ["integer", "null"], minimum: 1, maximum: MAX_SAFE });
  // A Value field is never required by itself.
  t.deepEqual(requestSchema(UpdateCollectionRequestSchema).required, ["collection_id"]);
  t.deepEqual(requestSchema(MoveCollectionRequestSchema).required, ["collection_id"]);
});

test("each call returns fresh objects (no shared mutable schema)", (t) => {
  const a = requestSchema(CreateCollectionRequestSchema);
  (propsOf(a).playback_prefs as Record<string, unknown>).mutated = true;
  (propsOf(a).name as Record<string, unknown>).maxLength = 1;
  const b = requestSchema(CreateCollectionRequestSchema);
  t.false("mutated" in propsOf(b).playback_prefs!);
  t.is(propsOf(b).name!.maxLength, 500);
});

test("min/max from gte/lte and defaults from default_json", (t) => {
  const p = propsOf(requestSchema(ListCollectionsRequestSchema));
  t.deepEqual(p.limit, { type: "integer", minimum: 1, maximum: 500, default: 100 });
  t.deepEqual(p.offset, { type: "integer", minimum: 0, maximum: INT32_MAX, default: 0 });
  t.is(requestSchema(ListCollectionsRequestSchema).required, undefined, "no field of list is required");
  const search = propsOf(requestSchema(SearchCollectionsRequestSchema));
  t.deepEqual(search.limit, { type: "integer", minimum: 1, maximum: 50, default: 20 });
  t.deepEqual(search.query, { type: "string", minLength: 3, maxLength: 200 });
});

test("repeated fields: item rules, min/max items, uniqueness, and min_items >= 1 makes them required", (t) => {
  const batch = requestSchema(BatchGetCollectionsRequestSchema);
  t.deepEqual(propsOf(batch).ids, { type: "array", items: { type: "integer", minimum: 1, maximum: MAX_SAFE }, minItems: 1, maxItems: 30 });
  t.deepEqual(batch.required, ["ids"]);
  const search = propsOf(requestSchema(SearchCollectionsRequestSchema));
  t.deepEqual(search.scope, {
    type: "array",
    items: { type: "string", enum: ["own", "shared", "public", "following", "liked"] },
    maxItems: 5,
    uniqueItems: true,
    default: ["own", "shared"],
  });
  const upload = requestSchema(GetMediaUploadUrlRequestSchema);
  t.false((upload.required as string[]).includes("tags"), "a list without min_items is optional");
});

test("UploadChunkRequest: uuid format, pattern, and an optional field with required=true is required", (t) => {
  const s = requestSchema(UploadChunkRequestSchema);
  const p = propsOf(s);
  t.deepEqual(p.upload_id, { type: "string", format: "uuid" });
  t.deepEqual(p.index, { type: "integer", minimum: 0, maximum: INT32_MAX });
  t.deepEqual(p.content_length, { type: "integer", minimum: 1, maximum: 8388608 });
  t.deepEqual(p.content_base64, { type: "string" });
  t.deepEqual(p.sha256, { type: "string", pattern: "^[a-fA-F0-9]{64}$" });
  t.deepEqual(s.required, ["upload_id", "index", "content_base64", "content_length"]);
  t.deepEqual(requestSchema(DownloadChunkRequestSchema).required, ["download_id", "index"]);
});

test("isRequired: implicit presence, explicit optional, required rule", (t) => {
  const f = (m: typeof UploadChunkRequestSchema | typeof FinishUploadRequestSchema, name: string) => m.fields.find((x) => x.name === name)!;
  t.true(isRequired(f(UploadChunkRequestSchema, "upload_id")));
  t.true(isRequired(f(UploadChunkRequestSchema, "index")));
  t.false(isRequired(f(UploadChunkRequestSchema, "sha256")));
  t.false(isRequired(f(FinishUploadRequestSchema, "content_length")));
  t.true(isRequired(f(FinishUploadRequestSchema, "upload_id")));
});

test("string patterns are carried over", (t) => {
  const p = propsOf(requestSchema(GetMediaUploadUrlRequestSchema));
  t.deepEqual(p.content_type, { type: "string", minLength: 1, maxLength: 255, pattern: "^[a-zA-Z0-9!#$&^_.+-]+/[a-zA-Z0-9!#$&^_.+-]+$" });
  t.deepEqual(p.purpose, { type: "string", enum: ["media", "thumbnail"], default: "media" });
});
