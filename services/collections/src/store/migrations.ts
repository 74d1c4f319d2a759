/** The collections schema: collections, likes, slug reservations, purge tombstones, collaborators, pending steps. */
import { createImmutableUnaccent, createUploadKeysTable, type MigrationList } from "@cms/platform";

/** The collections schema's migrations, in order (run at start by the launcher). */
export const collectionsMigrations: MigrationList = [
  ["20261122000000_collections", {
    async up(knex) {
      await createImmutableUnaccent(knex);
      await knex.raw(`CREATE OR REPLACE FUNCTION search_document(name text, description text, tags text[]) RETURNS text
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
        $$ SELECT lower(immutable_unaccent(coalesce(name, '') || ' ' || coalesce(description, '') || ' ' || coalesce(array_to_string(tags, ' '), ''))) $$`);
      await knex.schema.createTable("collections", (t) => {
        t.bigIncrements("id");
        t.uuid("user_id").notNullable();
        t.text("name").notNullable();
        t.text("description");
        t.specificType("tags", "text[]").notNullable().defaultTo("{}");
        t.text("thumbnail_url");
        t.text("cover_thumbnail_url");
        t.boolean("is_nsfw").notNullable().defaultTo(false);
        t.text("share_access_level").notNullable().defaultTo("private");
        t.boolean("share_access_configured").notNullable().defaultTo(false);
        t.boolean("searchable").notNullable().defaultTo(false);
        t.boolean("is_published").notNullable().defaultTo(false);
        t.timestamp("published_at", { useTz: true });
        t.text("share_slug");
        t.uuid("share_id").notNullable().defaultTo(knex.raw("gen_random_uuid()")).unique();
        // Publish alias chosen (null: the system username) and the handle it resolved to.
        t.uuid("publish_alias_id");
        t.text("publish_handle");
        t.boolean("open_fullscreen").notNullable().defaultTo(false);
        t.jsonb("playback_prefs");
        t.integer("position").notNullable().defaultTo(0);
        t.boolean("is_archived").notNullable().defaultTo(false);
        t.boolean("is_deleted").notNullable().defaultTo(false);
        t.timestamp("deleted_at", { useTz: true });
        // The collection whose delete took this one along (restored together).
        t.bigInteger("deleted_with");
        t.bigInteger("parent_id").references("id").inTable("collections").onDelete("CASCADE");
        t.bigInteger("views").notNullable().defaultTo(0);
        t.integer("likes").notNullable().defaultTo(0);
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.raw(`ALTER TABLE collections ADD CONSTRAINT collections_access_check CHECK (share_access_level IN ('private','public','registered','restricted'))`);
      await knex.raw(`ALTER TABLE collections ADD COLUMN search_text text GENERATED ALWAYS AS (search_document(name, description, tags)) STORED`);
      await knex.raw(`ALTER TABLE collections ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', search_document(name, description, tags))) STORED`);
      // Names are unique per (owner, parent), the top level included.
      await knex.raw(`CREATE UNIQUE INDEX collections_owner_parent_name ON collections (user_id, coalesce(parent_id, 0), name) WHERE NOT is_deleted`);
      await knex.raw(`CREATE INDEX collections_owner_parent_position ON collections (user_id, parent_id, position, id)`);
      await knex.raw(`CREATE INDEX collections_parent ON collections (parent_id) WHERE parent_id IS NOT NULL`);
      await knex.raw(`CREATE INDEX collections_search_trgm ON collections USING gin (search_text gin_trgm_ops)`);
      await knex.raw(`CREATE INDEX collections_search_tsv ON collections USING gin (search_tsv)`);
      await knex.raw(`CREATE INDEX collections_discoverable_views ON collections (views DESC, id DESC) WHERE is_published AND searchable AND share_access_level = 'public' AND NOT is_deleted AND NOT is_archived`);
      await knex.raw(`CREATE INDEX collections_published_slug ON collections (user_id, share_slug) WHERE is_published`);
      await knex.raw(`CREATE INDEX collections_deleted ON collections (deleted_at) WHERE is_deleted`);

      await knex.schema.createTable("likes", (t) => {
        t.uuid("user_id").notNullable();
        t.bigInteger("collection_id").notNullable().references("id").inTable("collections").onDelete("CASCADE");
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.primary(["user_id", "collection_id"]);
        t.index(["collection_id"]);
      });
      // A slug stays reserved on the account forever, even after its collection is purged.
      await knex.schema.createTable("reserved_slugs", (t) => {
        t.uuid("user_id").notNullable();
        t.text("slug").notNullable();
        t.bigInteger("collection_id").notNullable();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.primary(["user_id", "slug"]);
      });
      // Purged collections, so that a late restore answers 410 rather than 404.
      await knex.schema.createTable("purged_collections", (t) => {
        t.bigInteger("id").primary();
        t.uuid("user_id").notNullable();
        t.timestamp("purged_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
      });
      await knex.schema.createTable("collaborators", (t) => {
        t.bigInteger("collection_id").notNullable().references("id").inTable("collections").onDelete("CASCADE");
        t.uuid("user_id").notNullable();
        t.uuid("inviter_user_id").notNullable();
        // pending | accepted | declined
        t.text("status").notNullable();
        t.boolean("can_upload").notNullable().defaultTo(true);
        t.boolean("can_edit").notNullable().defaultTo(false);
        t.boolean("can_delete").notNullable().defaultTo(false);
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("responded_at", { useTz: true });
        t.primary(["collection_id", "user_id"]);
        t.index(["user_id", "status"]);
        t.index(["inviter_user_id", "created_at"]);
      });
    },
  }],
  // Every invite sent, for the per-inviter caps (15 per hour, 50 per 24 hours): revoked and
  // declined invites still count, so the collaborators rows alone cannot answer. Rows older
  // than 24 hours are pruned by the next invite of the same inviter.
  ["20261123000000_collaborator_invite_log", {
    async up(knex) {
      await knex.schema.createTable("collaborator_invite_log", (t) => {
        t.bigIncrements("id");
        t.uuid("inviter_user_id").notNullable();
        t.bigInteger("collection_id").notNullable();
        t.uuid("user_id").notNullable();
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(["inviter_user_id", "created_at"]);
      });
    },
  }],
  // The media service asks which keys are covers (CoverStoreKeys) before it adopts or removes
  // objects; these make that an index lookup.
  ["20261123010000_cover_key_indexes", {
    async up(knex) {
      await knex.raw("CREATE INDEX collections_thumbnail_url ON collections (thumbnail_url) WHERE thumbnail_url IS NOT NULL");
      await knex.raw("CREATE INDEX collections_cover_thumbnail_url ON collections (cover_thumbnail_url) WHERE cover_thumbnail_url IS NOT NULL");
    },
  }],
  // Orders the collection.lifecycle events (soft_deleted, restored, purged): the media service
  // ignores a change older than the last one it applied to a collection.
  ["20261124000000_collection_lifecycle_version", {
    async up(knex) {
      await knex.raw("CREATE SEQUENCE collection_lifecycle_version AS bigint");
    },
  }],
  // Steps spanning the collections and media services, recorded with the collections change and
  // removed once media followed (../domain/pending-steps.ts). The recovery job (pending_steps)
  // undoes what a crash or an outage left.
  ["20261124010000_pending_steps", {
    async up(knex) {
      await knex.schema.createTable("pending_steps", (t) => {
        t.bigIncrements("id");
        // create_link | move_link
        t.text("kind").notNullable();
        t.bigInteger("collection_id").notNullable();
        t.jsonb("payload").notNullable();
        // pending | compensating
        t.text("state").notNullable().defaultTo("pending");
        t.integer("attempts").notNullable().defaultTo(0);
        t.timestamp("next_attempt_at", { useTz: true }).notNullable();
        t.text("last_error");
        t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
        t.index(["next_attempt_at"]);
        t.index(["collection_id"]);
      });
    },
  }],
  // Own-scope search reads the owner's entries of one GIN index (btree_gin puts user_id beside
  // the trigrams and the lexemes) for each arm of its match (substring, word similarity, full
  // text), so the candidates come from the index whatever the number of the owner's collections,
  // and only they are ranked. Partial: search never shows deleted, archived or sub-collections.
  // The planner estimates `search_text %> q` by running word_similarity over the column's
  // statistics (about 200 values at the default target: 2 ms of planning per search, more than
  // the search itself); 10 buckets keep an estimate at a tenth of that.
  ["20261210000000_owner_search_index", {
    async up(knex) {
      await knex.raw(`CREATE INDEX collections_owner_search ON collections USING gin (user_id, search_text gin_trgm_ops, search_tsv)
        WHERE NOT is_deleted AND parent_id IS NULL AND NOT is_archived`);
      await knex.raw("ALTER TABLE collections ALTER COLUMN search_text SET STATISTICS 10");
    },
  }],
  // The object-store key a collection's cover was made from (an uploaded image). That source is
  // removed once the cover is stored (it stayed stored, named by nothing); an update naming it
  // again, a retry, then keeps the cover rather than failing on an object that is gone.
  ["20270301000000_collection_cover_source", {
    async up(knex) {
      await knex.raw("ALTER TABLE collections ADD COLUMN cover_source text");
    },
  }],
  // Keys of cover upload URLs (collections.get_upload_url). An image PUT there that no
  // collections.create or update took up stayed stored for good; the retention job hands each key
  // to the media service's object cleanup a day after its URL expired.
  ["20270301000100_cover_upload_keys", {
    async up(knex) {
      await createUploadKeysTable(knex, "cover_upload_keys");
    },
  }],
];
