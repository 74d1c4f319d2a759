/**
 * In-memory fakes of the media service's ports, for component tests of the application layer:
 * the two stores (rows in arrays, with the same position, lifecycle-version and reference
 * rules as the SQL), a unit of work that rolls the state back when its work throws and keeps
 * the events of committed units only, a unit of one statement that keeps its events only when
 * the statement changed a row, an object store, and the collections service's client
 * (which fails a test that calls it inside a unit of work, as the platform's interceptor does).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import type { Client } from "@connectrpc/connect";
import type { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import {
  ObjectChecksumMismatchError, ObjectLengthMismatchError, isStoreKey, loadConfig, refuseEndedCall, type Config, type EventWriter, type Logger, type ObjectInfo, type ObjectStore,
  type OneStatementUnit, type UnitOfWork, type UploadKeys,
} from "@cms/platform";
import type { MediaRow } from "../src/domain/media-row.js";
import { foldAccents } from "../src/domain/rules.js";
import { createMediaApp } from "../src/app/media-app.js";
import type { MediaDeps } from "../src/app/ports.js";
import { OBJECT_COLUMNS, type ObjectColumns, type LifecycleAction, type LinkRow, type MediaStore, type PendingUpload, type SearchScope } from "../src/store/media-store.js";
import type { MediaStores } from "../src/store/stores.js";
import type { DownloadSessionRow, StoredChunk, TransferStore, UploadSessionRow } from "../src/store/transfer-store.js";

type Row = MediaRow & { deleted_with_collection: boolean };
interface Chunk { id: number; upload_id: string; idx: number; size: number; state: "writing" | "stored"; store_key: string | null; data: Buffer | null }

/** Everything the fake stores hold; tests read and change it directly. */
export interface State {
  media: Row[];
  pending: PendingUpload[];
  lifecycle: Map<number, { version: number; action: LifecycleAction }>;
  leases: Map<string, { holder: string; expiresAt: number }>;
  sessions: UploadSessionRow[];
  chunks: Chunk[];
  downloads: DownloadSessionRow[];
  uploadKeys: Array<{ store_key: string; user_id: string; expires_at: Date }>;
  nextId: number;
}

/** An event a committed unit of work wrote. */
export interface Written { type: string; payload: Record<string, unknown> }

const clone = <T>(v: T): T => structuredClone(v);
const unique = <T>(xs: T[]): T[] => [...new Set(xs)];
const byPosition = (a: Row, b: Row) => a.position - b.position || a.id - b.id;

