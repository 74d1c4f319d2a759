/**
 * Drop links (/drop/<grant>): GET serves a small HTML page with a file input and a drop zone;
 * POST takes the multipart/form-data it submits (parsed by busboy, streamed: files go straight
 * to the object store under the 100 MiB cap, never whole in memory) and asks the media service
 * to turn each stored file into a media item. The grant is checked here (signature, purpose,
 * expiry) and by the media service (and the minting user's upload permission) before any byte
 * is stored. Answers HTML to a browser form, JSON to a client that asks for it (Accept).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import { PassThrough, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import busboy from "busboy";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { MediaService, type CheckDropGrantResponse } from "@cms/contracts/media/v1/media_pb";
import { MediaSchema } from "@cms/contracts/media/v1/resources_pb";
import { AppError, fromConnectError, safeFilename, verifyGrant, type Clients, type Logger, type ObjectStore } from "@cms/platform";
import { MAX_PUT_BYTES } from "@cms/platform/upload-urls";
import { escapeHtml } from "../domain/html.js";
import { renderObject } from "../domain/render.js";
import { failureOutcome } from "../app/run-operation.js";
import { sendJson, statusHeaders } from "./answers.js";
import { uploadBody } from "./read-body.js";

/** Where media.drop_link links point. */
export const DROP_PREFIX = "/drop/";
const MAX_FILES = 20;

interface FileOutcome { filename: string; media?: Record<string, unknown>; error?: Record<string, unknown>; status?: number }


function sendHtml(res: ServerResponse, status: number, title: string, body: string, nonce?: string): void {
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title>${nonce ? `<style nonce="${nonce}">${STYLE}</style>` : ""}</head>
<body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`;
  res.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "content-length": Buffer.byteLength(html),
    "cache-control": "no-store",
    // The URL carries the grant: it must not leak through a Referer header.
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "content-security-policy": `default-src 'none'; ${nonce ? `style-src 'nonce-${nonce}'; script-src 'nonce-${nonce}'; ` : ""}connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
    ...statusHeaders(status),
  });
  res.end(html);
}

const STYLE = `body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}main{max-width:40rem;margin:3rem auto;padding:0 1rem}
#zone{border:2px dashed #8a94a6;border-radius:12px;padding:2.5rem 1rem;text-align:center;background:#fff}#zone.over{border-color:#2f6fed;background:#eef3ff}
button{margin-top:1rem;padding:.5rem 1.2rem;font-size:1rem}ul{padding-left:1.2rem}.err{color:#b00020}.muted{color:#5b6474;font-size:.9rem}progress{width:100%}`;

function page(collectionId: number, expiresAt: string, nonce: string): string {
  return `<p>Files you drop here become media items of collection ${collectionId}. Up to ${MAX_FILES} files at a time, each at most 100 MiB.</p>
<form id="form" method="post" enctype="multipart/form-data"><div id="zone"><p>Drop files here, or pick them:</p>
<input id="files" type="file" name="file" multiple required><br><button type="submit">Upload</button></div></form>
<progress id="progress" max="1" value="0" hidden></progress><ul id="results"></ul>
<p class="muted">This link expires at ${escapeHtml(expiresAt)}.</p>
<script nonce="${nonce}">
const form=document.getElementById("form"),zone=document.getElementById("zone"),input=document.getElementById("files"),bar=document.getElementById("progress"),list=document.getElementById("results");
function line(text,err){const li=document.createElement("li");li.textContent=text;if(err)li.className="err";list.appendChild(li);}
function send(files){if(!files.length)return;const data=new FormData();for(const f of files)data.append("file",f,f.name);
const xhr=new XMLHttpRequest();xhr.open("POST",location.href);xhr.setRequestHeader("accept","application/json");bar.hidden=false;bar.value=0;
xhr.upload.onprogress=(e)=>{if(e.lengthComputable)bar.value=e.loaded/e.total;};
xhr.onload=()=>{bar.hidden=true;let out;try{out=JSON.parse(xhr.responseText);}catch{line("Upload failed ("+xhr.status+")",true);return;}
for(const f of out.files||[]){if(f.media)line(f.filename+": added as media "+f.media.id);else line(f.filename+": "+((f.error&&f.error.detail)||"failed"),true);}
if(!out.files&&out.detail)line(out.detail,true);};
xhr.onerror=()=>{bar.hidden=true;line("Upload failed: network error",true);};xhr.send(data);}
form.addEventListener("submit",(e)=>{e.preventDefault();send(input.files);form.reset();});
zone.addEventListener("dragover",(e)=>{e.preventDefault();zone.classList.add("over");});
zone.addEventListener("dragleave",()=>zone.classList.remove("over"));
zone.addEventListener("drop",(e)=>{e.preventDefault();zone.classList.remove("over");send(e.dataTransfer.files);});
</script>`;
}

function wantsJson(req: IncomingMessage): boolean {
  return String(req.headers.accept ?? "").includes("application/json");
}

