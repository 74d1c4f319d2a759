/**
 * An admitted operation to its answer: a meta operation is answered by the gateway from its
 * registry; every other one is decoded into its request message and called over Connect on the
 * owning service, as the caller (a signed assertion, platform authn.ts, never a plain header),
 * and its typed response rendered to the contract's JSON.
 */
import { fromJson, type JsonValue, type Message } from "@bufbuild/protobuf";
import type { StoredObject } from "@cms/contracts/common/v1/common_pb";
import { createContextValues } from "@connectrpc/connect";
import { AppError, actAsKey, fromConnectError, type Caller, type Clients } from "@cms/platform";
import { renderJson } from "../domain/render.js";
import type { MetaHandler } from "./meta.js";
import type { OpEntry } from "./registry.js";

/** What an operation answered: its JSON, or the stored object a streams_object operation names. */
export interface Dispatched { status: number; body: string; object?: StoredObject }

/** Runs one operation for a caller (undefined for an anonymous call); throws an AppError. */
export type Dispatch = (op: OpEntry, fields: Record<string, unknown>, caller: Caller | undefined) => Promise<Dispatched>;

/**
 * What dispatching needs: the services' clients (the system's clients bound every call made
 * outside a handled call to CALL_TIMEOUT_MS, the gateway's deadline) and the meta operations.
 */
export interface DispatchDeps {
  clients: Clients;
  meta: Record<string, MetaHandler>;
}

/** The dispatcher of every operation in the registry. */
export function createDispatch({ clients, meta }: DispatchDeps): Dispatch {
  /** Rendered JSON of messages answered more than once (meta answers built once). */
  const renderedOnce = new WeakMap<Message, string>();

  return async function dispatch(op, fields, caller) {
    if (op.owner === "gateway") {
      const handler = meta[op.name];
      if (!handler) throw new AppError("not_implemented", `${op.name} is not implemented by this gateway.`);
      const answer = handler(fields, caller);
      let body = renderedOnce.get(answer);
      if (body === undefined) {
        body = renderJson(op.method.output, answer);
        renderedOnce.set(answer, body);
      }
      return { status: 200, body };
    }
    let message;
    try {
      message = fromJson(op.method.input, fields as JsonValue, { ignoreUnknownFields: false });
    } catch (err) {
      throw new AppError("invalid_request", `The request does not match ${op.name}: ${(err as Error).message}`);
    }
    const client = clients.get(op.service) as unknown as Record<string, (m: unknown, o: unknown) => Promise<Message>>;
    const contextValues = createContextValues();
    if (caller) contextValues.set(actAsKey, caller);
    let res: Message;
    try {
      res = await client[op.method.localName]!(message, { contextValues });
    } catch (err) {
      throw fromConnectError(err);
    }
    if (op.streamsObject) {
      // The service named the object; the bytes go from the store to the client, not as JSON.
      const object = (res as Message & { object?: StoredObject }).object;
      if (object) return { status: 200, body: "", object };
    }
    return { status: 200, body: renderJson(op.method.output, res) };
  };
}