function fakeMediaStore(s: State): MediaStore {
  const active = (collectionId: number) => s.media.filter((r) => r.collection_id === collectionId && !r.is_deleted);
  const now = () => new Date();
  const touch = (r: Row, patch: Partial<Row>) => Object.assign(r, patch, { updated_at: now() });
  const visibleLinksTo = (childIds: number[], except: number[]) =>
    s.media.filter((r) => r.linked_collection_id !== null && childIds.includes(r.linked_collection_id) && !except.includes(r.collection_id) && !r.is_deleted);
  const matches = (scope: SearchScope, query: string) => (r: Row) => {
    if (r.is_deleted || r.is_archived !== scope.archived) return false;
    if (scope.collectionId !== undefined && r.collection_id !== scope.collectionId) return false;
    if (scope.ownerUserId !== undefined && r.owner_user_id !== scope.ownerUserId) return false;
    if (scope.exceptCollectionId !== undefined && r.collection_id === scope.exceptCollectionId) return false;
    if (!scope.withLinks && r.viewer === "collection") return false;
    const text = foldAccents(`${r.name ?? ""} ${r.description ?? ""} ${r.tags.join(" ")}`);
    return text.includes(foldAccents(query)) || query.split(/\s+/).some((w) => r.tags.includes(w));
  };
  const listed = (q: Parameters<MediaStore["listPage"]>[0], filters: boolean) => active(q.collectionId).filter((r) => (q.includeArchived || !r.is_archived)
    && (!filters || ((!q.tag || r.tags.includes(q.tag.toLowerCase())) && (!q.viewer || r.viewer === q.viewer)
      && (!q.nameContains || (r.name ?? "").toLowerCase().includes(q.nameContains.toLowerCase())))));
  return {
    async byId(id) { const r = s.media.find((m) => m.id === id); return r && clone(r); },
    async activeByIds(ids) { return clone(s.media.filter((r) => ids.includes(r.id) && !r.is_deleted)); },
    async byIdsInPositionOrder(ids) { return clone(s.media.filter((r) => ids.includes(r.id)).sort(byPosition)); },
    async listPage(q) {
      const all = listed(q, true).sort(byPosition);
      return { rows: clone(all.slice(q.offset, q.offset + q.limit)), total: all.length };
    },
    async listCounts(q) {
      const rows = active(q.collectionId);
      return { all: rows.length, archived: rows.filter((r) => r.is_archived).length, withoutFilters: listed(q, false).length };
    },
    async batchPage(collectionIds, limit, offset) {
      const all = s.media.filter((r) => collectionIds.includes(r.collection_id) && !r.is_deleted && !r.is_archived)
        .sort((a, b) => collectionIds.indexOf(a.collection_id) - collectionIds.indexOf(b.collection_id) || byPosition(a, b));
      return { rows: clone(all.slice(offset, offset + limit)), total: all.length };
    },
    async searchPage(scope, query, limit, offset) {
      const all = s.media.filter(matches(scope, query)).sort((a, b) => b.updated_at.getTime() - a.updated_at.getTime() || b.id - a.id);
      return { rows: clone(all.slice(offset, offset + limit)), total: all.length };
    },
    async searchCount(scope, query) { return s.media.filter(matches(scope, query)).length; },
    async exportRows(collectionId, includeArchived) { return clone(active(collectionId).filter((r) => includeArchived || !r.is_archived).sort(byPosition)); },
    async playerItems(collectionId, limit) {
      const shown = active(collectionId).filter((r) => !r.is_archived && !s.pending.some((p) => p.media_id === r.id)).sort(byPosition);
      return { rows: clone(shown.slice(0, limit)), total: shown.length };
    },
    async activeCounts(collectionIds) {
      const counts = new Map<number, number>();
      for (const r of s.media) if (collectionIds.includes(r.collection_id) && !r.is_deleted) counts.set(r.collection_id, (counts.get(r.collection_id) ?? 0) + 1);
      return counts;
    },

    async lockCollections() {},
    async nextPosition(collectionId) {
      const rows = active(collectionId);
      return rows.length ? Math.max(...rows.map((r) => r.position)) + 1 : 0;
    },
    async renumber(collectionId) { active(collectionId).sort(byPosition).forEach((r, i) => { r.position = i; }); },
    async shiftPositions(collectionId, from, by, exceptIds = []) {
      for (const r of active(collectionId)) if (r.position >= from && !exceptIds.includes(r.id)) r.position += by;
    },
    async insert(row) {
      const r: Row = {
        id: s.nextId++, name: null, description: null, tags: [], mime_type: null, size_bytes: null, sha256: null, thumbnail_url: null,
        background_image_url: null, thumbnail_source: null, text_note: null, display_mode: null, placeholder_kind: null, linked_collection_id: null, is_archived: false,
        is_deleted: false, deleted_at: null, deleted_with_collection: false, created_at: now(), updated_at: now(), ...clone(row),
      };
      s.media.push(r);
      return clone(r);
    },
    async update(id, patch) { return clone(touch(s.media.find((r) => r.id === id)!, clone(patch))); },
    updating(id, patch, unchanged = {}) {
      // Like a query builder: nothing happens until it is awaited.
      const run = async () => {
        const row = s.media.find((r) => r.id === id && Object.entries(unchanged).every(([c, v]) => r[c as keyof Row] === v));
        return row ? [clone(touch(row, clone(patch)))] : [];
      };
      return { then: (ok, fail) => run().then(ok, fail), toSQL: () => { throw new Error("the fake store's statements run in memory"); } };
    },
    async softDelete(ids) { for (const r of s.media) if (ids.includes(r.id)) touch(r, { is_deleted: true, deleted_at: now() }); },
    async remove(ids) {
      const removed = s.media.filter((r) => ids.includes(r.id)).map((r) => Object.fromEntries(OBJECT_COLUMNS.map((c) => [c, r[c]])) as ObjectColumns);
      s.media = s.media.filter((r) => !ids.includes(r.id));
      s.pending = s.pending.filter((p) => !ids.includes(p.media_id));
      return removed;
    },
    async activeIdsInOrder(collectionId) { return active(collectionId).sort(byPosition).map((r) => r.id); },
    async setOrder(ids) { ids.forEach((id, i) => { const r = s.media.find((m) => m.id === id)!; if (r.position !== i) touch(r, { position: i }); }); },
    async rememberSha256(id, storeKey, sha256) {
      const r = s.media.find((m) => m.id === id && m.main_url === storeKey && m.sha256 === null);
      if (r) r.sha256 = sha256;
    },

    async linkRowsOf(childCollectionId) {
      return s.media.filter((r) => r.linked_collection_id === childCollectionId).sort((a, b) => a.id - b.id)
        .map((r): LinkRow => ({ id: r.id, collection_id: r.collection_id, is_deleted: r.is_deleted, position: r.position }));
    },

    async claimLifecycle(collectionIds, version, action) {
      const claimed: number[] = [];
      for (const id of unique(collectionIds).sort((a, b) => a - b)) {
        const last = s.lifecycle.get(id);
        if (last && last.version >= version) continue;
        s.lifecycle.set(id, { version, action });
        claimed.push(id);
      }
      return claimed;
    },
    async hideWithCollections(collectionIds) {
      const rows = s.media.filter((r) => collectionIds.includes(r.collection_id) && !r.is_deleted);
      for (const r of rows) touch(r, { is_deleted: true, deleted_at: now(), deleted_with_collection: true });
      return rows.length;
    },
    async parentsLinkingTo(childIds, except) {
      return [...new Set(visibleLinksTo(childIds, except).map((r) => r.collection_id))];
    },
    async hideLinksTo(childIds, except) {
      const rows = visibleLinksTo(childIds, except);
      for (const r of rows) touch(r, { is_deleted: true, deleted_at: now(), deleted_with_collection: true });
      return rows.map((r) => r.collection_id);
    },
    async unhideWithCollections(collectionIds) {
      const rows = s.media.filter((r) => collectionIds.includes(r.collection_id) && r.is_deleted && r.deleted_with_collection);
      for (const r of rows) touch(r, { is_deleted: false, deleted_at: null, deleted_with_collection: false });
      return rows.length;
    },
    async hiddenLinksTo(childIds, except) {
      return s.media.filter((r) => r.linked_collection_id !== null && childIds.includes(r.linked_collection_id) && !except.includes(r.collection_id) && r.is_deleted && r.deleted_with_collection)
        .sort((a, b) => a.collection_id - b.collection_id || a.id - b.id)
        .map((r) => ({ id: r.id, collection_id: r.collection_id, is_deleted: r.is_deleted, position: r.position }));
    },
    async unhideLink(id, position) { touch(s.media.find((r) => r.id === id)!, { is_deleted: false, deleted_at: null, deleted_with_collection: false, position }); },
    async rowsOfOrLinkingTo(collectionIds) {
      return clone(s.media.filter((r) => collectionIds.includes(r.collection_id) || (r.linked_collection_id !== null && collectionIds.includes(r.linked_collection_id))));
    },

    async insertPending(p) { s.pending.push(clone(p)); },
    async pending(mediaId) { const p = s.pending.find((x) => x.media_id === mediaId); return p && clone(p); },
    async pendingByKey(storeKey) { const p = s.pending.find((x) => x.store_key === storeKey); return p && clone(p); },
    async pendingBatch(limit) { return clone(s.pending.slice(0, limit)); },
    async removePending(mediaId) { s.pending = s.pending.filter((p) => p.media_id !== mediaId); },

    async unreferencedKeys(keys) {
      return keys.filter((k) => !s.media.some((r) => r.main_url === k || r.thumbnail_url === k || r.background_image_url === k) && !s.pending.some((p) => p.store_key === k));
    },
    async lockStoreKeys() {},
    async isReferenced(storeKey) { return s.media.some((r) => r.main_url === storeKey || r.thumbnail_url === storeKey || r.background_image_url === storeKey); },

    async claimLease(name, holder, ttlMs) {
      const lease = s.leases.get(name);
      if (lease && lease.expiresAt > Date.now()) return false;
      s.leases.set(name, { holder, expiresAt: Date.now() + ttlMs });
      return true;
    },
    async releaseLease(name, holder) { if (s.leases.get(name)?.holder === holder) s.leases.delete(name); },
    // The in-memory list pages count their rows: nothing is kept, nothing to fold.
    async foldListCounts() { return 0; },
  };
}

