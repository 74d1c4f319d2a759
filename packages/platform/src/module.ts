/**
 * The module table contract (as in Loki/Mimir): every service is a module with a name, its own
 * schema and migrations, and an init() that returns Connect routes plus start/stop. The same
 * modules run all in one process or one per process; only the wiring differs (launcher.ts).
 */
import type { ConnectRouter, Client, Transport } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import type { Knex } from "knex";
import type { Config, ServiceName } from "./config.js";
import type { Logger } from "./logger.js";
import type { ObjectStore } from "./object-store.js";
import type { EventHandler } from "./bus.js";
import type { OneStatementUnit, Queryable, UnitOfWork } from "./unit-of-work.js";

/**
 * The bus as a service sees it. Events a change causes are written through the unit of work's
 * EventWriter (ServiceContext.unitOfWork), in the change's transaction; this is for the rest.
 */
export interface ServiceBus {
  /** Durable subscription; `name` identifies the consumer group across replicas. */
  subscribe(name: string, type: string, handler: EventHandler): Promise<void>;
  /** A notification to every process (not stored; e.g. a revoked token, a player command). */
  broadcast(type: string, payload: Record<string, unknown>): void;
  onBroadcast(type: string, handler: (payload: Record<string, unknown>) => void): Promise<void>;
  /** Every published event of `type`, live, in this process (not durable). */
  listen(type: string, handler: (event: import("./bus.js").BusEvent) => void): Promise<void>;
  /** Publishes everything pending in this service's outbox now (tests, shutdown). */
  drain(): Promise<void>;
}

export interface Clients {
  get<T extends DescService>(service: T): Client<T>;
}

export interface ServiceContext {
  config: Config;
  log: Logger;
  db: Knex;
  bus: ServiceBus;
  store: ObjectStore;
  clients: Clients;
  /** A unit of work over this service's database: stores bound to one transaction, events to its outbox. */
  unitOfWork<S>(storesOf: (q: Queryable) => S): UnitOfWork<S>;
  /** A unit of work of one statement and its events, sent as one (the hottest writes of one row). */
  oneStatementUnit: OneStatementUnit;
}

/** A job runnable once from the admin CLI (`jobs run <name>`) and on the module's own schedule. */
export type Job = (args: Record<string, unknown>) => Promise<Record<string, unknown>>;

export interface ServiceInstance {
  routes(router: ConnectRouter): void;
  jobs?: Record<string, Job>;
  start?(): Promise<void>;
  stop?(): Promise<void>;
}

export interface ServiceModule {
  name: ServiceName;
  /** PostgreSQL schema the service owns. */
  schema: string;
  migrations: ReadonlyArray<readonly [string, import("./db.js").Migration]>;
  /** PostgreSQL extensions the schema needs (created in `public`). */
  extensions?: string[];
  /** Settings of every session of the service's pool (see SessionSettings in db.ts). */
  sessionSettings?: import("./db.js").SessionSettings;
  init(ctx: ServiceContext): Promise<ServiceInstance>;
}

export type TransportFor = (owner: ServiceName) => Transport;
