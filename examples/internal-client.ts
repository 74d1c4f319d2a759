/**
 * An internal service calling this system's RPCs directly, without the gateway: gRPC over
 * HTTP/2 to a service port, typed request and response messages generated from proto/, and its
 * own authentication in the Authorization header.
 *
 * As a user, with the user's access token (the service checks the token's scopes, as the gateway
 * does):
 *   SERVICE_URL=http://127.0.0.1:9090 TOKEN=<access token> node --import tsx examples/internal-client.ts
 * As itself, with a service credential (`npm run -s admin -- service create <name>`): only the
 * operations that need no user, here a public search:
 *   SERVICE_URL=http://127.0.0.1:9090 SERVICE_CREDENTIAL=<cms_svc_...> QUERY=sunset node --import tsx examples/internal-client.ts
 *
 * SERVICE_URL is the collections service's port: a `--target=collections` process, or the
 * all-in-one process started with SERVICE_PORT set (every service on one port). Prints JSON.
 */
import { toJson } from "@bufbuild/protobuf";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { CollectionsService, ListCollectionsResponseSchema, SearchCollectionsResponseSchema } from "@cms/contracts/collections/v1/collections_pb";

const baseUrl = process.env.SERVICE_URL ?? "http://127.0.0.1:9090";
const secret = process.env.TOKEN ?? process.env.SERVICE_CREDENTIAL;
if (!secret) {
  console.error("set TOKEN (a user's access token) or SERVICE_CREDENTIAL (a service credential)");
  process.exit(2);
}

const bearer: Interceptor = (next) => (req) => {
  req.header.set("authorization", `Bearer ${secret}`);
  return next(req);
};
const collections = createClient(CollectionsService, createGrpcTransport({ baseUrl, interceptors: [bearer] }));

if (process.env.TOKEN) {
  const page = await collections.listCollections({ limit: 5 });
  console.log(JSON.stringify(toJson(ListCollectionsResponseSchema, page)));
} else {
  const found = await collections.searchCollections({ query: process.env.QUERY ?? "sunset", scope: ["public"] });
  console.log(JSON.stringify(toJson(SearchCollectionsResponseSchema, found)));
}