function fakeTransferStore(s: State): TransferStore {
  const stored = (uploadId: string) => s.chunks.filter((c) => c.upload_id === uploadId && c.state === "stored").sort((a, b) => a.idx - b.idx);
  const storeBytes = (rows: Row[]) => {
    const seen = new Map<string, number>();
    for (const r of rows) if (r.main_url.startsWith("store://") && !seen.has(r.main_url)) seen.set(r.main_url, r.size_bytes ?? 0);
    return [...seen.values()].reduce((a, b) => a + b, 0);
  };
  const openBytes = (pick: (x: UploadSessionRow) => boolean) => s.sessions.filter((x) => x.state === "open" && x.expires_at.getTime() > Date.now() && pick(x))
    .reduce((n, x) => n + x.content_length, 0);
  return {
    async lockOwnerStorage() {},
    async storageInUse(ownerUserId, collectionId) {
      return {
        user: storeBytes(s.media.filter((r) => r.owner_user_id === ownerUserId)) + openBytes((x) => x.owner_user_id === ownerUserId),
        collection: storeBytes(s.media.filter((r) => r.collection_id === collectionId)) + openBytes((x) => x.collection_id === collectionId),
      };
    },
    async insertSession(x) { s.sessions.push({ ...clone(x), state: "open", media_id: null, created_at: new Date() }); },
    async session(id) { const x = s.sessions.find((y) => y.id === id); return x && clone(x); },
    async markFinished(id, mediaId) { Object.assign(s.sessions.find((x) => x.id === id)!, { state: "finished", media_id: mediaId }); },
    async deleteSessions(ids) {
      const before = s.sessions.length;
      s.sessions = s.sessions.filter((x) => !ids.includes(x.id));
      s.chunks = s.chunks.filter((c) => !ids.includes(c.upload_id));
      return before - s.sessions.length;
    },
    async expiredSessions(now, finishedBefore) {
      return s.sessions.filter((x) => (x.state === "open" && x.expires_at < now) || (x.state === "finished" && x.expires_at < finishedBefore)).map((x) => x.id);
    },
    async storedExcept(uploadId, index) {
      const rows = stored(uploadId).filter((c) => c.idx !== index);
      return { bytes: rows.reduce((n, c) => n + c.size, 0), chunks: rows.length };
    },
    async storedChunks(uploadId) { return stored(uploadId).map((c): StoredChunk => ({ id: c.id, index: c.idx, size: c.size, key: c.store_key })); },
    async insertInlineChunk(uploadId, index, data) {
      s.chunks.push({ id: s.nextId++, upload_id: uploadId, idx: index, size: data.length, state: "stored", store_key: null, data: Buffer.from(data) });
    },
    async reserveChunk(uploadId, index, size, storeKey) {
      s.chunks.push({ id: s.nextId++, upload_id: uploadId, idx: index, size, state: "writing", store_key: storeKey, data: null });
    },
    async markChunkStored(storeKey) {
      const c = s.chunks.find((x) => x.store_key === storeKey);
      if (c) c.state = "stored";
      return Boolean(c);
    },
    async dropReservation(storeKey) { s.chunks = s.chunks.filter((c) => c.store_key !== storeKey); },
    async removeStoredChunk(uploadId, index) {
      const gone = s.chunks.filter((c) => c.upload_id === uploadId && c.idx === index && c.state === "stored");
      s.chunks = s.chunks.filter((c) => !gone.includes(c));
      return gone.map((c) => c.store_key);
    },
    async removeChunk(id) { s.chunks = s.chunks.filter((c) => c.id !== id); },
    async discardChunks(uploadIds) {
      const gone = s.chunks.filter((c) => uploadIds.includes(c.upload_id));
      s.chunks = s.chunks.filter((c) => !gone.includes(c));
      return gone.map((c) => c.store_key);
    },
    async inlineHead(id, bytes) { return Buffer.from(s.chunks.find((c) => c.id === id)?.data?.subarray(0, bytes) ?? []); },
    async inlineData(ids) { return new Map(s.chunks.filter((c) => ids.includes(c.id)).map((c) => [c.id, Buffer.from(c.data!)])); },
    async insertDownload(d) { s.downloads.push(clone(d)); },
    async download(id) { const d = s.downloads.find((x) => x.id === id); return d && clone(d); },
    async deleteExpiredDownloads(now) {
      const before = s.downloads.length;
      s.downloads = s.downloads.filter((d) => d.expires_at >= now);
      return before - s.downloads.length;
    },
  };
}

