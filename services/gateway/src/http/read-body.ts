/**
 * Reading a request body under a size bound, for every route that takes one (the op endpoint, the
 * MCP endpoint, the OAuth endpoints, the account forms): a body beyond the bound, declared or
 * sent, is refused before more of it is kept, and one that ends early is the client's error.
 */
import type { IncomingMessage } from "node:http";
import { AppError } from "@cms/platform";

/**
 * The request body, refused (413 payload_too_large, `tooLarge` as its detail) beyond `limit`
 * bytes, or 400 invalid_request when it ends before its end.
 */
export async function readBody(req: IncomingMessage, limit: number, tooLarge = `The request body exceeds ${limit} bytes.`): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (declared > limit) throw new AppError("payload_too_large", tooLarge);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > limit) throw new AppError("payload_too_large", tooLarge);
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    if (err instanceof AppError) throw err;
    // The client stopped sending before the end (a body shorter than its Content-Length).
    throw new AppError("invalid_request", `The request body ended after ${size} bytes, before its end (Content-Length ${req.headers["content-length"] ?? "not given"}).`);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}
