/** The meta operations, answered by the gateway from its registry as typed messages. */
import { create, type JsonObject, type Message } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import {
  DescribeOperationResponseSchema, GetSchemaResponseSchema, ListOperationsResponseSchema, OperationSchema, PingResponseSchema, type Operation,
} from "@cms/contracts/gateway/v1/meta_pb";
import { AppError, STATUS_OF, type Caller } from "@cms/platform";
import { SCHEMA_VERSION, type OpEntry, type OpRegistry } from "./registry.js";

/** A JSON Schema as a google.protobuf.Struct field (held as a JsonObject by protobuf-es). */
function struct(json: Record<string, unknown>): JsonObject {
  return json as JsonObject;
}

function entry(op: OpEntry): Operation {
  return create(OperationSchema, {
    name: op.name,
    summary: op.summary,
    scopes: op.scopes,
    conditionalScopes: op.conditionalScopes.length ? { conditionalScopes: op.conditionalScopes } : undefined,
    mutating: op.mutating,
    anonymous: op.anonymous,
    adminOnly: op.adminOnly || undefined,
    deprecated: op.deprecatedAliasOf ? true : undefined,
    deprecatedAliasOf: op.deprecatedAliasOf,
    response: op.streamsObject ? "raw bytes of the stored file (Content-Type, Content-Length, ETag, Range)" : undefined,
    mcpTool: op.name.replaceAll(".", "_"),
    requestSchema: struct({ ...op.requestSchema, properties: { op: { const: op.name }, ...(op.requestSchema.properties as object) }, required: ["op", ...((op.requestSchema.required as string[]) ?? [])] }),
    responseSchema: struct(op.responseSchema),
  });
}

/**
 * A meta operation: its typed answer. Returning the same message object again lets the endpoint
 * reuse its rendered JSON (operations.list, schema.get).
 */
export type MetaHandler = (body: Record<string, unknown>, caller: Caller | undefined) => Message;