/** GET/HEAD/POST /drop/<grant>: the page, and the files it submits. */
export function createDropHandler(deps: { store: ObjectStore; grantSecret: string; clients: Clients; log: Logger; bodyIdleMs: number }) {
  const media = () => deps.clients.get(MediaService);

  /** Streams one file part to the store and has the media service adopt it. */
  async function storeOne(token: string, prefix: string, file: Readable, filename: string, mimeType: string): Promise<FileOutcome> {
    const key = `${prefix}${Date.now()}-${randomBytes(4).toString("hex")}_${safeFilename(filename, "dropped")}`;
    // A PassThrough between busboy and the store: when the store gives up on a file, the part
    // is drained instead of destroyed, so the rest of the form is still read.
    const pass = new PassThrough();
    file.pipe(pass);
    // The part fails when the form does (its client went away mid-file, or its body stopped
    // arriving): the store's put fails with it. Unheard, the part's error was an uncaught
    // exception that ended the process.
    file.once("error", (err) => pass.destroy(err));
    let stored;
    try {
      stored = await deps.store.put(key, pass, { contentType: mimeType || "application/octet-stream", maxBytes: MAX_PUT_BYTES });
    } catch (err) {
      file.unpipe(pass);
      file.resume();
      const app = (err as Error).name === "ObjectTooLargeError"
        ? new AppError("payload_too_large", `${filename} is larger than ${MAX_PUT_BYTES} bytes.`, { max_bytes: MAX_PUT_BYTES })
        : err instanceof AppError ? err : new AppError("invalid_request", `${filename} could not be stored: ${(err as Error).message}`);
      return { filename, error: app.toBody(), status: app.status };
    }
    try {
      const out = await media().adoptDroppedFile({ grant: token, storeKey: key, filename, contentType: mimeType, sha256: stored.sha256 });
      return { filename, media: out.media && renderObject(MediaSchema, out.media) };
    } catch (err) {
      await deps.store.delete([key]).catch(() => {});
      const app = fromConnectError(err);
      return { filename, error: app.toBody(), status: app.status };
    }
  }

  async function receive(req: IncomingMessage, token: string, prefix: string): Promise<FileOutcome[]> {
    if (!/^multipart\/form-data/i.test(String(req.headers["content-type"] ?? ""))) {
      throw new AppError("invalid_request", "A drop link takes multipart/form-data with one or more file parts.", { field: "Content-Type" });
    }
    let bb;
    try {
      bb = busboy({ headers: req.headers, limits: { files: MAX_FILES, fileSize: MAX_PUT_BYTES + 1, fields: 20, parts: MAX_FILES + 20, fieldSize: 4096 } });
    } catch (err) {
      throw new AppError("invalid_request", `The multipart body cannot be read: ${(err as Error).message}`);
    }
    const outcomes: Array<Promise<FileOutcome>> = [];
    let tooMany = false;
    bb.on("file", (_field: string, file: Readable, info: { filename?: string; mimeType: string }) => {
      if (!info.filename) { file.resume(); return; }
      outcomes.push(storeOne(token, prefix, file, info.filename, info.mimeType));
    });
    bb.on("filesLimit", () => { tooMany = true; });
    try {
      await pipeline(uploadBody(req, deps.bodyIdleMs), bb);
    } catch (err) {
      // Whatever was stored is adopted or removed by its own outcome; report the broken form
      // (or the body that stopped arriving, as it is).
      await Promise.allSettled(outcomes);
      if (err instanceof AppError) throw err;
      throw new AppError("invalid_request", `The multipart body could not be read: ${(err as Error).message}`);
    }
    const files = await Promise.all(outcomes);
    if (tooMany) files.push({ filename: "(more files)", error: { error: "invalid_request", detail: `At most ${MAX_FILES} files per upload; the rest were ignored.` }, status: 400 });
    if (!files.length) throw new AppError("invalid_request", "The form carried no file.", { field: "file" });
    return files;
  }

  return async function handleDrop(req: IncomingMessage, res: ServerResponse, rest: string): Promise<void> {
    try {
      if (req.method !== "GET" && req.method !== "HEAD" && req.method !== "POST") throw new AppError("invalid_request", "Drop links take GET (the page) or POST (the files).");
      const token = decodeURIComponent(rest.split("/")[0] ?? "");
      // Signature, purpose and expiry here; the grant's user and permission by the media service.
      verifyGrant(deps.grantSecret, token, "drop");
      let check: CheckDropGrantResponse;
      try {
        check = await media().checkDropGrant({ grant: token });
      } catch (err) {
        throw fromConnectError(err);
      }
      const collectionId = Number(check.collectionId);
      if (req.method !== "POST") {
        const nonce = randomBytes(16).toString("base64");
        const expiresAt = check.expiresAt ? timestampDate(check.expiresAt).toISOString() : "";
        sendHtml(res, 200, `Drop files into collection ${collectionId}`, page(collectionId, expiresAt, nonce), nonce);
        return;
      }
      const files = await receive(req, token, check.keyPrefix);
      const added = files.filter((f) => f.media);
      const status = added.length ? 200 : files[0]!.status ?? 400;
      if (wantsJson(req)) {
        sendJson(res, status, JSON.stringify({ collection_id: collectionId, files: files.map(({ status: _s, ...f }) => f), added: added.length }));
        return;
      }
      const items = files.map((f) => (f.media
        ? `<li>${escapeHtml(f.filename)}: added as media ${escapeHtml(String(f.media.id))}</li>`
        : `<li class="err">${escapeHtml(f.filename)}: ${escapeHtml(String(f.error?.detail ?? "failed"))}</li>`)).join("");
      const nonce = randomBytes(16).toString("base64");
      sendHtml(res, status, `${added.length} of ${files.length} file(s) added to collection ${collectionId}`, `<ul>${items}</ul><p><a href="">Drop more files</a></p>`, nonce);
    } catch (err) {
      req.resume();
      const out = failureOutcome(err, deps.log);
      if (res.headersSent) { res.destroy(); return; }
      if (wantsJson(req) || req.method === "HEAD") { sendJson(res, out.status, out.body); return; }
      const detail = String((JSON.parse(out.body) as { detail?: string }).detail ?? "The link cannot be used.");
      sendHtml(res, out.status, "This drop link cannot be used", `<p class="err">${escapeHtml(detail)}</p><p>Ask for a new link.</p>`, randomBytes(16).toString("base64"));
    }
  };
}