function fakeUploadKeys(s: State): UploadKeys {
  return {
    async record(storeKey, userId, expiresAt) { s.uploadKeys.push({ store_key: storeKey, user_id: userId, expires_at: expiresAt }); },
    async takeExpiredBefore(before, limit) {
      const taken = s.uploadKeys.filter((k) => k.expires_at < before).sort((a, b) => +a.expires_at - +b.expires_at).slice(0, limit);
      s.uploadKeys = s.uploadKeys.filter((k) => !taken.includes(k));
      return taken.map((k) => k.store_key);
    },
  };
}

const inUnit = new AsyncLocalStorage<true>();

/** An event writer keeping a unit's events apart until it commits. */
const writerInto = (written: Written[]): EventWriter => ({ async emit(type, payload) { written.push({ type, payload: clone(payload) }); } });

/** The stores, a unit of work over them, and the events committed units wrote. */
export function fakeStores() {
  const state: State = { media: [], pending: [], lifecycle: new Map(), leases: new Map(), sessions: [], chunks: [], downloads: [], uploadKeys: [], nextId: 1 };
  const stores: MediaStores = { media: fakeMediaStore(state), transfers: fakeTransferStore(state), uploadKeys: fakeUploadKeys(state) };
  const events: Written[] = [];
  let units = 0;
  // beforeNextUnit runs once, before the next unit of work begins (another write that commits first).
  const unitHooks: { beforeNextUnit?: () => Promise<unknown> } = {};
  const unitOfWork: UnitOfWork<MediaStores> = async (work) => {
    const hook = unitHooks.beforeNextUnit;
    unitHooks.beforeNextUnit = undefined;
    if (hook) await hook();
    const before = { ...state, media: clone(state.media), pending: clone(state.pending), lifecycle: clone(state.lifecycle), leases: clone(state.leases), sessions: clone(state.sessions), chunks: clone(state.chunks), downloads: clone(state.downloads), uploadKeys: clone(state.uploadKeys) };
    const written: Written[] = [];
    try {
      const out = await inUnit.run(true, () => work(stores, writerInto(written)));
      // As the real unit: a call that has ended commits nothing.
      refuseEndedCall();
      events.push(...written);
      units++;
      return out;
    } catch (err) {
      Object.assign(state, before);
      throw err;
    }
  };
  // One statement: its events are kept only when it changed a row, as the real CTE inserts them.
  const oneStatementUnit: OneStatementUnit = async (statement, emit) => {
    const written: Written[] = [];
    await emit(writerInto(written));
    refuseEndedCall();
    const rows = await statement;
    if (rows.length) {
      events.push(...written);
      units++;
    }
    return rows;
  };
  return { state, stores, unitOfWork, oneStatementUnit, events, units: () => units, unitHooks };
}

