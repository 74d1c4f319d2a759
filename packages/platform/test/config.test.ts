/** loadConfig: defaults, target selection, list variables, S3 block and refused values. */
import test from "ava";
import { resolve } from "node:path";
import { ConfigError, loadConfig } from "../src/config.ts";

test("defaults with an empty environment", (t) => {
  const c = loadConfig({}, []);
  t.is(c.target, "all");
  t.is(c.port, 8080);
  t.is(c.host, "127.0.0.1");
  t.is(c.rateLimitPerMinute, 60);
  t.deepEqual(c.webhookBackoffMs, [30000, 120000, 600000]);
  t.is(c.uploadGrantTtlMs, 900000);
  t.is(c.uploadSessionTtlMs, 86400000);
  t.is(c.baseUrl, "http://127.0.0.1:8080");
  t.is(c.appUrl, "http://127.0.0.1:8080");
  t.is(c.mcpUrl, "http://127.0.0.1:8080");
  t.deepEqual(c.gatewayApiKeys, []);
  t.deepEqual(c.outboundAllowedHosts, []);
  t.is(c.s3, undefined);
  t.is(c.databaseUrl, undefined);
  t.is(c.natsUrl, undefined);
  t.is(c.dataDir, resolve("./data"));
  t.is(c.dbLockTimeoutMs, 5000);
});

test("DB_LOCK_TIMEOUT_MS: milliseconds, 0 for none, nothing else", (t) => {
  t.is(loadConfig({ DB_LOCK_TIMEOUT_MS: "0" }, []).dbLockTimeoutMs, 0);
  t.is(loadConfig({ DB_LOCK_TIMEOUT_MS: "250" }, []).dbLockTimeoutMs, 250);
  for (const bad of ["-1", "5s", "1.5"]) t.throws(() => loadConfig({ DB_LOCK_TIMEOUT_MS: bad }, []), { instanceOf: ConfigError });
});

test("CLIENT_IDLE_MS: 60 s by default, milliseconds, 0 for none, nothing else", (t) => {
  t.is(loadConfig({}, []).clientIdleMs, 60_000);
  t.is(loadConfig({ CLIENT_IDLE_MS: "0" }, []).clientIdleMs, 0);
  t.is(loadConfig({ CLIENT_IDLE_MS: "500" }, []).clientIdleMs, 500);
  for (const bad of ["-1", "60s", "1.5"]) t.throws(() => loadConfig({ CLIENT_IDLE_MS: bad }, []), { instanceOf: ConfigError });
});

test("BASE_URL is derived from HOST and PORT, and APP_URL/MCP_URL follow it", (t) => {
  const c = loadConfig({ HOST: "0.0.0.0", PORT: "9000" }, []);
  t.is(c.host, "0.0.0.0");
  t.is(c.port, 9000);
  t.is(c.baseUrl, "http://0.0.0.0:9000");
  t.is(c.appUrl, c.baseUrl);
  t.is(c.mcpUrl, c.baseUrl);
});

test("an IPv6 HOST is bracketed in the derived BASE_URL", (t) => {
  t.is(loadConfig({ HOST: "::1", PORT: "8081" }, []).baseUrl, "http://[::1]:8081");
});

test("explicit BASE_URL, APP_URL and MCP_URL win and lose their trailing slash", (t) => {
  const c = loadConfig({ BASE_URL: "https://api.example.com/", APP_URL: "https://app.example.com/", MCP_URL: "https://mcp.example.com" }, []);
  t.is(c.baseUrl, "https://api.example.com");
  t.is(c.appUrl, "https://app.example.com");
  t.is(c.mcpUrl, "https://mcp.example.com");
  // APP_URL/MCP_URL default to an explicit BASE_URL, not to HOST/PORT.
  const d = loadConfig({ BASE_URL: "https://api.example.com", PORT: "1234" }, []);
  t.is(d.appUrl, "https://api.example.com");
  t.is(d.mcpUrl, "https://api.example.com");
});

test("a BASE_URL that is not an absolute URL is refused", (t) => {
  const err = t.throws(() => loadConfig({ BASE_URL: "not a url" }, []), { instanceOf: ConfigError });
  t.regex(err!.message, /BASE_URL/);
});

test("--target is read from argv", (t) => {
  t.is(loadConfig({}, ["--target=media"]).target, "media");
  t.is(loadConfig({}, ["--foo", "--target=gateway"]).target, "gateway");
});

test("TARGET env is used when argv has none, and argv wins over it", (t) => {
  t.is(loadConfig({ TARGET: "auth" }, []).target, "auth");
  t.is(loadConfig({ TARGET: "auth" }, ["--target=social"]).target, "social");
});

test("an unknown target is refused (argv and env)", (t) => {
  const a = t.throws(() => loadConfig({}, ["--target=everything"]), { instanceOf: ConfigError });
  t.regex(a!.message, /everything/);
  t.throws(() => loadConfig({ TARGET: "nope" }, []), { instanceOf: ConfigError });
  t.throws(() => loadConfig({}, ["--target="]), { instanceOf: ConfigError });
});

test("a PORT that is not a non-negative integer is refused", (t) => {
  for (const PORT of ["abc", "80.5", "-1", "8080x"]) {
    const err = t.throws(() => loadConfig({ PORT }, []), { instanceOf: ConfigError }, `PORT=${PORT}`);
    t.regex(err!.message, /PORT/);
  }
  // Empty means "unset".
  t.is(loadConfig({ PORT: "" }, []).port, 8080);
  t.is(loadConfig({ PORT: "0" }, []).port, 0);
});

