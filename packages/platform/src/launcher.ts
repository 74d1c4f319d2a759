/**
 * Runs a target: `all` (every module in one process, Connect calls in memory) or one module per
 * process (Connect over HTTP/2 between processes). main() only loads config and calls launch();
 * tests call launch() directly to start a whole system in-process.
 */
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { createClient, createConnectRouter, createRouterTransport, type ConnectRouter, type Transport } from "@connectrpc/connect";
import { connectNodeAdapter, createConnectTransport } from "@connectrpc/connect-node";
import { GoawaySafeSessionManager } from "./http2-sessions.js";
import type { DescService } from "@bufbuild/protobuf";
import type { Knex } from "knex";
import { type Config, type ServiceName, SERVICE_NAMES, ConfigError } from "./config.js";
import { createLogger, type Logger } from "./logger.js";
import { createDb, ensureExtensions, migrate, type MigrationList, type SessionSettings } from "./db.js";
import { serviceMigrations, createLocalTransport, createNatsTransport, createOutboxRelay, type BusTransport, type OutboxRelay } from "./bus.js";
import { createObjectStore, type ObjectStore } from "./object-store.js";
import { startEmbeddedPostgres, type EmbeddedPostgres } from "./embedded-postgres.js";
import { startTelemetry } from "./telemetry.js";
import { observeOutbox, observePool } from "./metrics.js";
import { resolveGrantSecret } from "./grants.js";
import { clientInterceptors, ownerOf, runningHandlers, serverInterceptors } from "./rpc.js";
import { createAssertionSigner, createAssertionVerifier, loadCallerKeys } from "./assertions.js";
import { assertCalls, authenticateCalls } from "./authn.js";
import { boundedByCall, deadlineValues } from "./call-scope.js";
import { createTokenResolver } from "./tokens.js";
import { EVENTS } from "./events.js";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { Health } from "@cms/contracts/grpc/health/v1/health_pb";
import { createHealth, followReadiness } from "./health.js";
import { reflectionRoutes } from "./reflection.js";
import { createDirectTransport } from "./direct-transport.js";
import { createUnaryFastPath, createUnaryTransport } from "./connect-unary.js";
import { createOneStatementUnit, createUnitOfWork } from "./unit-of-work.js";
import type { Clients, ServiceBus, ServiceContext, ServiceInstance, ServiceModule } from "./module.js";

/** The gateway is a module too, but it serves HTTP to the outside instead of Connect routes. */
export interface GatewayModule {
  schema: string;
  migrations: MigrationList;
  init(ctx: ServiceContext): Promise<GatewayInstance>;
}

export interface GatewayInstance {
  /** Starts listening on config.host:config.port; resolves to the bound URL. */
  listen(): Promise<string>;
  stop(): Promise<void>;
  /** Printed at start-up (the generated embedded API key). */
  banner?: Record<string, unknown>;
}