/** An object store in memory; `onPut` runs once before the next put completes (to interleave a concurrent change). */
export function memoryObjects() {
  const objects = new Map<string, { bytes: Buffer; info: ObjectInfo }>();
  const hooks: { onPut?: (key: string) => void | Promise<void> } = {};
  const store: ObjectStore = {
    kind: "fs",
    async put(key, body, opts) {
      const parts: Buffer[] = [];
      if (Buffer.isBuffer(body)) parts.push(body);
      else for await (const c of body) parts.push(c as Buffer);
      const bytes = Buffer.concat(parts);
      if (opts.contentLength !== undefined && bytes.length !== opts.contentLength) throw new ObjectLengthMismatchError(`${bytes.length} bytes, ${opts.contentLength} declared`);
      const sha256 = createHash("sha256").update(bytes).digest("hex");
      if (opts.sha256 !== undefined && sha256 !== opts.sha256) throw new ObjectChecksumMismatchError(sha256);
      const hook = hooks.onPut;
      hooks.onPut = undefined;
      await hook?.(key);
      await opts.visibleAfter;
      const info = { contentType: opts.contentType, size: bytes.length, etag: createHash("md5").update(bytes).digest("hex") };
      objects.set(key, { bytes, info });
      return { ...info, sha256 };
    },
    async get(key, range) {
      const o = objects.get(key);
      if (!o) return undefined;
      const bytes = range ? o.bytes.subarray(range.start, range.end + 1) : o.bytes;
      return { body: Readable.from([bytes]), info: o.info };
    },
    async head(key) { return objects.get(key)?.info; },
    async delete(keys) { for (const k of keys) objects.delete(k); },
    async presignPut() { return undefined; },
    close() {},
  };
  return { store, objects, hooks };
}

