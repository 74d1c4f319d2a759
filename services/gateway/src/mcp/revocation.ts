/**
 * mcp.revoke_session ends the caller's MCP sessions as well: the auth service revokes the
 * caller's MCP tokens (so their next request is refused anyway), and the gateway closes the
 * sessions, so that a session id stays of no use with a token obtained later. Whichever surface
 * the operation is called through (the JSON endpoint, the web app, the MCP tool itself).
 */
import type { RunOperation } from "../app/run-operation.js";
import type { McpSessionStore } from "../store/mcp-session-store.js";

/** The operation that ends the caller's MCP sessions. */
export const REVOKE_SESSION_OP = "mcp.revoke_session";

/** The runner, closing the caller's MCP sessions after a successful mcp.revoke_session. */
export function closingSessionsOnRevoke(run: RunOperation, sessions: Pick<McpSessionStore, "closeAll">): RunOperation {
  return async (op, fields, caller) => {
    const outcome = await run(op, fields, caller);
    if (op.name === REVOKE_SESSION_OP && caller && outcome.status < 400) await sessions.closeAll(caller.userId);
    return outcome;
  };
}
