/**
 * In-memory fakes of the collections application's ports, for component tests: the stores (over
 * one state that a unit of work copies and commits or drops), the unit of work (with the outbox
 * events it committed) and a media service whose link rows and failures a test controls. The
 * fake media refuses a call made inside a unit of work, as the platform's client interceptor
 * does. Only what the component tests reach is faked; the rest throws.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { createLogger, type Caller, type Config, type EventWriter, type ObjectStore, type UnitOfWork } from "@cms/platform";
import type { CollectionRow } from "../src/domain/collection-json.js";
import type { PendingStep } from "../src/domain/pending-steps.js";
import type {
  AuthClient, CollaboratorsStore, CollectionsAppDeps, CollectionsStore, CollectionsStores, MediaClient, PendingStepsStore, SocialClient,
} from "../src/app/ports.js";
import { createCollectionsApp } from "../src/app/collections-app.js";

/** Everything the fake stores hold; a unit of work works on a copy. */
export interface FakeState {
  collections: Map<number, CollectionRow>;
  tombstones: Map<number, string>;
  steps: Map<number, PendingStep>;
  seq: { collection: number; step: number; version: number };
}

export function emptyState(): FakeState {
  return { collections: new Map(), tombstones: new Map(), steps: new Map(), seq: { collection: 0, step: 0, version: 0 } };
}

const notFaked = (name: string) => () => { throw new Error(`${name} is not faked`); };

/** PostgreSQL's unique violation, as isUniqueViolation() recognizes it. */
function uniqueViolation(): Error {
  return Object.assign(new Error("duplicate key value violates unique constraint"), { code: "23505" });
}

function fakeCollectionsStore(current: () => FakeState): CollectionsStore {
  const st = new Proxy({} as FakeState, { get: (_t, k: keyof FakeState) => current()[k] });
  const live = (userId: string, parentId: number | null) =>
    [...st.collections.values()].filter((c) => c.user_id === userId && !c.is_deleted && c.parent_id === parentId);
  const checkName = (row: CollectionRow) => {
    if (row.is_deleted) return;
    if (live(row.user_id, row.parent_id).some((c) => c.id !== row.id && c.name === row.name)) throw uniqueViolation();
  };
  const subtree = (id: number, includeDeleted: boolean): number[] => {
    const out = [id];
    for (const c of st.collections.values()) if (c.parent_id === id && (includeDeleted || !c.is_deleted)) out.push(...subtree(c.id, includeDeleted));
    return out;
  };
  const store: Partial<CollectionsStore> = {
    async byId(id) { const r = st.collections.get(id); return r && { ...r }; },
    async accessOf(id) {
      const r = st.collections.get(id);
      return r && { user_id: r.user_id, is_archived: r.is_archived, is_deleted: r.is_deleted, is_published: r.is_published, share_access_level: r.share_access_level };
    },
    async lockAll() {},
    async reserveId() { return ++st.seq.collection; },
    async insert(v) {
      const now = new Date();
      const row: CollectionRow = {
        ...v, id: v.id ?? ++st.seq.collection, searchable: false, is_published: false, published_at: null, share_slug: null,
        share_id: `share-${v.id}`, open_fullscreen: false, is_archived: false, is_deleted: false, deleted_at: null, deleted_with: null,
        views: 0, likes: 0, created_at: now, updated_at: now,
      } as CollectionRow;
      checkName(row);
      st.collections.set(row.id, row);
      return { ...row };
    },
    async update(id, patch) {
      const row = { ...st.collections.get(id)!, ...patch } as CollectionRow;
      checkName(row);
      st.collections.set(id, row);
      return { ...row };
    },
    async coverSource(id) { return (st.collections.get(id) as { cover_source?: string | null } | undefined)?.cover_source ?? null; },
    async remove(ids) { for (const id of ids) st.collections.delete(id); },
    async nameTaken(userId, parentId, name) { return live(userId, parentId).some((c) => c.name === name); },
    async nextPosition(userId, parentId) { return Math.max(-1, ...live(userId, parentId).map((c) => c.position)) + 1; },
    async subtreeIds(id, opts = {}) { return subtree(id, opts.includeDeleted ?? false); },
    async ancestorIds(id) {
      const out: number[] = [];
      for (let p = st.collections.get(id)?.parent_id ?? null; p !== null; p = st.collections.get(p)?.parent_id ?? null) out.push(p);
      return out;
    },
    async firstDeletedAmong(ids) { return ids.find((i) => st.collections.get(i)?.is_deleted); },
    async liveAmong(ids) { return ids.filter((i) => st.collections.get(i) && !st.collections.get(i)!.is_deleted); },
    async deletedWith(id) { return [...st.collections.values()].filter((c) => c.deleted_with === id).map((c) => c.id); },
    async markDeleted(id, others, at) {
      for (const i of [id, ...others]) Object.assign(st.collections.get(i)!, { is_deleted: true, deleted_at: at, deleted_with: i === id ? null : id });
    },
    async markRestored(ids, at) {
      for (const i of ids) {
        const row = { ...st.collections.get(i)!, is_deleted: false, deleted_at: null, deleted_with: null, updated_at: at };
        checkName(row);
        st.collections.set(i, row);
      }
    },
    async coversOf(ids) {
      return ids.filter((i) => st.collections.has(i)).map((i) => {
        const c = st.collections.get(i)!;
        return { id: i, is_deleted: c.is_deleted, thumbnail_url: c.thumbnail_url, cover_thumbnail_url: c.cover_thumbnail_url };
      });
    },
    async deletedRootsBefore(before) {
      return [...st.collections.values()].filter((c) => c.is_deleted && c.deleted_with === null && c.deleted_at! < before)
        .map((c) => ({ id: c.id, user_id: c.user_id, deleted_at: c.deleted_at! }));
    },
    async addTombstones(rows) { for (const r of rows) st.tombstones.set(r.id, r.user_id); },
    async tombstone(id) { const u = st.tombstones.get(id); return u === undefined ? undefined : { user_id: u }; },
    async nextLifecycleVersion() { return ++st.seq.version; },
  };
  return new Proxy(store, { get: (t, k: string) => (t as Record<string, unknown>)[k] ?? notFaked(`collections.${k}`) }) as CollectionsStore;
}

