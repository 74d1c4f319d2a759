/**
 * grpc.health.v1.Health on every service port: Check, Watch and List, for the whole server
 * ("") and for each service it serves. The status follows readiness: NOT_SERVING until the
 * migrations ran and the modules started, then SERVING while the database answers and the event
 * bus is connected (checked every few seconds), NOT_SERVING while either is down. Kubernetes
 * probes it natively (`grpc:` probes); grpcurl and grpc_health_probe work too.
 */
import { EventEmitter, on } from "node:events";
import type { ConnectRouter } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "@cms/contracts/grpc/health/v1/health_pb";
import { AppError } from "./errors.js";

export { Status as ServingStatus };

export interface HealthState {
  /** Sets the status of every registered name (the server and its services). */
  setAll(status: Status): void;
  status(name: string): Status | undefined;
  names(): string[];
}

export interface HealthService extends HealthState {
  routes(router: ConnectRouter): void;
}

/** Health of a server serving `services` (type names); all start NOT_SERVING. */
export function createHealth(services: string[]): HealthService {
  const statuses = new Map<string, Status>([["", Status.NOT_SERVING], ...services.map((s) => [s, Status.NOT_SERVING] as const)]);
  const changes = new EventEmitter();
  changes.setMaxListeners(0);
  const state: HealthState = {
    setAll(status) {
      for (const name of statuses.keys()) {
        if (statuses.get(name) === status) continue;
        statuses.set(name, status);
        changes.emit(name, status);
      }
    },
    status: (name) => statuses.get(name),
    names: () => [...statuses.keys()],
  };
  return {
    ...state,
    routes(router) {
      router.service(Health, {
        check(req) {
          const status = statuses.get(req.service);
          if (status === undefined) throw new AppError("not_found", `Unknown service "${req.service}".`);
          return { status };
        },
        async *watch(req, ctx) {
          // The current status at once, then every change, until the client goes away.
          let last = statuses.get(req.service) ?? Status.SERVICE_UNKNOWN;
          yield { status: last };
          try {
            for await (const [status] of on(changes, req.service, { signal: ctx.signal })) {
              if (status === last) continue;
              last = status as Status;
              yield { status: last };
            }
          } catch (err) {
            if ((err as Error).name !== "AbortError") throw err;
          }
        },
        list() {
          return { statuses: Object.fromEntries([...statuses].map(([name, status]) => [name, { status }])) };
        },
      });
    },
  };
}

/**
 * Keeps `state` following `probe` (database reachable, bus connected): checked now and every
 * `intervalMs`; returns a stop function.
 */
export function followReadiness(state: HealthState, probe: () => Promise<boolean>, intervalMs = 5000): () => void {
  let stopped = false;
  const check = async () => {
    let ok = false;
    try { ok = await probe(); } catch { ok = false; }
    if (!stopped) state.setAll(ok ? Status.SERVING : Status.NOT_SERVING);
  };
  void check();
  const timer = setInterval(() => void check(), intervalMs);
  timer.unref();
  return () => { stopped = true; clearInterval(timer); };
}
