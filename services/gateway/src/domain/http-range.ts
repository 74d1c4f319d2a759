/**
 * HTTP conditional and range request rules (RFC 9110) for streamed objects, as plain functions:
 * one byte range per request (a multi-range request is answered with the whole object, which
 * the RFC allows), suffix ranges, open-ended ranges, If-None-Match and If-Range with ETags.
 */

export type RangeResult =
  | { kind: "full" }
  | { kind: "partial"; start: number; end: number }
  | { kind: "unsatisfiable" };

const FULL: RangeResult = { kind: "full" };

/** The byte range a Range header asks of an object of `size` bytes. */
export function parseRange(header: string | undefined, size: number): RangeResult {
  if (!header) return FULL;
  const m = /^\s*bytes\s*=\s*(.*)$/i.exec(header);
  // Another unit, or a malformed header, is ignored: the whole object is sent.
  if (!m) return FULL;
  const specs = m[1]!.split(",").map((s) => s.trim()).filter(Boolean);
  if (specs.length !== 1) return FULL;
  const r = /^(\d*)-(\d*)$/.exec(specs[0]!.replace(/\s+/g, ""));
  if (!r || (r[1] === "" && r[2] === "")) return FULL;
  if (r[1] === "") {
    const suffix = Number(r[2]);
    if (suffix === 0 || size === 0) return { kind: "unsatisfiable" };
    return { kind: "partial", start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(r[1]);
  if (r[2] !== "" && Number(r[2]) < start) return FULL;
  if (start >= size) return { kind: "unsatisfiable" };
  const end = r[2] === "" ? size - 1 : Math.min(Number(r[2]), size - 1);
  return { kind: "partial", start, end };
}

function opaque(tag: string): string {
  return tag.trim().replace(/^W\//, "");
}

/** If-None-Match: does the header name this ETag (weak comparison, `*` matches any)? */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === "*") return true;
  return header.split(",").some((t) => opaque(t) === opaque(etag));
}

/** If-Range: a range applies only while the ETag is still the one named (strong comparison). */
export function ifRangeHolds(header: string | undefined, etag: string): boolean {
  if (!header) return true;
  const h = header.trim();
  if (h.startsWith("W/")) return false;
  // A date validator: objects under one key never change, so a date cannot be stale.
  if (!h.startsWith('"')) return true;
  return h === etag;
}

/** Content-Disposition with an ASCII fallback and the UTF-8 name (RFC 6266 / 8187). */
export function contentDisposition(kind: "inline" | "attachment", filename: string): string {
  const ascii = filename.normalize("NFKD").replace(/[^\x20-\x7e]/g, "_").replace(/["\\]/g, "_") || "file";
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}