function fakeStepsStore(current: () => FakeState): PendingStepsStore {
  const st = new Proxy({} as FakeState, { get: (_t, k: keyof FakeState) => current()[k] });
  const copy = (s: PendingStep | undefined) => s && structuredClone(s);
  return {
    async add(work, nextAttemptAt) {
      const id = ++st.seq.step;
      st.steps.set(id, { id, work: structuredClone(work), state: "pending", attempts: 0, nextAttemptAt, lastError: null, createdAt: new Date() });
      return id;
    },
    async byId(id) { return copy(st.steps.get(id)); },
    async openOn(collectionId) { return copy([...st.steps.values()].find((s) => s.work.collectionId === collectionId)); },
    async settle(id, state) { return st.steps.get(id)?.state === state ? st.steps.delete(id) : false; },
    async markCompensating(id) { st.steps.get(id)!.state = "compensating"; },
    async retryLater(id, attempts, nextAttemptAt, error) {
      const s = st.steps.get(id);
      if (s) Object.assign(s, { attempts, nextAttemptAt, lastError: error });
    },
    async due(now, limit) { return [...st.steps.values()].filter((s) => s.nextAttemptAt <= now).slice(0, limit).map((s) => structuredClone(s)); },
  };
}

const noCollaborators = new Proxy({ async membership() { return undefined; } } as Partial<CollaboratorsStore>, {
  get: (t, k: string) => (t as Record<string, unknown>)[k] ?? notFaked(`collaborators.${k}`),
}) as CollaboratorsStore;

function storesOver(current: () => FakeState): CollectionsStores {
  return {
    collections: fakeCollectionsStore(current), collaborators: noCollaborators, steps: fakeStepsStore(current),
    uploadKeys: { record: notFaked("uploadKeys.record"), takeExpiredBefore: notFaked("uploadKeys.takeExpiredBefore") },
  };
}

/** A committed outbox event. */
export interface FakeEvent { type: string; payload: Record<string, unknown> }

/** A link row of the fake media service: the sub-collection `child` shown in `parent`. */
export interface FakeLink { id: number; parent: number; child: number }

/** How the fake media answers a call: normally, with an outage, or with its changes made but the answer lost. */
export type MediaBehaviour = "ok" | "down" | "answer_lost" | { refuse: ConnectError } | { hold: Promise<void> };

export interface FakeMedia {
  client: MediaClient;
  links: FakeLink[];
  lifecycle: Array<{ ids: number[]; action: string; version: number }>;
  /** Behaviour per method (default "ok"); a list is used one call at a time, its last one sticks. */
  behaviour: Partial<Record<keyof MediaClient, MediaBehaviour | MediaBehaviour[]>>;
  calls: string[];
}