/** What CheckAccess answers for one collection (defaults: it exists and the caller owns it). */
export interface CollectionAccess { exists?: boolean; isDeleted?: boolean; allowed?: boolean; deniedPermission?: string; ownerUserId?: string; isArchived?: boolean }

/** The collections service's client: access per collection, cover keys; refuses calls inside a unit of work. */
export function fakeCollections() {
  const access = new Map<number, CollectionAccess>();
  const covers = new Set<string>();
  const calls: string[] = [];
  const guard = (rpc: string) => {
    if (inUnit.getStore()) throw new Error(`collections.${rpc} called inside a unit of work`);
    calls.push(rpc);
  };
  const client = {
    async checkAccess(req: { userId: string; collectionId: bigint; action: string }) {
      guard("checkAccess");
      const a = access.get(Number(req.collectionId)) ?? {};
      const ownerUserId = a.ownerUserId ?? req.userId;
      return {
        exists: a.exists ?? true, isDeleted: a.isDeleted ?? false, allowed: a.allowed ?? true, deniedPermission: a.deniedPermission ?? "",
        ownerUserId, isOwner: ownerUserId === req.userId, isArchived: a.isArchived ?? false,
      };
    },
    async coverStoreKeys(req: { storeKeys: string[] }) {
      guard("coverStoreKeys");
      return { storeKeys: req.storeKeys.filter((k) => covers.has(k)) };
    },
  } as unknown as Client<typeof CollectionsService>;
  return { client, access, covers, calls };
}

const quiet = { debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } } as unknown as Logger;

/** The media application over fakes of every port, and the fakes themselves. */
export function fakeMediaApp(config: Partial<Config> = {}) {
  const db = fakeStores();
  const objects = memoryObjects();
  const collections = fakeCollections();
  const deps: MediaDeps = {
    stores: db.stores,
    unitOfWork: db.unitOfWork,
    oneStatementUnit: db.oneStatementUnit,
    collections: collections.client,
    objects: objects.store,
    config: { ...loadConfig({}, []), baseUrl: "http://api.test", grantSecret: "component-test-secret", ...config },
    log: quiet,
  };
  return { app: createMediaApp(deps), ...db, objects, collections };
}

/** A caller of the use cases. */
export function callerOf(userId: string) {
  return { userId, username: userId, plan: "free" as const, isAdmin: false, scopes: [], tokenId: "t" };
}

/** Keys among `keys` that name stored objects. */
export function storeKeys(keys: Array<string | null | undefined>): string[] {
  return keys.filter((k): k is string => Boolean(k && isStoreKey(k)));
}
