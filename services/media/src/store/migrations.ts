/** The media schema: media rows (files, links, text notes and sub-collection link rows). */
import { createImmutableUnaccent, createUploadKeysTable, type MigrationList } from "@cms/platform";

/** The media schema's migrations, in the order they run. */
export const mediaMigrations: MigrationList = [
  ["20261122000000_media", {
    async up(knex) {
      await knex.schema.createTable("media", (t) => {
        t.bigIncrements("id");
        t.bigInteger("collection_id").notNullable();
        // Owner of the collection the row belongs to.
        t.uuid("owner_user_id").notNullable();
        // Who created the row (the owner or a collaborator).
        t.uuid("created_by").notNullable();
        t.text("name");
        t.text("description");
        t.specificType("tags", "text[]").notNullable().defaultTo("{}");
        t.text("main_url").notNullable();
        t.text("viewer").notNullable();
        t.text("mime_type");
        t.bigInteger("size_bytes");
        t.text("sha256");
        t.text("thumbnail_url");
        t.text("background_image_url");
        t.text("text_note");
        t.text("display_mode");
        t.text("placeholder_kind");
        // Set on a sub-collection's link ('stub') row.
        t.bigInteger("linked_collection_id");
        t.integer("position").notNullable();
        t.boolean("is_archived").notNullable().defaultTo(false);
        t.boolean("is_deleted").notNullable().defaultTo(false);
        t.timestamp("deleted_at", { useTz: true });
        // Soft-deleted together with its collection (restored with it).
        t.boolean("deleted_with_collection").notNullable().defaultTo(false);
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw("CREATE INDEX media_collection_position ON media (collection_id, position) WHERE NOT is_deleted");
      await knex.raw("CREATE INDEX media_linked_collection ON media (linked_collection_id) WHERE linked_collection_id IS NOT NULL");
      await knex.raw("CREATE INDEX media_owner ON media (owner_user_id)");
    },
  }],
  ["20261122010000_media_search", {
    async up(knex) {
      await createImmutableUnaccent(knex);
      await knex.raw(`CREATE OR REPLACE FUNCTION media_search_document(name text, description text, tags text[]) RETURNS text
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
        $$ SELECT lower(immutable_unaccent(coalesce(name, '') || ' ' || coalesce(description, '') || ' ' || coalesce(array_to_string(tags, ' '), ''))) $$`);
      await knex.raw(`ALTER TABLE media ADD COLUMN search_text text GENERATED ALWAYS AS (media_search_document(name, description, tags)) STORED`);
      await knex.raw("CREATE INDEX media_search_trgm ON media USING gin (search_text gin_trgm_ops)");
      await knex.raw("CREATE INDEX media_tags ON media USING gin (tags)");
      await knex.raw("CREATE INDEX media_owner_active ON media (owner_user_id, updated_at DESC) WHERE NOT is_deleted");
    },
  }],
  ["20261122020000_media_order_index", {
    async up(knex) {
      // Pages of a collection in (position, id) order straight from the index, no sort.
      await knex.raw("CREATE INDEX media_collection_order ON media (collection_id, position, id) WHERE NOT is_deleted");
      await knex.raw("DROP INDEX IF EXISTS media_collection_position");
    },
  }],
  ["20261122030000_media_object_refs", {
    async up(knex) {
      // "Does any row still use this stored object?" runs on every delete and replacement.
      await knex.raw("CREATE INDEX media_main_url ON media (main_url)");
      await knex.raw("CREATE INDEX media_thumbnail_url ON media (thumbnail_url) WHERE thumbnail_url IS NOT NULL");
      await knex.raw("CREATE INDEX media_background_url ON media (background_image_url) WHERE background_image_url IS NOT NULL");
    },
  }],
  ["20261201000000_media_transfers", {
    async up(knex) {
      // Chunked upload sessions and their chunks live here (not in process memory), so that any
      // replica can take the next chunk or the finish.
      await knex.schema.createTable("upload_sessions", (t) => {
        t.uuid("id").primary();
        t.uuid("user_id").notNullable();
        t.bigInteger("collection_id").notNullable();
        // Owner of the collection (whose storage quota the upload counts against).
        t.uuid("owner_user_id").notNullable();
        t.text("filename");
        t.text("content_type");
        t.bigInteger("content_length").notNullable();
        t.text("sha256");
        t.text("name");
        t.text("description");
        t.specificType("tags", "text[]").notNullable().defaultTo("{}");
        // open -> finished (a finished session answers a repeated finish with its item).
        t.text("state").notNullable().defaultTo("open");
        t.bigInteger("media_id");
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("expires_at", { useTz: true }).notNullable();
      });
      await knex.raw("CREATE INDEX upload_sessions_expiry ON upload_sessions (expires_at)");
      await knex.raw("CREATE INDEX upload_sessions_open_owner ON upload_sessions (owner_user_id) WHERE state = 'open'");
      await knex.raw("CREATE INDEX upload_sessions_open_collection ON upload_sessions (collection_id) WHERE state = 'open'");
      await knex.schema.createTable("upload_chunks", (t) => {
        t.uuid("upload_id").notNullable().references("id").inTable("upload_sessions").onDelete("CASCADE");
        t.integer("idx").notNullable();
        t.integer("size").notNullable();
        t.binary("data").notNullable();
        t.primary(["upload_id", "idx"]);
      });
      await knex.raw("ALTER TABLE upload_chunks ALTER COLUMN data SET STORAGE EXTERNAL");
      await knex.schema.createTable("download_sessions", (t) => {
        t.uuid("id").primary();
        t.uuid("user_id").notNullable();
        t.bigInteger("media_id").notNullable();
        t.text("store_key").notNullable();
        t.text("content_type").notNullable();
        t.bigInteger("content_length").notNullable();
        t.text("sha256").notNullable();
        t.integer("chunk_bytes").notNullable();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("expires_at", { useTz: true }).notNullable();
      });
      await knex.raw("CREATE INDEX download_sessions_expiry ON download_sessions (expires_at)");
      // Rows created by media.get_upload_url's one-call flow whose bytes have not been seen yet.
      await knex.schema.createTable("pending_uploads", (t) => {
        t.bigInteger("media_id").primary().references("id").inTable("media").onDelete("CASCADE");
        t.text("store_key").notNullable().unique();
        t.uuid("user_id").notNullable();
        t.bigInteger("collection_id").notNullable();
        t.uuid("owner_user_id").notNullable();
        t.text("content_type").notNullable();
        // When the upload grant expires (no PUT can start after it).
        t.timestamp("expires_at", { useTz: true }).notNullable();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
    },
  }],
  ["20261122060000_upload_chunks_in_store", {
    // Large chunks move from bytea rows into the object store: a 1 MiB chunk cost ~10 ms of
    // PostgreSQL time and as much WAL. Small ones (up to 64 KiB, the recommended 16 KiB among
    // them) stay inline, where one row is cheaper than an object. A row with store_key names one
    // chunk object: "writing" is reserved before the object is written, so every object that may
    // exist has a row through which finish, abort and the expiry job remove it; "stored" is the
    // current chunk of its index (one per index). Sessions open at the upgrade lose their chunks,
    // which finish reports as missing indexes.
    async up(knex) {
      await knex.schema.dropTable("upload_chunks");
      await knex.schema.createTable("upload_chunks", (t) => {
        t.bigIncrements("id");
        t.uuid("upload_id").notNullable().references("id").inTable("upload_sessions").onDelete("CASCADE");
        t.integer("idx").notNullable();
        t.integer("size").notNullable();
        t.text("state").notNullable().defaultTo("writing");
        t.text("store_key").unique();
        t.binary("data");
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw("ALTER TABLE upload_chunks ALTER COLUMN data SET STORAGE EXTERNAL");
      await knex.raw("ALTER TABLE upload_chunks ADD CONSTRAINT upload_chunks_one_place CHECK ((store_key IS NULL) <> (data IS NULL))");
      await knex.raw("CREATE UNIQUE INDEX upload_chunks_stored ON upload_chunks (upload_id, idx) WHERE state = 'stored'");
      await knex.raw("CREATE INDEX upload_chunks_session ON upload_chunks (upload_id)");
    },
  }],
  ["20270101000000_collection_lifecycle_and_job_leases", {
    async up(knex) {
      // The last collection.lifecycle version applied to each collection: the event and the
      // ApplyCollectionLifecycle call after the commit carry the same version, and a redelivered
      // or late (older) change of a collection is skipped.
      await knex.schema.createTable("collection_lifecycle_versions", (t) => {
        t.bigInteger("collection_id").primary();
        t.bigInteger("version").notNullable();
        t.text("action").notNullable();
        t.timestamp("applied_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      // Which replica runs a periodic job now (a lease that expires, not a transaction held open
      // for the job's length: the jobs read the object store and call other services).
      await knex.schema.createTable("job_leases", (t) => {
        t.text("name").primary();
        t.uuid("holder").notNullable();
        t.timestamp("expires_at", { useTz: true }).notNullable();
      });
    },
  }],
  // media.search looks in one owner's media or one collection: one GIN index with both keys
  // (btree_gin) beside the trigrams and the tags finds the candidates of either scope without
  // reading the other users' matches, whatever the size of the table. It replaces the
  // table-wide trigram and tag indexes, which nothing else reads.
  ["20270110000000_scoped_search_index", {
    async up(knex) {
      await knex.raw(`CREATE INDEX media_scoped_search ON media USING gin (owner_user_id, collection_id, search_text gin_trgm_ops, tags)
        WHERE NOT is_deleted`);
      await knex.raw("DROP INDEX IF EXISTS media_search_trgm");
      await knex.raw("DROP INDEX IF EXISTS media_tags");
    },
  }],
  // media.list's total (count of the page's filter) reads is_archived from the index, not from
  // every row of the collection: an index-only scan once the rows are all-visible.
  ["20270120000000_media_order_index_archived", {
    async up(knex) {
      await knex.raw("CREATE INDEX media_collection_order_v2 ON media (collection_id, position, id) INCLUDE (is_archived) WHERE NOT is_deleted");
      await knex.raw("DROP INDEX IF EXISTS media_collection_order");
    },
  }],
  // media.list's total without a count: each collection's rows that are not deleted, archived
  // and not, kept by triggers on every write that can change them (inserts, deletes, and updates
  // of collection_id, is_deleted or is_archived), so no code path can forget it. (The next
  // migration makes the triggers append changes instead of updating this row.)
  ["20270201000000_media_list_counts", {
    async up(knex) {
      // No write between the backfill and the triggers: writers wait for the migration.
      await knex.raw("LOCK TABLE media IN SHARE ROW EXCLUSIVE MODE");
      await knex.raw(`CREATE TABLE media_list_counts (
        collection_id bigint PRIMARY KEY,
        listed bigint NOT NULL DEFAULT 0,
        archived bigint NOT NULL DEFAULT 0)`);
      await knex.raw(`CREATE FUNCTION media_list_counts_apply() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
          IF TG_OP <> 'INSERT' AND NOT OLD.is_deleted THEN
            UPDATE media_list_counts SET listed = listed - (NOT OLD.is_archived)::int, archived = archived - OLD.is_archived::int
              WHERE collection_id = OLD.collection_id;
          END IF;
          IF TG_OP <> 'DELETE' AND NOT NEW.is_deleted THEN
            INSERT INTO media_list_counts AS c (collection_id, listed, archived) VALUES (NEW.collection_id, (NOT NEW.is_archived)::int, NEW.is_archived::int)
              ON CONFLICT (collection_id) DO UPDATE SET listed = c.listed + excluded.listed, archived = c.archived + excluded.archived;
          END IF;
          RETURN NULL;
        END $$`);
      await knex.raw("CREATE TRIGGER media_list_counts_rows AFTER INSERT OR DELETE ON media FOR EACH ROW EXECUTE FUNCTION media_list_counts_apply()");
      await knex.raw(`CREATE TRIGGER media_list_counts_changes AFTER UPDATE OF collection_id, is_deleted, is_archived ON media FOR EACH ROW
        WHEN (OLD.collection_id IS DISTINCT FROM NEW.collection_id OR OLD.is_deleted IS DISTINCT FROM NEW.is_deleted OR OLD.is_archived IS DISTINCT FROM NEW.is_archived)
        EXECUTE FUNCTION media_list_counts_apply()`);
      await knex.raw(`INSERT INTO media_list_counts (collection_id, listed, archived)
        SELECT collection_id, count(*) FILTER (WHERE NOT is_archived), count(*) FILTER (WHERE is_archived) FROM media WHERE NOT is_deleted GROUP BY collection_id`);
    },
  }],
  // The triggers append a change row instead of updating the collection's count row: an update
  // would hold that row locked to the end of the writer's transaction, and a writer that
  // changed a row of the collection before waiting on it (media.archive takes no collection
  // lock) would deadlock with one that renumbers the collection after changing its count
  // (media.delete). Appended rows lock nothing that anyone waits for. The total is the count
  // row plus the collection's changes; the list_counts_fold job moves changes into the counts.
  ["20270201000100_media_list_count_changes", {
    async up(knex) {
      await knex.raw(`CREATE TABLE media_list_count_changes (
        id bigserial PRIMARY KEY,
        collection_id bigint NOT NULL,
        listed integer NOT NULL,
        archived integer NOT NULL)`);
      await knex.raw("CREATE INDEX media_list_count_changes_collection ON media_list_count_changes (collection_id)");
      await knex.raw(`CREATE OR REPLACE FUNCTION media_list_counts_apply() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
          IF TG_OP <> 'INSERT' AND NOT OLD.is_deleted THEN
            INSERT INTO media_list_count_changes (collection_id, listed, archived) VALUES (OLD.collection_id, -(NOT OLD.is_archived)::int, -(OLD.is_archived::int));
          END IF;
          IF TG_OP <> 'DELETE' AND NOT NEW.is_deleted THEN
            INSERT INTO media_list_count_changes (collection_id, listed, archived) VALUES (NEW.collection_id, (NOT NEW.is_archived)::int, NEW.is_archived::int);
          END IF;
          RETURN NULL;
        END $$`);
    },
  }],
  // The object-store key a row's thumbnail pair was made from. The source itself is removed once
  // the pair is made (media.create and media.update with a key left it stored, named by no row);
  // a media.thumbnail_finalize naming it again, as the upload flow's last step, is then a noop.
  ["20270301000000_media_thumbnail_source", {
    async up(knex) {
      await knex.raw("ALTER TABLE media ADD COLUMN thumbnail_source text");
    },
  }],
  // Keys of upload URLs minted with no row waiting for them (media.get_upload_url's classic and
  // thumbnail flows). An object PUT there that no item ever took up stayed stored for good,
  // outside every quota (quotas count rows); the upload_cleanup job hands each key to the object
  // cleanup a day after its URL expired, which removes it unless a row names it by then.
  ["20270301000100_upload_keys", {
    async up(knex) {
      await createUploadKeysTable(knex, "upload_keys");
    },
  }],
];
