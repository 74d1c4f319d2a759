/**
 * The op registry, derived from the service descriptors: every RPC annotated with
 * (common.v1.op) is a public operation. Nothing here lists operations by hand.
 */
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { getOption, hasOption } from "@bufbuild/protobuf";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import { distance } from "fastest-levenshtein";
import { op as opOption } from "@cms/contracts/common/v1/options_pb";
import { AppError, ownerOf, type ServiceName } from "@cms/platform";
import { requestSchema, responseSchema, type JsonSchema } from "../domain/json-schema.js";

export const SCHEMA_VERSION = "1.28.0";

export interface OpEntry {
  name: string;
  service: DescService;
  method: DescMethod;
  owner: ServiceName | "gateway";
  scopes: string[];
  conditionalScopes: string[];
  mutating: boolean;
  anonymous: boolean;
  adminOnly: boolean;
  summary: string;
  deprecatedAliasOf?: string;
  /** The operation answers the stored object its result names, streamed, instead of JSON. */
  streamsObject: boolean;
  /** It removes data or overwrites it beyond recovery (MCP destructiveHint). */
  destructive: boolean;
  /** It fetches from or delivers to a URL the caller gives (MCP openWorldHint). */
  openWorld: boolean;
  /** JSON Schema of the request body's fields (without `op`). */
  requestSchema: JsonSchema;
  /** JSON Schema of the JSON object the operation answers with (from the response message). */
  responseSchema: JsonSchema;
  validate: ValidateFunction;
}

export interface OpRegistry {
  get(name: string): OpEntry | undefined;
  all(): OpEntry[];
  names(): string[];
  /** Nearest real operation name, for did_you_mean. */
  nearest(name: string): string | undefined;
}

const IDEMPOTENCY_KEY_SCHEMA = {
  type: "string", minLength: 1, maxLength: 128,
  description: "Replays with the same body within 24 hours return the stored response; a different body gives 409 idempotency_key_reused.",
};

const addFormats = (addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule;

export function buildRegistry(services: DescService[]): OpRegistry {
  const ajv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, useDefaults: false });
  (addFormats as unknown as (a: Ajv) => void)(ajv);
  const byName = new Map<string, OpEntry>();
  for (const service of services) {
    for (const method of service.methods) {
      if (!hasOption(method, opOption)) continue;
      const o = getOption(method, opOption);
      if (byName.has(o.name)) throw new Error(`operation ${o.name} is declared twice (${method.parent.typeName}/${method.name})`);
      const schema = requestSchema(method.input);
      if (o.mutating) (schema.properties as Record<string, unknown>).idempotency_key = IDEMPOTENCY_KEY_SCHEMA;
      let validate: ValidateFunction | undefined;
      byName.set(o.name, {
        name: o.name,
        service,
        method,
        owner: ownerOf(service),
        scopes: [...o.scopes],
        conditionalScopes: [...o.conditionalScopes],
        mutating: o.mutating,
        anonymous: o.anonymous,
        adminOnly: o.adminOnly,
        summary: o.summary,
        deprecatedAliasOf: o.deprecatedAliasOf || undefined,
        streamsObject: o.streamsObject,
        destructive: o.destructive,
        openWorld: o.openWorld,
        requestSchema: schema,
        responseSchema: responseSchema(method.output),
        // Compiled on the operation's first request: compiling all 88 cost every start (and
        // every test file importing the registry) 0.6-0.9 s of CPU, V8's compiler threads
        // included, and a process often serves a few of them.
        get validate() { return (validate ??= ajv.compile(schema)); },
      });
    }
  }
  const names = [...byName.keys()].sort();
  return {
    get: (name) => byName.get(name),
    all: () => names.map((n) => byName.get(n)!),
    names: () => names,
    nearest(name) {
      let best: string | undefined;
      let bestD = Infinity;
      const probe = name.toLowerCase().replaceAll("_", ".");
      for (const n of names) {
        const d = distance(probe, n);
        if (d < bestD) { bestD = d; best = n; }
      }
      return best;
    },
  };
}

function fieldPath(instancePath: string, extra?: string): string {
  const parts = instancePath.split("/").slice(1).map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"));
  if (extra !== undefined) parts.push(extra);
  let out = "";
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out ? `.${p}` : p;
  return out;
}

/** The first schema violation as the contract's invalid_request, naming the field. */
export function validationError(op: OpEntry, err: ErrorObject): AppError {
  const allowed = Object.keys((op.requestSchema.properties as object) ?? {});
  switch (err.keyword) {
    case "additionalProperties": {
      const name = (err.params as { additionalProperty: string }).additionalProperty;
      const field = fieldPath(err.instancePath, name);
      const where = err.instancePath ? ` in "${fieldPath(err.instancePath)}"` : ` for ${op.name}`;
      const hint = err.instancePath ? "" : ` Allowed fields: ${["op", ...allowed].join(", ")}.`;
      return new AppError("invalid_request", `Unknown field "${field}"${where}.${hint}`, { field });
    }
    case "required": {
      const field = fieldPath(err.instancePath, (err.params as { missingProperty: string }).missingProperty);
      return new AppError("invalid_request", `Missing required field "${field}" for ${op.name}.`, { field });
    }
    case "type": {
      const field = fieldPath(err.instancePath) || "body";
      return new AppError("invalid_request", `Field "${field}" must be of type ${(err.params as { type: string | string[] }).type}.`, { field });
    }
    case "enum": {
      const field = fieldPath(err.instancePath);
      const values = (err.params as { allowedValues: unknown[] }).allowedValues;
      return new AppError("invalid_request", `Field "${field}" must be one of: ${values.map((v) => JSON.stringify(v)).join(", ")}.`, { field, allowed_values: values });
    }
    default: {
      const field = fieldPath(err.instancePath) || "body";
      return new AppError("invalid_request", `Field "${field}" ${err.message ?? "is invalid"}.`, { field });
    }
  }
}