test("integer settings with a minimum refuse values below it", (t) => {
  t.throws(() => loadConfig({ RATE_LIMIT_PER_MINUTE: "0" }, []), { instanceOf: ConfigError });
  t.is(loadConfig({ RATE_LIMIT_PER_MINUTE: "5" }, []).rateLimitPerMinute, 5);
  t.throws(() => loadConfig({ UPLOAD_GRANT_TTL_MS: "0" }, []), { instanceOf: ConfigError });
  t.is(loadConfig({ UPLOAD_SESSION_TTL_MS: "1000" }, []).uploadSessionTtlMs, 1000);
});

test("WEBHOOK_BACKOFF_MS is a comma list of integers", (t) => {
  t.deepEqual(loadConfig({ WEBHOOK_BACKOFF_MS: "10, 20 ,30" }, []).webhookBackoffMs, [10, 20, 30]);
  t.deepEqual(loadConfig({ WEBHOOK_BACKOFF_MS: "5" }, []).webhookBackoffMs, [5]);
  for (const v of ["10,abc", "1.5", "-1,2", "10,20x"]) {
    const err = t.throws(() => loadConfig({ WEBHOOK_BACKOFF_MS: v }, []), { instanceOf: ConfigError }, v);
    t.regex(err!.message, /WEBHOOK_BACKOFF_MS/);
  }
});

test("GATEWAY_API_KEYS and OUTBOUND_ALLOWED_HOSTS are trimmed comma lists", (t) => {
  const c = loadConfig({ GATEWAY_API_KEYS: " k1, k2 ,,k3 ", OUTBOUND_ALLOWED_HOSTS: "Example.COM, localhost ,," }, []);
  t.deepEqual(c.gatewayApiKeys, ["k1", "k2", "k3"]);
  t.deepEqual(c.outboundAllowedHosts, ["example.com", "localhost"]);
});

test("S3 settings are read only when S3_ENDPOINT is set", (t) => {
  const without = loadConfig({ S3_BUCKET: "b", S3_REGION: "eu-west-1", S3_FORCE_PATH_STYLE: "true" }, []);
  t.is(without.s3, undefined);
  const c = loadConfig({
    S3_ENDPOINT: "http://127.0.0.1:9000/",
    S3_BUCKET: "bucket1",
    S3_REGION: "eu-west-1",
    S3_ACCESS_KEY_ID: "AK",
    S3_SECRET_ACCESS_KEY: "SK",
    S3_FORCE_PATH_STYLE: "true",
  }, []);
  t.deepEqual(c.s3, {
    endpoint: "http://127.0.0.1:9000",
    bucket: "bucket1",
    region: "eu-west-1",
    accessKeyId: "AK",
    secretAccessKey: "SK",
    forcePathStyle: true,
    publicEndpoint: "http://127.0.0.1:9000",
  });
});

test("S3 defaults and S3_PUBLIC_ENDPOINT", (t) => {
  const c = loadConfig({ S3_ENDPOINT: "http://minio:9000", S3_PUBLIC_ENDPOINT: "https://files.example.com" }, []);
  t.is(c.s3!.bucket, "media");
  t.is(c.s3!.region, "us-east-1");
  t.is(c.s3!.forcePathStyle, false);
  t.is(c.s3!.endpoint, "http://minio:9000");
  t.is(c.s3!.publicEndpoint, "https://files.example.com");
});

test("S3_FORCE_PATH_STYLE accepts boolean words and refuses others", (t) => {
  const fps = (v: string) => loadConfig({ S3_ENDPOINT: "http://s3:9000", S3_FORCE_PATH_STYLE: v }, []).s3!.forcePathStyle;
  for (const v of ["1", "true", "YES", "on"]) t.true(fps(v), v);
  for (const v of ["0", "false", "No", "off"]) t.false(fps(v), v);
  const err = t.throws(() => fps("maybe"), { instanceOf: ConfigError });
  t.regex(err!.message, /S3_FORCE_PATH_STYLE/);
});

test("split-mode service URLs default to SERVICE_PORT and can be overridden", (t) => {
  const c = loadConfig({ SERVICE_PORT: "7000", MEDIA_URL: "http://media:9090/" }, []);
  t.is(c.servicePort, 7000);
  t.is(c.serviceUrls.media, "http://media:9090");
  t.is(c.serviceUrls.auth, "http://127.0.0.1:7000");
  t.is(c.serviceUrls.collections, "http://127.0.0.1:7000");
});

test("ConfigError is an Error named ConfigError", (t) => {
  const err = t.throws(() => loadConfig({ PORT: "x" }, []));
  t.true(err instanceof Error);
  t.is(err!.name, "ConfigError");
});

test("spans are exported as the telemetry SDK reads the variables: OTEL_TRACES_EXPORTER first, else an OTLP endpoint", (t) => {
  const exported = (env: Record<string, string>) => loadConfig(env, []).telemetry.exporterConfigured;
  t.false(exported({}));
  t.false(exported({ OTEL_TRACES_EXPORTER: "none" }), "none: the SDK makes no exporter");
  t.false(exported({ OTEL_TRACES_EXPORTER: " none ", OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }), "none wins over an endpoint");
  t.true(exported({ OTEL_TRACES_EXPORTER: "console" }));
  t.true(exported({ OTEL_TRACES_EXPORTER: "otlp,none" }), "none among others: the SDK takes OTLP");
  t.true(exported({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }));
  t.true(exported({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" }));
  t.false(exported({ OTEL_TRACES_EXPORTER: "" }), "empty is unset");
});