function fakeMedia(inside: () => boolean): FakeMedia {
  let nextLink = 1000;
  const m: FakeMedia = { client: {} as MediaClient, links: [], lifecycle: [], behaviour: {}, calls: [] };
  const call = async <T>(method: keyof MediaClient, work: () => T): Promise<T> => {
    if (inside()) throw new Error(`media.${method} called inside a unit of work`);
    m.calls.push(method);
    const planned = m.behaviour[method] ?? "ok";
    const b = Array.isArray(planned) ? (planned.length > 1 ? planned.shift()! : planned[0]!) : planned;
    if (b === "down") throw new ConnectError("connect ECONNREFUSED", Code.Unavailable);
    if (typeof b === "object" && "refuse" in b) throw b.refuse;
    if (typeof b === "object" && "hold" in b) {
      const out = work();
      await b.hold;
      return out;
    }
    const out = work();
    if (b === "answer_lost") throw new ConnectError("stream reset", Code.Unavailable);
    return out;
  };
  const detach = (child: number) => {
    const removed = m.links.filter((l) => l.child === child).map((l) => l.id);
    m.links = m.links.filter((l) => l.child !== child);
    return removed;
  };
  m.client = {
    insertCollectionLink: (req) => call("insertCollectionLink", () => {
      const child = Number(req.childCollectionId);
      const existing = m.links.find((l) => l.child === child && l.parent === Number(req.parentCollectionId));
      const link = existing ?? { id: ++nextLink, parent: Number(req.parentCollectionId), child };
      if (!existing) m.links.push(link);
      return { linkMediaId: BigInt(link.id), position: 0 } as never;
    }),
    moveCollectionLink: (req) => call("moveCollectionLink", () => {
      const child = Number(req.childCollectionId);
      const removed = detach(child);
      let linkMediaId: bigint | undefined;
      if (req.newParentCollectionId !== undefined) {
        const link = { id: ++nextLink, parent: Number(req.newParentCollectionId), child };
        m.links.push(link);
        linkMediaId = BigInt(link.id);
      }
      return { removedLinkMediaIds: removed.map(BigInt), linkMediaId } as never;
    }),
    countCollectionMedia: (req) => call("countCollectionMedia", () => ({ counts: (req.collectionIds ?? []).map((id) => ({ collectionId: id, count: 0 })) }) as never),
    applyCollectionLifecycle: (req) => call("applyCollectionLifecycle", () => {
      m.lifecycle.push({ ids: (req.collectionIds ?? []).map(Number), action: req.action ?? "", version: Number(req.version) });
      return { affected: 0 } as never;
    }),
    exportCollectionMedia: notFaked("media.exportCollectionMedia") as never,
  } as MediaClient;
  return m;
}

export interface Harness {
  app: ReturnType<typeof createCollectionsApp>;
  state: () => FakeState;
  events: FakeEvent[];
  media: FakeMedia;
  clock: { now: Date };
  /** Log lines at warn and above, as [level, msg]. */
  logged: Array<[string, string]>;
}

/** The application over the fakes; the clock starts at a fixed time and moves only when a test moves it. */
export function harness(): Harness {
  let state = emptyState();
  let inside = false;
  const events: FakeEvent[] = [];
  const unitOfWork: UnitOfWork<CollectionsStores> = async (work) => {
    if (inside) throw new Error("nested unit of work");
    const draft = structuredClone(state);
    const pending: FakeEvent[] = [];
    const writer: EventWriter = { async emit(type, payload) { pending.push({ type, payload: structuredClone(payload) }); } };
    inside = true;
    try {
      const out = await work(storesOver(() => draft), writer);
      state = draft;
      events.push(...pending);
      return out;
    } finally {
      inside = false;
    }
  };
  const media = fakeMedia(() => inside);
  const clock = { now: new Date("2026-06-01T12:00:00Z") };
  const logged: Array<[string, string]> = [];
  const log = createLogger("warn");
  for (const level of ["warn", "error"] as const) {
    (log as unknown as Record<string, unknown>)[level] = (_obj: unknown, msg: string) => { logged.push([level, msg]); };
  }
  const deps: CollectionsAppDeps = {
    stores: storesOver(() => state),
    unitOfWork,
    media: media.client,
    social: {} as SocialClient,
    auth: { async getUsers() { return { users: [] }; } } as unknown as AuthClient,
    objects: { async delete() {} } as unknown as ObjectStore,
    config: { appUrl: "http://app.test" } as Config,
    log,
    now: () => clock.now,
  };
  return { app: createCollectionsApp(deps), state: () => state, events, media, clock, logged };
}

/** A caller with every scope. */
export function caller(userId = "00000000-0000-4000-8000-000000000001"): Caller {
  return {
    userId, username: "alice", plan: "paid", isAdmin: false, tokenId: "t",
    scopes: ["collections:read", "collections:write", "collections:delete", "media:read", "media:write"],
  };
}
