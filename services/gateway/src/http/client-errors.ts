/**
 * Requests Node's HTTP parser refuses before any route sees them (a malformed request head, an
 * oversized header, broken chunked encoding, a request that never completes): answered, where
 * the socket still takes an answer, with the contract's JSON error shape instead of Node's bare
 * status line, and the connection closed.
 */
import type { Socket } from "node:net";

/** The status and sentence for a parser error code (llhttp's HPE_* codes, Node's ERR_*). */
export function clientErrorAnswer(code: string | undefined): { status: number; reason: string; detail: string } {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return { status: 431, reason: "Request Header Fields Too Large", detail: "The request's headers are larger than this server takes (16 KiB)." };
    case "ERR_HTTP_REQUEST_TIMEOUT":
    case "ERR_HTTP_HEADERS_TIMEOUT":
      return { status: 408, reason: "Request Timeout", detail: "The request did not arrive completely in time." };
    case "HPE_INVALID_EOF_STATE":
      return { status: 400, reason: "Bad Request", detail: "The request ended before its body was complete (shorter than its Content-Length, or an unfinished chunked body)." };
    case "HPE_INVALID_CHUNK_SIZE":
    case "HPE_INVALID_TRANSFER_ENCODING":
    case "HPE_UNEXPECTED_CONTENT_LENGTH":
    case "HPE_INVALID_CONTENT_LENGTH":
      return { status: 400, reason: "Bad Request", detail: "The request's body framing is invalid (Content-Length or chunked encoding)." };
    default:
      return { status: 400, reason: "Bad Request", detail: "The request is not valid HTTP/1.1 (its request line or a header is malformed)." };
  }
}

/** The `clientError` listener of the gateway's server. */
export function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const { status, reason, detail } = clientErrorAnswer(err.code);
  const body = JSON.stringify({ error: "invalid_request", detail });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
