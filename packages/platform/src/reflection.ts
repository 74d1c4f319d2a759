/**
 * gRPC server reflection (grpc.reflection.v1 and the v1alpha that older clients ask for) on every
 * service port, so that `grpcurl -plaintext host:9090 list` and `describe` work without a copy
 * of proto/. It answers from the descriptors embedded in the generated code: the files of the
 * services served and everything they import.
 */
import { toBinary, type DescEnum, type DescExtension, type DescFile, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { ServerReflection as ReflectionV1, type ServerReflectionRequest } from "@cms/contracts/grpc/reflection/v1/reflection_pb";
import { ServerReflection as ReflectionV1alpha } from "@cms/contracts/grpc/reflection/v1alpha/reflection_pb";

/** gRPC status codes used in reflection error responses. */
const NOT_FOUND = 5;
const INVALID_ARGUMENT = 3;

interface Index {
  services: string[];
  byFilename: Map<string, DescFile>;
  bySymbol: Map<string, DescFile>;
  /** extendee type name -> extension number -> file */
  extensions: Map<string, Map<number, DescFile>>;
}

function indexFiles(services: DescService[]): Index {
  const index: Index = { services: services.map((s) => s.typeName), byFilename: new Map(), bySymbol: new Map(), extensions: new Map() };
  const addExtension = (ext: DescExtension, file: DescFile) => {
    index.bySymbol.set(ext.typeName, file);
    const byNumber = index.extensions.get(ext.extendee.typeName) ?? new Map<number, DescFile>();
    byNumber.set(ext.number, file);
    index.extensions.set(ext.extendee.typeName, byNumber);
  };
  const addEnum = (e: DescEnum, file: DescFile) => index.bySymbol.set(e.typeName, file);
  const addMessage = (m: DescMessage, file: DescFile) => {
    index.bySymbol.set(m.typeName, file);
    for (const f of m.fields) index.bySymbol.set(`${m.typeName}.${f.name}`, file);
    for (const n of m.nestedMessages) addMessage(n, file);
    for (const e of m.nestedEnums) addEnum(e, file);
    for (const x of m.nestedExtensions) addExtension(x, file);
  };
  const visit = (file: DescFile) => {
    if (index.byFilename.has(file.proto.name)) return;
    index.byFilename.set(file.proto.name, file);
    for (const m of file.messages) addMessage(m, file);
    for (const e of file.enums) addEnum(e, file);
    for (const x of file.extensions) addExtension(x, file);
    for (const s of file.services) {
      index.bySymbol.set(s.typeName, file);
      for (const m of s.methods) index.bySymbol.set(`${s.typeName}.${m.name}`, file);
    }
    for (const d of file.dependencies) visit(d);
  };
  for (const s of services) visit(s.file);
  return index;
}

/** The file and every file it imports, transitively, each once, as serialized FileDescriptorProtos. */
function withDependencies(file: DescFile): Uint8Array[] {
  const out: Uint8Array[] = [];
  const seen = new Set<string>();
  const walk = (f: DescFile) => {
    if (seen.has(f.proto.name)) return;
    seen.add(f.proto.name);
    out.push(toBinary(FileDescriptorProtoSchema, f.proto));
    for (const d of f.dependencies) walk(d);
  };
  walk(file);
  return out;
}

type Answer = ReturnType<typeof answer>;

function answer(index: Index, req: ServerReflectionRequest) {
  const r = req.messageRequest;
  const files = (file: DescFile | undefined, what: string) => (file
    ? { case: "fileDescriptorResponse" as const, value: { fileDescriptorProto: withDependencies(file) } }
    : { case: "errorResponse" as const, value: { errorCode: NOT_FOUND, errorMessage: `${what} not found` } });
  switch (r.case) {
    case "listServices":
      return { case: "listServicesResponse" as const, value: { service: index.services.map((name) => ({ name })) } };
    case "fileByFilename":
      return files(index.byFilename.get(r.value), `file ${r.value}`);
    case "fileContainingSymbol":
      return files(index.bySymbol.get(r.value.replace(/^\./, "")), `symbol ${r.value}`);
    case "fileContainingExtension":
      return files(index.extensions.get(r.value.containingType.replace(/^\./, ""))?.get(r.value.extensionNumber), `extension ${r.value.extensionNumber} of ${r.value.containingType}`);
    case "allExtensionNumbersOfType": {
      const type = r.value.replace(/^\./, "");
      if (!index.bySymbol.has(type)) return { case: "errorResponse" as const, value: { errorCode: NOT_FOUND, errorMessage: `type ${r.value} not found` } };
      return { case: "allExtensionNumbersResponse" as const, value: { baseTypeName: type, extensionNumber: [...(index.extensions.get(type)?.keys() ?? [])] } };
    }
    default:
      return { case: "errorResponse" as const, value: { errorCode: INVALID_ARGUMENT, errorMessage: "empty reflection request" } };
  }
}

/** Reflection routes for a server serving `services` (the reflection and health services included). */
export function reflectionRoutes(services: DescService[]): (router: ConnectRouter) => void {
  const all = [...services, ReflectionV1, ReflectionV1alpha];
  const index = indexFiles(all);
  // Plain objects, not messages: the same answer serves both versions' message types.
  const respond = (req: ServerReflectionRequest) => ({
    validHost: req.host,
    originalRequest: { host: req.host, messageRequest: req.messageRequest },
    messageResponse: answer(index, req) as Answer,
  });
  return (router) => {
    router.service(ReflectionV1, {
      async *serverReflectionInfo(requests) {
        for await (const req of requests) yield respond(req);
      },
    });
    router.service(ReflectionV1alpha, {
      async *serverReflectionInfo(requests) {
        // The v1alpha messages have the same fields as v1's.
        for await (const req of requests) yield respond(req as unknown as ServerReflectionRequest) as never;
      },
    });
  };
}
