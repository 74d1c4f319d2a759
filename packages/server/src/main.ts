/**
 * Entry point: load config, run the selected target, say where it listens, stop cleanly
 * (embedded PostgreSQL included) on SIGINT and SIGTERM.
 */
import "./threadpool.js";
import { ConfigError, createLogger, loadConfig } from "@cms/platform";
import { startSystem } from "./system.js";

let config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(`configuration error: ${err.message}`);
    process.exit(2);
  }
  throw err;
}
const log = createLogger(config.logLevel, { target: config.target });
// A failure nothing handled (a stream's error without a listener, a rejection nobody awaited)
// leaves the process in a state nobody knows: exit as Node would, for the orchestrator to start
// it again, but say why in one line of the log's JSON (Node prints a plain-text stack to stderr,
// which log collectors split line by line). On embedded defaults the next start stops the
// engine this exit leaves running.
process.on("uncaughtException", (err, origin) => {
  log.fatal({ err, origin }, `${origin === "unhandledRejection" ? "unhandled rejection" : "uncaught exception"}; exiting`);
  process.exit(1);
});

let stopping = false;
try {
  const system = await startSystem(config, { log });
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    // Like the ready line, printed whatever LOG_LEVEL says: scripts wait for it.
    log.child({}, { level: "info" }).info({ signal }, "shutting down");
    const force = setTimeout(() => { log.error("shutdown took too long; exiting"); process.exit(1); }, config.shutdownTimeoutMs);
    force.unref();
    await system.stop();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  // The ready line is printed whatever LOG_LEVEL says: it is how people and scripts know.
  log.child({}, { level: "info" }).info({
    ...(system.url ? { url: system.url, endpoint: `${system.url}/functions/v1/thirdparty-v1` } : {}),
    ...(system.serviceUrl ? { service_url: system.serviceUrl } : {}),
    ...(system.metricsUrl ? { metrics_url: system.metricsUrl } : {}),
    ...system.banner,
  }, system.url ? `listening on ${system.url}` : `serving ${config.target} on ${system.serviceUrl}`);
} catch (err) {
  log.fatal({ err }, err instanceof Error ? err.message : "start-up failed");
  process.exit(1);
}