export interface System {
  config: Config;
  log: Logger;
  /** Gateway URL when this process runs the gateway. */
  url?: string;
  /** Connect URL when this process runs one service. */
  serviceUrl?: string;
  /** Prometheus endpoint of this process, when METRICS_PORT is set. */
  metricsUrl?: string;
  banner: Record<string, unknown>;
  /** Connection string of the database in use (embedded or DATABASE_URL). */
  databaseUrl: string;
  clients: Clients;
  /** The object store this process uses. */
  store: ObjectStore;
  dbOf(name: ServiceName | "gateway"): Knex | undefined;
  /** Publishes every pending outbox event now (a one-off job's process, before it exits). */
  publishPendingEvents(): Promise<void>;
  /** Publishes every pending outbox event now and waits until every subscriber has processed it (tests). */
  drainEvents(): Promise<void>;
  /** Subscribes to bus events (tests observe what services publish). */
  subscribe(name: string, type: string, handler: (event: import("./bus.js").BusEvent) => Promise<void>): Promise<void>;
  /** Runs a module's job once (admin CLI `jobs run`). */
  runJob(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

export interface LaunchOptions {
  modules: ServiceModule[];
  gateway: GatewayModule;
  log?: Logger;
  /** No HTTP gateway (the admin CLI runs jobs this way). */
  headless?: boolean;
}

/**
 * The largest request a service port reads: bodies are read before the caller is authenticated.
 * The largest legitimate one is an 8 MiB chunk in base64 (~11 MB); connect-node's own default
 * is 4 GiB.
 */
export const SERVICE_READ_MAX_BYTES = 64 * 1024 * 1024;

/** What a module keeps in PostgreSQL: its schema, and how a start prepares it and opens its pool. */
interface SchemaSpec {
  schema: string;
  migrations: MigrationList;
  extensions: string[];
  /** A service's schema holds its outbox too; the gateway's does not. */
  withOutbox: boolean;
  settings: SessionSettings;
}

const serviceSchema = (m: ServiceModule): SchemaSpec =>
  ({ schema: m.schema, migrations: m.migrations, extensions: m.extensions ?? [], withOutbox: true, settings: m.sessionSettings ?? {} });
const gatewaySchema = (g: GatewayModule): SchemaSpec =>
  ({ schema: g.schema, migrations: g.migrations, extensions: [], withOutbox: false, settings: {} });

/** A module's schema as a start leaves it: its extensions, then its migrations (and the outbox's, for a service). */
async function prepareSchema(db: Knex, spec: SchemaSpec): Promise<void> {
  if (spec.extensions.length) await ensureExtensions(db, spec.extensions);
  await migrate(db, spec.schema, spec.withOutbox ? serviceMigrations(spec.migrations) : spec.migrations);
}

/**
 * Migrates every schema of the modules on databaseUrl as a start of them would, starting
 * nothing: the tests make one migrated template a run and copy it for each system.
 */
export async function migrateSystem(databaseUrl: string, opts: Pick<LaunchOptions, "modules" | "gateway">): Promise<void> {
  for (const spec of [...opts.modules.map(serviceSchema), gatewaySchema(opts.gateway)]) {
    // Two connections: migrate() holds its advisory lock on one while knex migrates on another.
    const db = createDb(databaseUrl, spec.schema, 2, spec.settings);
    try {
      await prepareSchema(db, spec);
    } finally {
      await db.destroy();
    }
  }
}

function makeClients(transportFor: (owner: ServiceName) => Transport): Clients {
  const cache = new Map<string, unknown>();
  return {
    get<T extends DescService>(service: T) {
      let c = cache.get(service.typeName);
      if (!c) {
        const owner = ownerOf(service);
        if (owner === "gateway") throw new Error(`${service.typeName} is served by the gateway itself`);
        // Bounded by the call being handled when one is (its deadline, its end), by CALL_TIMEOUT_MS otherwise.
        c = createClient(service, boundedByCall(transportFor(owner)));
        cache.set(service.typeName, c);
      }
      return c as ReturnType<Clients["get"]> as never;
    },
  };
}

export async function launch(config: Config, opts: LaunchOptions): Promise<System> {
  const log = opts.log ?? createLogger(config.logLevel, { target: config.target });
  const cleanup: Array<() => Promise<void>> = [];
  /** When the stop began: its waits share SHUTDOWN_TIMEOUT_MS, less 5 s for closing what is left. */
  let stopBegan = 0;
  const stopAll = async () => {
    stopBegan = Date.now();
    for (const fn of cleanup.reverse()) {
      try { await fn(); } catch (err) { log.error({ err }, "error during shutdown"); }
    }
    cleanup.length = 0;
  };
  try {
    const telemetry = await startTelemetry(`cms-${config.target}`, config.telemetry);
    cleanup.push(() => telemetry.shutdown());
    const split = config.target !== "all";
    if (split && !config.databaseUrl) throw new ConfigError(`--target=${config.target} runs one service per process and needs DATABASE_URL (the embedded database is for --target=all).`);
    if (split && !config.natsUrl) throw new ConfigError(`--target=${config.target} runs one service per process and needs NATS_URL so that events cross processes.`);
    if (split && !config.grantSecret && !opts.headless) throw new ConfigError(`--target=${config.target} needs GRANT_SECRET, shared by every process, so that signed upload and download links verify on any replica.`);
    if (split && !config.callerSigningKey) throw new ConfigError(`--target=${config.target} needs CALLER_SIGNING_KEY (an Ed25519 private key, PEM or a file path), the same on every process, so that services can verify who calls them (\`npm run -s admin -- keys generate\` prints one).`);

    let databaseUrl = config.databaseUrl;
    let embedded: EmbeddedPostgres | undefined;
    if (!databaseUrl) {
      embedded = await startEmbeddedPostgres(config.dataDir, log);
      cleanup.push(() => embedded!.stop());
      databaseUrl = embedded.url;
    }

    const transport: BusTransport = config.natsUrl
      ? await createNatsTransport({ url: config.natsUrl, stream: config.natsStream, subjectPrefix: config.natsSubjectPrefix, log })
      : createLocalTransport(log);
    cleanup.push(() => transport.close());

    // Grants in upload/download URLs must verify on every replica: GRANT_SECRET, or one kept
    // under DATA_DIR on a single machine.
    config.grantSecret = resolveGrantSecret(config.grantSecret, config.dataDir);
    const store: ObjectStore = await createObjectStore(config);
    cleanup.push(async () => store.close());

    const selected = opts.modules.filter((m) => config.target === "all" || config.target === m.name);
    const runGateway = !opts.headless && (config.target === "all" || config.target === "gateway");

    // Callers are verified, not trusted: every call carries an assertion signed with this
    // system's key, and services check it (or an internal caller's bearer token).
    const callerKeys = await loadCallerKeys(config.callerSigningKey, config.callerVerifyKeys, config.dataDir);
    const outgoing = clientInterceptors(assertCalls({ signer: createAssertionSigner(callerKeys), identity: opts.headless ? "admin" : config.target }));
    // Set below, once clients exist: tokens of direct callers are resolved by the auth service.
    let directTokens: ReturnType<typeof createTokenResolver> | undefined;
    const authenticate = authenticateCalls({
      verifier: createAssertionVerifier(callerKeys),
      tokens: { resolve: (t) => directTokens!.resolve(t), forget: (h) => directTokens?.forget(h) },
    });
    const running = runningHandlers();
    const incoming = serverInterceptors(log, authenticate, running);

    // Routes of the modules in this process, and how clients reach every service.
    const routeFns: Array<(r: ConnectRouter) => void> = [];
    const allRoutes = (r: ConnectRouter) => { for (const fn of routeFns) fn(r); };
    // The in-memory transport knows the routes registered when it is built, so it is built on
    // the first call, after every module's init() (a module may create clients during init).
    let local: Transport | undefined;
    const buildLocal = () => (local ??= createDirectTransport({
      routes: allRoutes, serverInterceptors: incoming, clientInterceptors: outgoing,
      streams: createRouterTransport(allRoutes, { router: { interceptors: incoming }, transport: { interceptors: outgoing } }),
    }));
    const lazyLocal: Transport = {
      unary: (...args) => buildLocal().unary(...args),
      stream: (...args) => buildLocal().stream(...args),
    };
    const remote = new Map<ServiceName, Transport>();
    const transportFor = (owner: ServiceName): Transport => {
      if (config.target === "all") return lazyLocal;
      let t = remote.get(owner);
      if (!t) {
        const baseUrl = config.serviceUrls[owner];
        // Unary calls through the lean transport, streaming ones through connect-node's, on one
        // HTTP/2 connection. No compression between services: on a cluster's network gzip costs
        // both sides more CPU than the bytes it saves (media.list's answers were gzipped on every hop).
        const sessionManager = new GoawaySafeSessionManager(baseUrl);
        t = createUnaryTransport({
          baseUrl, sessionManager, interceptors: outgoing,
          streams: createConnectTransport({ baseUrl, httpVersion: "2", sessionManager, interceptors: outgoing, useBinaryFormat: true, acceptCompression: [] }),
        });
        remote.set(owner, t);
      }
      return t;
    };
    const clients = makeClients(transportFor);
    directTokens = createTokenResolver((token) => clients.get(AuthService).introspectToken({ token }), config.tokenCacheMs);
    await transport.onBroadcast(EVENTS.tokenRevoked, (p) => directTokens!.forget(String(p.token_hash)));

    const dbs = new Map<string, Knex>();
    const relays: OutboxRelay[] = [];
    /**
     * Publishes what every outbox holds, in the services' order, again while a pass left some
     * (with the in-process bus a publish runs the subscribers, whose units of work write to their
     * own outboxes, an earlier one included); the first failure is thrown once all were tried.
     */
    const publishPendingEvents = async () => {
      let failure: unknown;
      for (let round = 1; round <= 3; round++) {
        for (const r of relays) await r.drain().catch((err) => { failure ??= err; });
        if (failure !== undefined) throw failure;
        const left = await Promise.all(relays.map((r) => r.backlog()));
        if (left.every((b) => b.unpublished === 0)) return;
      }
    };
    // Stopping, in reverse: the pools close only after every relay drained (registered first, so
    // it runs last), and the relays drain only after the modules and ports stopped, so that the
    // requests still in flight commit first. With the in-process bus a relay's publish runs the
    // subscribers of every service, which need their own pools open.
    cleanup.push(async () => { for (const db of dbs.values()) await db.destroy(); });
    cleanup.push(async () => {
      for (const r of relays) await r.stop();
      await publishPendingEvents();
    });
    // Before that, the handlers still running (ports and gateway closed, no new call comes):
    // one whose caller was answered may still have to commit or undo, on pools still open.
    cleanup.push(async () => {
      if (running.count() === 0) return;
      log.info({ handlers: running.count() }, "waiting for the handlers still running");
      if (!(await running.settled(Math.max(0, stopBegan + config.shutdownTimeoutMs - 5000 - Date.now())))) {
        log.warn({ handlers: running.count() }, "handlers still running when the stop's time ran out; closing the pools under them");
      }
    });
    const poolMax = config.target === "all" ? Math.max(2, Math.ceil(config.dbPoolMax / 2)) : config.dbPoolMax;
    // A statement waiting longer than this for a lock (a row another session holds) fails, and
    // the call is the 503: without it, calls on one row an outside transaction kept locked took
    // every connection of the pool, and each other call of the service waited for one until the
    // pool's acquire timeout (15 s) and failed as well.
    const lockTimeout: SessionSettings = config.dbLockTimeoutMs > 0 ? { lock_timeout: String(config.dbLockTimeoutMs) } : {};
    async function contextFor(name: string, spec: SchemaSpec): Promise<ServiceContext> {
      const { schema, withOutbox, settings } = spec;
      const db = createDb(databaseUrl!, schema, poolMax, { ...settings, ...lockTimeout });
      dbs.set(name, db);
      const unobservePool = observePool(schema, db);
      cleanup.push(async () => unobservePool());
      await prepareSchema(db, spec);
      const relay = withOutbox ? createOutboxRelay(db, transport, log.child({ outbox: schema }), { schema }) : undefined;
      if (relay) {
        relays.push(relay);
        const unobserve = observeOutbox(schema, () => relay.backlog());
        cleanup.push(async () => unobserve());
      }
      const mlog = log.child({ module: name });
      const bus: ServiceBus = {
        subscribe: (sub, type, handler) => transport.subscribe(`${name}-${sub}`, type, handler),
        broadcast: (type, payload) => transport.broadcast(type, payload),
        onBroadcast: (type, handler) => transport.onBroadcast(type, handler),
        listen: (type, handler) => transport.listen(type, handler),
        drain: async () => relay?.drain(),
      };
      const relayOf = { notify: () => relay?.notify() };
      return {
        config, log: mlog, db, bus, store, clients,
        unitOfWork: (storesOf) => createUnitOfWork(db, storesOf, relayOf), oneStatementUnit: createOneStatementUnit(db, relayOf),
      };
    }

    const instances: Array<{ name: string; inst: ServiceInstance }> = [];
    for (const m of selected) {
      const ctx = await contextFor(m.name, serviceSchema(m));
      const inst = await m.init(ctx);
      routeFns.push((r) => inst.routes(r));
      instances.push({ name: m.name, inst });
    }

    let serviceUrl: string | undefined;
    let health: ReturnType<typeof createHealth> | undefined;
    // A service target serves its port; the all-in-one process serves all of them on one port
    // when SERVICE_PORT asks for it (internal callers and gRPC tools on a single machine).
    const servesPort = !opts.headless && (split ? config.target !== "gateway" : config.servicePortRequested);
    if (servesPort) {
      // The services this port serves, as their routes register them.
      const probe = createConnectRouter();
      allRoutes(probe);
      const served = [...new Map(probe.handlers.map((h) => [h.service.typeName, h.service])).values()];
      health = createHealth(served.map((s) => s.typeName));
      const reflection = reflectionRoutes([...served, Health]);
      // Binary unary Connect calls (what the services send each other) are answered by the fast
      // path; gRPC, JSON, streams and the rest by connect-node, with the same interceptors.
      const handler = createUnaryFastPath({
        routes: allRoutes,
        interceptors: incoming,
        readMaxBytes: SERVICE_READ_MAX_BYTES,
        fallback: connectNodeAdapter({
          routes: (r) => { allRoutes(r); health!.routes(r); reflection(r); },
          interceptors: incoming,
          readMaxBytes: SERVICE_READ_MAX_BYTES,
          contextValues: deadlineValues,
        }),
      });
      const server = http2.createServer((req, res) => {
        if (req.url === "/healthz") { res.writeHead(200, { "content-type": "text/plain" }); res.end("ok"); return; }
        handler(req, res);
      });
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(config.servicePort, config.host, () => resolve());
      });
      const addr = server.address() as AddressInfo;
      serviceUrl = `http://${config.host}:${addr.port}`;
      const sessions = new Set<http2.ServerHttp2Session>();
      server.on("session", (session) => { sessions.add(session); session.once("close", () => sessions.delete(session)); });
      cleanup.push(() => new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Peers keep their sessions open: a GOAWAY on each lets the streams in flight finish and
        // sends new calls elsewhere (or to a refused connection: 503 unavailable at the gateway).
        // Bounded like the gateway's drain, within SHUTDOWN_TIMEOUT_MS.
        for (const session of sessions) session.close();
        setTimeout(resolve, Math.max(1000, config.shutdownTimeoutMs - 5000)).unref();
      }));
    }

    for (const { inst } of instances) {
      if (inst.start) await inst.start();
      if (inst.stop) cleanup.push(() => inst.stop!());
    }
    for (const relay of relays) relay.start();
    if (health) {
      // Ready once migrated and started; then as long as the database and the bus answer.
      const stopFollowing = followReadiness(health, async () => {
        if (!transport.connected()) return false;
        for (const db of dbs.values()) await db.raw("SELECT 1").timeout(2000);
        return true;
      });
      cleanup.unshift(async () => stopFollowing());
    }

    let url: string | undefined;
    let banner: Record<string, unknown> = {};
    if (runGateway) {
      const ctx = await contextFor("gateway", gatewaySchema(opts.gateway));
      const gw = await opts.gateway.init(ctx);
      url = await gw.listen();
      // With PORT=0 the origins are known only now.
      if (config.originsDerived.baseUrl) config.baseUrl = url;
      if (config.originsDerived.appUrl) config.appUrl = config.baseUrl;
      if (config.originsDerived.mcpUrl) config.mcpUrl = config.baseUrl;
      cleanup.push(() => gw.stop());
      banner = gw.banner ?? {};
    }

    return {
      config,
      log,
      url,
      serviceUrl,
      metricsUrl: telemetry.metricsUrl,
      banner,
      databaseUrl: databaseUrl!,
      clients,
      store,
      dbOf: (name) => dbs.get(name),
      publishPendingEvents,
      async drainEvents() {
        await publishPendingEvents();
        await transport.settle();
      },
      subscribe: (name, type, handler) => transport.subscribe(name, type, handler),
      async runJob(name, args) {
        const found = instances.find(({ inst }) => inst.jobs?.[name]);
        if (!found) throw new ConfigError(`unknown job "${name}"; known: ${instances.flatMap(({ inst }) => Object.keys(inst.jobs ?? {})).join(", ")}`);
        return found.inst.jobs![name]!(args);
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

export { SERVICE_NAMES };
