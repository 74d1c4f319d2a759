/**
 * The HTTP/2 session manager of the service-to-service clients (split mode). connect-node's
 * Http2SessionManager destroys a connection that receives a GOAWAY with no open streams, and
 * Node raises that error on the session only once its socket has closed; when a new request
 * reconnects in between, the manager has already removed its error listeners, and the error
 * is uncaught: the calling process crashes (connectrpc/connect-es#1768, fix not released; 2.2
 * needs Node 22). A peer that restarts or shuts down sends exactly that GOAWAY, so a gateway
 * crashed whenever a service it had called went away at the wrong moment.
 *
 * Every session a request goes through gets one more error listener, which keeps such a late
 * error from being uncaught. Errors still reach the requests through their streams, and the
 * manager through its own listeners while it has them.
 */
import type { ClientHttp2Session } from "node:http2";
import { Http2SessionManager } from "@connectrpc/connect-node";

const guarded = new WeakSet<ClientHttp2Session>();
const ignoreLateError = () => {};

export class GoawaySafeSessionManager extends Http2SessionManager {
  override async request(...args: Parameters<Http2SessionManager["request"]>): ReturnType<Http2SessionManager["request"]> {
    const stream = await super.request(...args);
    const session = stream.session as ClientHttp2Session | undefined;
    if (session && !guarded.has(session)) {
      guarded.add(session);
      session.on("error", ignoreLateError);
    }
    return stream;
  }
}