export function createMeta(registry: OpRegistry, origins: { baseUrl: string; appUrl: string; mcpUrl: string }): Record<string, MetaHandler> {
  const operations = registry.all().map((op) => ({ name: op.name, scopes: op.scopes }));
  const operationsBody = create(ListOperationsResponseSchema, { operations, count: operations.length, version: SCHEMA_VERSION });
  const entries = new Map<string, Operation>();
  const entryOf = (op: OpEntry) => {
    let e = entries.get(op.name);
    if (!e) entries.set(op.name, (e = entry(op)));
    return e;
  };
  // Built on first use: with PORT=0 the origins are known only once the gateway listens.
  let schemaBody: Message | undefined;
  const schema = () => (schemaBody ??= create(GetSchemaResponseSchema, {
    version: SCHEMA_VERSION,
    endpoint: `${origins.baseUrl}/functions/v1/thirdparty-v1`,
    mcpEndpoint: `${origins.mcpUrl}/mcp`,
    authentication: {
      bearer: "Authorization: Bearer <access token>",
      apiKeyHeader: "apikey",
      scopes: ["collections:read", "collections:write", "collections:delete", "media:read", "media:write", "media:delete", "profile:write"],
    },
    conventions: {
      success: "HTTP 200 with a JSON object; a single resource under its singular name, a list under its plural name with pagination {limit, offset, total} where the operation pages.",
      error: "{\"error\": code, \"detail\": sentence, ...extra fields}",
      idempotency: "Mutating operations accept idempotency_key (<=128 chars). The response is stored 24 hours per (user, op, key); a replay with the same body returns it byte for byte; a different body gives 409 idempotency_key_reused.",
      unknown_fields: "400 invalid_request with field naming the unknown field.",
      rate_limit: "Requests per minute per user; 429 rate_limited with Retry-After.",
    },
    errors: Object.fromEntries(Object.entries(STATUS_OF).map(([code, status]) => [code, { status }])),
    // Choices where the contract is silent (conventions.md asks for them to be written here).
    decisions: {
      "collections.delete": "mode=soft (default) needs cascade_media=true when the collection holds media (409 collection_not_empty with media_count); mode=hard needs confirm=true (400 confirmation_required); dry_run=true changes nothing and returns would_delete. Sub-collections are deleted and restored with their parent.",
      "collections.restore": "Window after deletion: free 7 days, paid 7 days, founding 30 days; dry_run=true returns restorable_until without restoring; confirm is not required. Past the window (or after the hourly purge): 410 restore_window_expired. A name taken meanwhile: 409 duplicate_collection_name.",
      "collections.search": "own/shared match name, description and tags by substring, accent-insensitively, with trigram word similarity >= 0.5 and full text; public/following/liked match every query word (full text) or a substring of the name, and show only published public collections (public scope: also searchable, of other users). Default limit 20.",
      "collections.browse": "Default limit 20; views and likes orders are descending, recent is by publication time.",
      "collections.like": "Only published collections with share_access_level public can be liked (400 invalid_request otherwise; 404 when not visible to the caller).",
      "views": "A read (collections.get, collections.get_by_slug) of a published public collection by anyone but its owner counts one view.",
      "collections.publish": "Slugs are normalized to lowercase ASCII letters, digits and single hyphens; they stay reserved on the account forever.",
      "collaborators.invite": "Caps per inviter: 15 per rolling hour, 50 per rolling 24 hours; 20 pending per collection. A breach is 429 rate_limited with cap (invites_per_hour, invites_per_24_hours, pending_per_collection) and, for the time caps, retry_after_seconds. Re-inviting a pending invitee resets its flags to the defaults given.",
      "media.delete": "mode=hard (default) needs confirm=true (400 confirmation_required); mode=soft does not; dry_run=true previews. Sub-collection link rows are not deleted through media.delete. Stored files go after their rows, unless a copy still uses them.",
      "media.list": "limit 1-500 (default 100). Empty pages carry hint, plus also_archived or also_without_filters counts.",
      "media.search": "Matches a substring of name, description or tags (accent-insensitive) or a tag equal to a query word; searches the caller's own collections, or the collection_id given (any collection the caller may read). limit 1-500 (default 100).",
      "media.create": "A web page (text/html) stays an external link with viewer website, its og:image/twitter:image becoming the thumbnail; video-hosting pages always do. Other URLs are downloaded (up to 100 MiB) and the viewer comes from the sniffed MIME type.",
      scopes: "media.delete needs media:delete, a scope beyond the contract's list of six.",
      "media.upload": "Base64 may contain whitespace and the URL-safe alphabet, padding optional; any other character is refused naming it and its 0-based position. 100 KB decoded at most (more is 400 invalid_request on content_base64). sha256 values are hex, either case.",
      http_errors: "Errors of the operations use the contract's codes. At the HTTP level only: a body larger than the endpoint takes, and a PUT over its cap, are 413 payload_too_large; a PUT without Content-Length 411; a used upload URL 409 conflict.",
      "media.get_upload_url": "content_length is optional; the grant lasts UPLOAD_GRANT_TTL_MS (15 min) and binds one store key, content type (and length). purpose=media with name creates the row at once (one-call flow); its size, type and thumbnails are filled in when the bytes land. A used upload URL answers 409 on a second PUT. An object PUT under a classic or thumbnail key that no item names UPLOAD_SESSION_TTL_MS (24 hours) after the URL expired is removed by the upload_cleanup job (media.create or media.update must take it up before).",
      "media.upload_begin": "Chunks up to 8 MiB (16384 recommended) are persisted until upload_finish (up to 64 KiB in PostgreSQL, larger ones in the object store), so any replica can finish; chunks may be sent in parallel; quotas per user (USER_STORAGE_QUOTA_BYTES, default 10 GiB) and per collection (COLLECTION_STORAGE_QUOTA_BYTES, default 2 GiB) give 400 invalid_request on content_length naming the quota. Sessions expire after UPLOAD_SESSION_TTL_MS (24 h).",
      "media.download_url": "A GET URL on the API origin, valid DOWNLOAD_URL_TTL_MS (5 min), no bearer needed.",
      "aliases.create": "A handle already used by any account (an alias or a username) is 400 invalid_request with field handle.",
      "collaborators.invite.existing": "Inviting a user who already collaborates is 400 invalid_request with field username; use collaborators.update_permissions.",
      "collections.get_upload_url": "Covers are capped at 20 MiB (max_bytes), what collections.update takes from the key. The uploaded image is consumed: removed once collections.create or collections.update has made the cover from it; an update naming it again keeps the cover. An image no cover was made from is removed by the hourly retention job UPLOAD_SESSION_TTL_MS (24 hours) after its URL expired.",
      "media.thumbnail_finalize": "thumbnail_url is an object-store key or an http(s) image URL (fetched through the SSRF guard). Omitted, with the row's thumbnail already made from a key, or naming the key the row's pair was made from (media.update's, the upload flow's step before), it answers the item with noop:true. A key made into thumbnails (media.create, media.update, media.thumbnail_finalize) is consumed: removed once the pair is stored, unless an item's file is that object. A collection's cover key is refused as a media source or thumbnail.",
      "collections.webhook_set": "Owner only (a collaborator gets 403 whatever its flags). The URL is checked at set time and again before every delivery, DNS included, and the connection goes to the address that was checked. The secret (whsec_ + base64 of 32 bytes) is shown once; a later webhook_set issues a new one at once, re-enables the webhook and resets failure_count.",
      "collections.webhook_test": "Scope collections:write, owner only, request field collection_id. Sends one signed delivery now (type collection.updated, test:true, one change of kind test), whether or not the collection is published or the webhook enabled; one attempt, no retries; answers {delivered, attempt}; logged in recent_attempts as event webhook.test; failure_count and the health fields are not changed.",
      "webhook deliveries": "Coalesced per collection in windows of WEBHOOK_COALESCE_MS; one delivery per window listing its changes in order, sent while the collection is published (a window holding the unpublish is sent, later ones are not). Headers: X-Service-Signature sha256=<hex HMAC-SHA256 of the raw body keyed with the whole secret string>, X-Service-Delivery, and Standard Webhooks' webhook-id (= the delivery id), webhook-timestamp and webhook-signature (v1, HMAC keyed with the secret's base64 part). One delivery in flight per webhook at a time, so a receiver gets them in order; 4 attempts (WEBHOOK_BACKOFF_MS between them; Retry-After on 429/503 honoured between the backoff and the schedule's longest delay); a 3xx, 4xx, 5xx or no answer within WEBHOOK_TIMEOUT_MS is a failed attempt; 410 Gone disables at once; 20 failed deliveries in a row disable. The delivery log (attempts) is kept 30 days, and 30 days after a removal.",
      "bookmarks.create": "collection_ids is a string of collection ids separated by commas (e.g. \"12,15\"), stored normalized (each id once, in the order given, at most 100). bookmarks.list takes limit (1-500, default 100) and offset and answers newest first with pagination. Another user's bookmark is 404 not_found.",
      "bug.report": "Duplicates: an open report (new or triaged) with the same related_op, category, error_code and title (compared in lower case with numbers, hex ids and UUIDs replaced and punctuation and spacing collapsed) is counted on: status duplicate, duplicate_of and report_count of that report. Secret material in any field (private key blocks, this service's tokens, keys and webhook secrets, JWTs, bearer tokens, passwords in URLs, cloud and SaaS API keys of common providers, password=/api_key= assignments) refuses the whole report with 400 secret_material_detected naming the field, and stores nothing.",
      "ui.state.set": "Scopes collections:read and media:read. Only the fields given change (browse_results: [] empties the list). collection_id and media_id must be readable by the caller, and media_id must belong to collection_id when both are set; view_mode is grid, carousel, fullscreen or list; browse_results at most 100 readable collection ids; other fields are refused. The state is stored per user with a version that every set increases, and sent to every open player session of the user; the answer carries delivered_to, the number of sessions it reached.",
      "player.command": "Scopes collections:read and media:read (as ui.state.set). command: play, pause, next, previous, seek (position_ms, 0..86400000, in the current item), open (collection_id the caller may read, optional media_id of it), fullscreen (on, boolean). Sent to every open player session of the user and not stored; answers {command, command_id, delivered_to}.",
      "player channel": "GET {BASE_URL}/player/events is a Server-Sent Events stream of the user's ui.state changes (event ui_state, id = version, data = the state as ui.state.get answers it) and player commands (event command, id command-<command_id>). The current state is the first message of every connection, so a reconnect is never stale. Authenticated by a bearer token with collections:read and media:read, or by the signed-in web session cookie; at most 10 open per user and gateway (429 rate_limited beyond); a comment every 15 s keeps idle proxies from closing it; a session too slow to read is closed (it reconnects).",
      "player page": "GET {APP_URL}/{handle}/{slug} renders a published collection for whoever may see it (public: anyone; registered: a signed-in user; restricted: owner and collaborators), else a 404 page. open_fullscreen boots the first item fullscreen; ?fullscreen=false (or true) overrides it. Slideshow kinds (playback_prefs.kinds): image, video, audio; embed = web links; other = notes, files and sub-collections. The owner's signed-in page follows ui.state (media_id of the page's collection, view_mode) and player commands live.",
      "tags.vocabulary.get": "Needs no scope and no token. Answers {tags: [{slug, label, category, sort_order}]}, active entries only, by sort_order.",
      "mcp server": "{MCP_URL}/mcp speaks MCP over Streamable HTTP (the protocol versions of @modelcontextprotocol/sdk 1.32: 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05, 2024-10-07). Authorization: Bearer <access token> only, no apikey; the token is checked on every request (a revoked one is refused at once) and requests count against the same per-user rate limit as the JSON endpoint. A missing or refused token is 401 with WWW-Authenticate: Bearer resource_metadata=\"{MCP_URL}/.well-known/oauth-protected-resource/mcp\" (RFC 9728 metadata naming BASE_URL as the authorization server, also at /.well-known/oauth-protected-resource). A token bound to another audience (RFC 8707) is refused; one bound to {MCP_URL}/mcp or to none (CLI tokens) is taken. initialize opens a session (Mcp-Session-Id) of the token's user; later requests name it (400 without, 404 when closed, expired or another user's: initialize again); DELETE closes it. Sessions end after MCP_SESSION_IDLE_MS idle (1 h); a user holds MCP_SESSIONS_PER_USER (10), a new one closing the least recently used; MCP_MAX_SESSIONS (10000) in all, beyond which initialize is 503 unavailable. mcp.revoke_session also closes the caller's sessions. Answers are SSE streams; GET /mcp is 405 (the server sends no messages of its own).",
      "mcp tools": "One tool per operation, named with dots as underscores. inputSchema is operation.describe's request_schema without op; outputSchema is {type: object, anyOf: [the operation's response_schema, the error body {error, detail, ...}]}; the description is the summary plus the scopes. A call runs exactly as at the JSON endpoint (scopes, request checks, schema, idempotency records shared with the JSON endpoint, dispatch); success gives structuredContent = the JSON answer and the same JSON as text; any failure gives isError: true with the error body as text and structuredContent, never a JSON-RPC error (only an unknown tool name is one). Annotations: readOnlyHint = not mutating and no write or delete scope; destructiveHint = the operation's destructive option (deletes, revokes, replaced files and webhook secrets); idempotentHint = read-only, or mutating (a repeat with the same idempotency_key replays the first answer); openWorldHint = the operation's open_world option (it fetches a caller's URL or delivers to one). A call whose _meta carries a progressToken gets notifications/progress: one when it starts, one a second while it runs, the last with progress = total.",
      "media.download (MCP)": "Over MCP, media_download answers JSON (gateway.v1.McpDownload: media_id, filename, content_type, content_length, sha256, encoding): a text file (text/*, JSON, XML, YAML, JavaScript and +json/+xml types, valid UTF-8) up to 256 KiB inline in text (encoding text); any other file of 16384 bytes or less in content_base64 (encoding base64; an image or audio block, or an embedded resource, beside the JSON); anything larger as download_url with expires_at (encoding url), a media.download_url link minted for the caller, which needs no header (a resource_link block beside the JSON). media.download is the only operation whose JSON-endpoint answer is not JSON (raw bytes); no operation answers a redirect.",
    },
    operations: registry.all().map(entryOf),
  }));
  return {
    ping: (_body, caller) => create(PingResponseSchema, {
      ok: true,
      version: SCHEMA_VERSION,
      time: timestampNow(),
      caller: caller ? { user: { userId: caller.userId, username: caller.username }, scopes: caller.scopes } : undefined,
    }),
    "operations.list": () => operationsBody,
    "operation.describe": (body) => {
      const name = String(body.operation ?? "");
      const op = registry.get(name);
      if (!op) {
        throw new AppError("not_found", `No operation named "${name}". Names use dot notation (MCP tool names use underscores).`, {
          did_you_mean: registry.nearest(name),
          allowed_operations: registry.names(),
        });
      }
      return create(DescribeOperationResponseSchema, { operation: entryOf(op) });
    },
    "schema.get": () => schema(),
  };
}
