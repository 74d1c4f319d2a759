/**
 * media.download over MCP. At the JSON endpoint it answers the stored file's raw bytes; a tool
 * result is JSON, so the tool answers gateway.v1.McpDownload (the contract's rule): a text file
 * inline, a binary file of 16 KB or less as base64, anything larger as a short-lived download
 * URL minted by media.download_url for the same caller. The operation itself (scopes, access,
 * which object) runs as at the JSON endpoint; only the rendering of its answer differs.
 */
import { isUtf8 } from "node:buffer";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { StoredObject } from "@cms/contracts/common/v1/common_pb";
import { McpDownloadSchema } from "@cms/contracts/gateway/v1/mcp_pb";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ContentBlock } from "@modelcontextprotocol/sdk/types.js";
import { AppError, readObject, type Caller, type ErrorCode, type ObjectStore } from "@cms/platform";
import type { OpRegistry } from "../app/registry.js";
import type { RunOperation } from "../app/run-operation.js";
import { renderJson } from "../domain/render.js";
import { MEDIA_PROXY_PREFIX } from "../http/download-routes.js";

/** The contract's bound for binary bytes inline (base64) over MCP: 16 KB. */
export const INLINE_BINARY_MAX = 16 * 1024;
/** Text inline up to this size; a larger text file is a download URL like any large file. */
export const INLINE_TEXT_MAX = 256 * 1024;

/** Media types whose bytes are text to a reader (when they are valid UTF-8). */
export function isTextType(contentType: string): boolean {
  const type = contentType.split(";")[0]!.trim().toLowerCase();
  return type.startsWith("text/") || type.endsWith("+json") || type.endsWith("+xml")
    || ["application/json", "application/xml", "application/javascript", "application/ecmascript", "application/x-yaml", "application/yaml", "application/toml", "application/sql", "application/x-sh", "application/csv"].includes(type);
}

/** Whether the bytes are worth reading for an inline answer (before reading them). */
export function readsInline(contentType: string, size: number): boolean {
  return size <= INLINE_BINARY_MAX || (isTextType(contentType) && size <= INLINE_TEXT_MAX);
}

/** How a file is given, once its bytes (when read) are known to be UTF-8 or not. */
export function encodingOf(contentType: string, size: number, utf8: boolean | undefined): "text" | "base64" | "url" {
  if (utf8 && isTextType(contentType) && size <= INLINE_TEXT_MAX) return "text";
  if (size <= INLINE_BINARY_MAX) return "base64";
  return "url";
}

/** A media.download answer over MCP: the McpDownload JSON, and content blocks for clients that show files. */
export interface RenderedDownload { body: string; blocks: ContentBlock[] }

/** What rendering a download needs: the object store, the registry and runner (media.download_url). */
export interface DownloadDeps { store: ObjectStore; registry: OpRegistry; run: RunOperation; baseUrl: () => string }

/** Renders the object media.download named for the caller. */
export function createDownloadRenderer(deps: DownloadDeps) {
  return async function renderDownload(mediaId: number, object: StoredObject, caller: Caller | undefined): Promise<RenderedDownload> {
    const info = await deps.store.head(object.storeKey);
    if (!info) throw new AppError("not_found", "The stored file is missing.");
    const contentType = object.contentType || info.contentType || "application/octet-stream";
    const filename = object.filename || object.storeKey.split("/").pop() || "file";
    let bytes: Buffer | undefined;
    if (readsInline(contentType, info.size)) {
      bytes = await readObject(deps.store, object.storeKey, { maxBytes: INLINE_TEXT_MAX });
      if (!bytes) throw new AppError("not_found", "The stored file is missing.");
    }
    const size = bytes?.length ?? info.size;
    const encoding = encodingOf(contentType, size, bytes ? isUtf8(bytes) : undefined);
    const answer: MessageInitShape<typeof McpDownloadSchema> = {
      mediaId: BigInt(mediaId), filename, contentType, contentLength: BigInt(size), sha256: object.sha256, encoding,
    };
    const blocks: ContentBlock[] = [];
    if (encoding === "text") {
      answer.text = bytes!.toString("utf8");
    } else if (encoding === "base64") {
      const data = bytes!.toString("base64");
      answer.contentBase64 = data;
      const kind = contentType.split("/")[0];
      if (kind === "image" || kind === "audio") blocks.push({ type: kind, data, mimeType: contentType });
      else blocks.push({ type: "resource", resource: { uri: `${deps.baseUrl()}${MEDIA_PROXY_PREFIX}${mediaId}/main`, mimeType: contentType, blob: data } });
    } else {
      const op = deps.registry.get("media.download_url")!;
      const link = await deps.run(op, { media_id: mediaId }, caller);
      if (link.status !== 200) {
        const { error, detail, ...extra } = JSON.parse(link.body) as { error: ErrorCode; detail: string };
        throw new AppError(error, detail, extra, link.status);
      }
      const { url, expires_at } = JSON.parse(link.body) as { url: string; expires_at: string };
      answer.downloadUrl = url;
      answer.expiresAt = timestampFromDate(new Date(expires_at));
      blocks.push({ type: "resource_link", uri: url, name: filename, mimeType: contentType, size });
    }
    return { body: renderJson(McpDownloadSchema, create(McpDownloadSchema, answer)), blocks };
  };
}
