/**
 * media.search in the store, on PostgreSQL: a scope's hits (name, description or tags; accents
 * folded; LIKE's own characters taken literally), newest first, a page and the number of hits at
 * any offset; the counts behind the empty page's hints (archived rows with links, other
 * collections). Each page is checked against the rows chosen and ordered here in plain code.
 */
import test from "ava";
import { randomBytes, randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { freshDatabase } from "../../../test/helpers/system.ts";
import { createDb, ensureExtensions, migrate, serviceMigrations } from "@cms/platform";
import { mediaMigrations } from "../src/store/migrations.js";
import { createMediaStore, type SearchScope } from "../src/store/media-store.js";
import { foldAccents } from "../src/domain/rules.js";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
let database: { url: string; drop(): Promise<void> };
let db: Knex;

test.before(async () => {
  database = await freshDatabase(adminUrl);
  const schema = `media_${randomBytes(4).toString("hex")}`;
  db = createDb(database.url, schema, 2);
  await ensureExtensions(db, ["pg_trgm", "unaccent", "btree_gin"]);
  await migrate(db, schema, serviceMigrations(mediaMigrations));
});
test.after.always(async () => {
  await db?.destroy();
  await database?.drop();
});

interface Item { name: string; description?: string; tags?: string[]; collection: number; archived?: boolean; deleted?: boolean; link?: boolean }
interface Seeded extends Item { id: number; owner: string; updatedAt: number }

/**
 * Rows of `owner`, updated in another order than they were inserted (the 4th at the 3rd's time:
 * the id breaks the tie).
 */
async function seed(owner: string, items: Item[]): Promise<Seeded[]> {
  const out: Seeded[] = [];
  for (const [i, it] of items.entries()) {
    const updatedAt = Date.UTC(2026, 0, 1) + ((i === 3 ? 2 : i) * 5 % 11) * 1000;
    const { rows: [r] } = await db.raw(
      `INSERT INTO media (collection_id, owner_user_id, created_by, name, description, tags, main_url, viewer, position, is_archived, is_deleted, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
      [it.collection, owner, owner, it.name, it.description ?? null, it.tags ?? [], it.link ? `collection://${it.collection + 1000}` : "inline://text-note",
        it.link ? "collection" : "text", i, it.archived ?? false, it.deleted ?? false, new Date(updatedAt)],
    );
    out.push({ ...it, id: Number(r.id), owner, updatedAt });
  }
  return out;
}

/** The hits of a scope as the rule says, newest first (ties: the larger id first). */
function expected(rows: Seeded[], scope: SearchScope, query: string): number[] {
  const q = foldAccents(query);
  const words = query.split(/\s+/).filter(Boolean);
  return rows
    .filter((r) => !r.deleted && Boolean(r.archived) === scope.archived)
    .filter((r) => (scope.ownerUserId === undefined || r.owner === scope.ownerUserId) && (scope.collectionId === undefined || r.collection === scope.collectionId))
    .filter((r) => scope.exceptCollectionId === undefined || r.collection !== scope.exceptCollectionId)
    .filter((r) => scope.withLinks || !r.link)
    .filter((r) => foldAccents(`${r.name} ${r.description ?? ""} ${(r.tags ?? []).join(" ")}`).includes(q) || (r.tags ?? []).some((t) => words.includes(t)))
    .sort((a, b) => b.updatedAt - a.updatedAt || b.id - a.id)
    .map((r) => r.id);
}

test("a scope's hits, newest first, page by page with their number; the counts of the hints", async (t) => {
  const owner = randomUUID();
  const stranger = randomUUID();
  const rows = [
    ...await seed(owner, [
      { name: "Harbour at dawn", collection: 1 },
      { name: "Notes", description: "A walk by the HARBOUR", collection: 1 },
      { name: "Untitled", tags: ["harbour", "sea"], collection: 2 },
      { name: "Café harbour", collection: 2 },
      { name: "Old harbour", collection: 2, archived: true },
      { name: "Deleted harbour", collection: 1, deleted: true },
      { name: "Harbour album", collection: 1, link: true },
      { name: "Archived harbour album", collection: 2, link: true, archived: true },
      { name: "50% off at the harbour_shop", collection: 1 },
      { name: "500 off at the harbourXshop", collection: 1 },
      { name: "Cafe", tags: ["cafe"], collection: 2 },
    ]),
    ...await seed(stranger, [{ name: "Their harbour", collection: 3 }]),
  ];
  await db.raw("ANALYZE media");
  const store = createMediaStore(db);
  const scopes: SearchScope[] = [
    { ownerUserId: owner, archived: false },
    { collectionId: 1, archived: false },
    { collectionId: 2, archived: false },
    { ownerUserId: owner, archived: true, withLinks: true },
    { ownerUserId: owner, archived: false, exceptCollectionId: 1 },
  ];
  for (const scope of scopes) {
    for (const query of ["harbour", "café", "50%", "harbour_shop", "sea", "nothing like it"]) {
      const want = expected(rows, scope, query);
      const what = `${JSON.stringify(scope)} "${query}"`;
      t.is(await store.searchCount(scope, query), want.length, what);
      for (const [limit, offset] of [[50, 0], [2, 0], [2, 2], [3, 3], [2, want.length], [2, want.length + 4]] as const) {
        const page = await store.searchPage(scope, query, limit, offset);
        t.deepEqual(page.rows.map((r) => Number(r.id)), want.slice(offset, offset + limit), `${what} limit ${limit} offset ${offset}`);
        t.is(page.total, want.length, `${what} total at offset ${offset}`);
        for (const r of page.rows) t.false("total" in r, "a row is a media row");
      }
    }
  }
  // The rule's own cases, spelled out: an accent folded both ways, LIKE's characters literal.
  t.is((await store.searchPage({ ownerUserId: owner, archived: false }, "café", 50, 0)).total, 2);
  t.is((await store.searchPage({ ownerUserId: owner, archived: false }, "50%", 50, 0)).total, 1);
  t.is((await store.searchPage({ ownerUserId: owner, archived: false }, "harbour_shop", 50, 0)).total, 1);
  // A page's rows are whole media rows.
  const [first] = (await store.searchPage({ collectionId: 1, archived: false }, "dawn", 1, 0)).rows;
  t.like(first, { name: "Harbour at dawn", collection_id: 1, owner_user_id: owner, viewer: "text", is_archived: false, is_deleted: false });
});
