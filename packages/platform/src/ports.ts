/** Free TCP ports on 127.0.0.1, for processes that are told their port before they bind it. */
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";

/** Where ports are drawn from when the OS says where its ephemeral ports are (ephemeralPorts). */
const BAND_START = 10_000;
/** Random ports tried in the band before a probe falls back to listen(0). */
const BAND_TRIES = 50;

/**
 * Linux's range of ephemeral ports, [low, high]: the local ports of outgoing connections, and
 * what listen(0) hands out. Undefined where /proc does not say (another OS).
 */
export function ephemeralPorts(rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"): [number, number] | undefined {
  try {
    const [low, high] = readFileSync(rangeFile, "utf8").trim().split(/\s+/).map(Number);
    return Number.isInteger(low) && Number.isInteger(high) && low! <= high! ? [low!, high!] : undefined;
  } catch {
    return undefined;
  }
}

/** Where freePorts draws from: below this host's ephemeral range, read once; undefined: listen(0). */
let band: { start: number; size: number } | undefined | null = null;
function portBand(): { start: number; size: number } | undefined {
  if (band === null) {
    const range = ephemeralPorts();
    band = range && range[0] - BAND_START >= 1000 ? { start: BAND_START, size: range[0] - BAND_START } : undefined;
  }
  return band;
}

function listenOn(srv: Server, port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => (err.code === "EADDRINUSE" || err.code === "EACCES" ? resolve(false) : reject(err));
    srv.once("error", onError);
    srv.listen(port, "127.0.0.1", () => { srv.off("error", onError); resolve(true); });
  });
}

/**
 * `count` distinct ports free at the moment of asking. Each probe stays listening until all are
 * taken: a port closed at once can be handed out again by the next listen(0) (4 probes in 3,000
 * repeated one of the last six here), and two processes of one system were then given the same
 * port. Whoever binds a port later can still lose it to another process in between; to make that
 * rare, the ports are drawn at random from below the ephemeral range when the OS tells where it
 * is: a port of that range, which listen(0) hands out, is also the next local port of any
 * outgoing connection, and the tests open hundreds of them (CI's split system once failed to
 * start on EADDRINUSE, its port taken between the probe and the service's bind).
 */
export async function freePorts(count: number): Promise<number[]> {
  const band = portBand();
  const probes: Server[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const srv = createServer();
      probes.push(srv);
      let bound = false;
      for (let t = 0; band && !bound && t < BAND_TRIES; t++) bound = await listenOn(srv, band.start + Math.floor(Math.random() * band.size));
      if (!bound && !(await listenOn(srv, 0))) throw new Error("no free port on 127.0.0.1");
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
