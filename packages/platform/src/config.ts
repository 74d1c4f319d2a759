/**
 * The one configuration tree, read from the environment once at start-up and passed down.
 * Nothing else in the code reads process.env (STYLE.md, trap 5). Every variable of
 * conventions.md is here, plus the wiring variables of split mode.
 */
import { resolve } from "node:path";
import type { TelemetryConfig } from "./telemetry.js";

export const TARGETS = ["all", "gateway", "collections", "media", "social", "webhooks", "auth"] as const;
export type Target = (typeof TARGETS)[number];
export const SERVICE_NAMES = ["auth", "collections", "media", "social", "webhooks"] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

export interface S3Config {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  forcePathStyle: boolean;
  /** Endpoint that presigned URLs are minted for (clients outside the cluster). */
  publicEndpoint: string;
}

export interface Config {
  target: Target;
  host: string;
  port: number;
  dataDir: string;
  databaseUrl: string | undefined;
  dbPoolMax: number;
  /** lock_timeout of every session of the services' pools (ms; 0: none). */
  dbLockTimeoutMs: number;
  natsUrl: string | undefined;
  natsStream: string;
  natsSubjectPrefix: string;
  s3: S3Config | undefined;
  baseUrl: string;
  appUrl: string;
  mcpUrl: string;
  /** Origins not set explicitly follow the gateway's bound address (PORT=0 in tests). */
  originsDerived: { baseUrl: boolean; appUrl: boolean; mcpUrl: boolean };
  gatewayApiKeys: string[];
  rateLimitPerMinute: number;
  webhookCoalesceMs: number;
  webhookBackoffMs: number[];
  webhookTimeoutMs: number;
  uploadGrantTtlMs: number;
  uploadSessionTtlMs: number;
  /** Lifetime of a media.download_url link. */
  downloadUrlTtlMs: number;
  /** Stored bytes a user's collections may hold (checked by media.upload_begin). */
  userStorageQuotaBytes: number;
  /** Stored bytes one collection may hold (checked by media.upload_begin). */
  collectionStorageQuotaBytes: number;
  outboundAllowedHosts: string[];
  logLevel: string;
  /** Largest accepted JSON request body on the op endpoint. */
  maxBodyBytes: number;
  /** How long a client may send nothing of a request's body (408) or take nothing of a download before the gateway lets it go; 0: no bound. */
  clientIdleMs: number;
  /** How long the gateway trusts a token introspection result. */
  tokenCacheMs: number;
  /** Bound of an orderly stop after SIGTERM: requests in flight get this long, less 5 s for the rest. */
  shutdownTimeoutMs: number;
  /** Hosted MCP server sessions: idle lifetime, per user, in total. */
  mcpSessions: { idleMs: number; perUser: number; max: number };
  /** Port a single service target listens on for Connect (HTTP/2 cleartext). */
  servicePort: number;
  /** SERVICE_PORT was set: the all-in-one process serves every service's port too (internal callers, grpcurl). */
  servicePortRequested: boolean;
  /** Where the gateway and other services reach each service in split mode. */
  serviceUrls: Record<ServiceName, string>;
  /** Secret that signs upload/download grants embedded in URLs. */
  grantSecret: string | undefined;
  /** Ed25519 private key (PEM or a file path) signing caller assertions between processes. */
  callerSigningKey: string | undefined;
  /** Previous public keys (PEM or file paths) still accepted while a key rotation rolls out. */
  callerVerifyKeys: string[];
  telemetry: TelemetryConfig;
  /**
   * scrypt parameters of new password hashes (log2 N, r, p); unset, the auth service's own
   * (N=2^15, r=8, p=3). No environment variable sets them: only code starting a system chooses
   * others (the tests' systems, the cheapest the hash format accepts: same code, a hash in ms).
   */
  passwordHashParams?: { ln: number; r: number; p: number };
}

/** "collections.v1.CollectionsService" -> "collections"; gateway.v1 services are the gateway's own. */
export function ownerOf(service: { typeName: string }): ServiceName | "gateway" {
  return service.typeName.split(".")[0] as ServiceName | "gateway";
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, def: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return def;
  const n = /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  return n;
}

function list(env: Env, name: string): string[] {
  return (env[name] ?? "").split(",").map((s) => s.trim()).filter(Boolean);
}

function bool(env: Env, name: string, def: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "") return def;
  if (/^(1|true|yes|on)$/i.test(raw)) return true;
  if (/^(0|false|no|off)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function url(env: Env, name: string, def: string): string {
  const raw = env[name] || def;
  try {
    return new URL(raw).toString().replace(/\/$/, "");
  } catch {
    throw new ConfigError(`${name} must be an absolute URL, got "${raw}"`);
  }
}

/** Reads the configuration; argv may carry --target=<name>. */
export function loadConfig(env: Env = process.env, argv: string[] = process.argv.slice(2)): Config {
  const targetArg = argv.find((a) => a.startsWith("--target="))?.slice("--target=".length);
  const target = (targetArg ?? env.TARGET ?? "all") as Target;
  if (!TARGETS.includes(target)) throw new ConfigError(`--target must be one of ${TARGETS.join(", ")}, got "${target}"`);
  const host = env.HOST || "127.0.0.1";
  const port = int(env, "PORT", 8080, 0, 65535);
  const baseUrl = url(env, "BASE_URL", `http://${host.includes(":") ? `[${host}]` : host}:${port}`);
  const backoff = list(env, "WEBHOOK_BACKOFF_MS");
  const webhookBackoffMs = backoff.length ? backoff.map((v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new ConfigError(`WEBHOOK_BACKOFF_MS must be comma-separated integers, got "${env.WEBHOOK_BACKOFF_MS}"`);
    return n;
  }) : [30000, 120000, 600000];
  let s3: S3Config | undefined;
  if (env.S3_ENDPOINT) {
    s3 = {
      endpoint: url(env, "S3_ENDPOINT", ""),
      bucket: env.S3_BUCKET || "media",
      region: env.S3_REGION || "us-east-1",
      accessKeyId: env.S3_ACCESS_KEY_ID ?? "",
      secretAccessKey: env.S3_SECRET_ACCESS_KEY ?? "",
      forcePathStyle: bool(env, "S3_FORCE_PATH_STYLE", false),
      publicEndpoint: url(env, "S3_PUBLIC_ENDPOINT", env.S3_ENDPOINT),
    };
  }
  const servicePort = int(env, "SERVICE_PORT", 9090, 0, 65535);
  const serviceUrls = {} as Record<ServiceName, string>;
  for (const name of SERVICE_NAMES) {
    serviceUrls[name] = url(env, `${name.toUpperCase()}_URL`, `http://127.0.0.1:${servicePort}`);
  }
  return {
    target,
    host,
    port,
    dataDir: resolve(env.DATA_DIR || "./data"),
    databaseUrl: env.DATABASE_URL || undefined,
    dbPoolMax: int(env, "DB_POOL_MAX", 10, 1),
    dbLockTimeoutMs: int(env, "DB_LOCK_TIMEOUT_MS", 5000),
    natsUrl: env.NATS_URL || undefined,
    natsStream: env.NATS_STREAM || "CMS_EVENTS",
    natsSubjectPrefix: env.NATS_SUBJECT_PREFIX || "cms.events",
    s3,
    baseUrl,
    appUrl: url(env, "APP_URL", baseUrl),
    mcpUrl: url(env, "MCP_URL", baseUrl),
    originsDerived: { baseUrl: !env.BASE_URL, appUrl: !env.APP_URL, mcpUrl: !env.MCP_URL },
    gatewayApiKeys: list(env, "GATEWAY_API_KEYS"),
    rateLimitPerMinute: int(env, "RATE_LIMIT_PER_MINUTE", 60, 1),
    webhookCoalesceMs: int(env, "WEBHOOK_COALESCE_MS", 30000),
    webhookBackoffMs,
    webhookTimeoutMs: int(env, "WEBHOOK_TIMEOUT_MS", 10000, 1),
    uploadGrantTtlMs: int(env, "UPLOAD_GRANT_TTL_MS", 900000, 1),
    uploadSessionTtlMs: int(env, "UPLOAD_SESSION_TTL_MS", 86400000, 1),
    downloadUrlTtlMs: int(env, "DOWNLOAD_URL_TTL_MS", 300000, 1),
    userStorageQuotaBytes: int(env, "USER_STORAGE_QUOTA_BYTES", 10 * 1024 ** 3, 1),
    collectionStorageQuotaBytes: int(env, "COLLECTION_STORAGE_QUOTA_BYTES", 2 * 1024 ** 3, 1),
    outboundAllowedHosts: list(env, "OUTBOUND_ALLOWED_HOSTS").map((h) => h.toLowerCase()),
    logLevel: env.LOG_LEVEL || "info",
    maxBodyBytes: int(env, "MAX_BODY_BYTES", 16 * 1024 * 1024, 1024),
    clientIdleMs: int(env, "CLIENT_IDLE_MS", 60_000),
    tokenCacheMs: int(env, "TOKEN_CACHE_MS", 2000),
    shutdownTimeoutMs: int(env, "SHUTDOWN_TIMEOUT_MS", 30000, 6000),
    mcpSessions: {
      idleMs: int(env, "MCP_SESSION_IDLE_MS", 3_600_000, 1000),
      perUser: int(env, "MCP_SESSIONS_PER_USER", 10, 1),
      max: int(env, "MCP_MAX_SESSIONS", 10_000, 1),
    },
    servicePort,
    servicePortRequested: Boolean(env.SERVICE_PORT),
    serviceUrls,
    grantSecret: env.GRANT_SECRET || undefined,
    callerSigningKey: env.CALLER_SIGNING_KEY || undefined,
    // PEM text holds no commas, so the list separates whole keys or paths.
    callerVerifyKeys: list(env, "CALLER_VERIFY_KEYS"),
    telemetry: {
      disabled: bool(env, "OTEL_SDK_DISABLED", false),
      serviceName: env.OTEL_SERVICE_NAME || undefined,
      exporterConfigured: tracesExported(env),
      metricsPort: env.METRICS_PORT ? int(env, "METRICS_PORT", 0, 0, 65535) : undefined,
      metricsHost: env.METRICS_HOST || host,
      otlpMetrics: Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT || /\botlp\b/.test(env.OTEL_METRICS_EXPORTER ?? "")),
      otlpMetricsProtocol: (env.OTEL_EXPORTER_OTLP_METRICS_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || "http/protobuf").trim(),
      metricExportIntervalMs: int(env, "OTEL_METRIC_EXPORT_INTERVAL", 60000, 100),
    },
  };
}

/**
 * Whether the SDK sends spans somewhere, by its own reading of the variables: the exporters
 * OTEL_TRACES_EXPORTER names ("none" first: none at all; "none" among others: the SDK takes
 * OTLP), or with the variable unset an OTLP endpoint. Unset with no endpoint the SDK would make
 * an OTLP exporter to localhost, which startTelemetry does not let it do.
 */
function tracesExported(env: Record<string, string | undefined>): boolean {
  const named = (env.OTEL_TRACES_EXPORTER ?? "").split(",").map((s) => s.trim()).filter((s) => s && s !== "null");
  if (named.length) return named[0] !== "none";
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}
