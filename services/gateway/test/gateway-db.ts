/**
 * A fresh database with the gateway's schema migrated, for the tests of its PostgreSQL stores
 * (rate limits, idempotency records, MCP sessions): made before a file's tests, dropped after.
 */
import type { TestFn } from "ava";
import type { Knex } from "knex";
import { createDb, migrate } from "@cms/platform";
import { freshDatabase } from "../../../test/helpers/system.ts";
import { gatewayMigrations } from "../src/store/migrations.ts";

const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** Registers the file's before/after hooks; the returned function gives the pool once they ran. */
export function useGatewayDatabase(test: TestFn, hooks: { ready?: (db: Knex) => void; closing?: () => void } = {}): () => Knex {
  let database: { url: string; drop(): Promise<void> } | undefined;
  let db: Knex | undefined;
  test.before(async () => {
    database = await freshDatabase(adminUrl);
    db = createDb(database.url, "gateway", 5);
    await migrate(db, "gateway", gatewayMigrations);
    hooks.ready?.(db);
  });
  test.after.always(async () => {
    hooks.closing?.();
    await db?.destroy();
    await database?.drop();
  });
  return () => {
    if (!db) throw new Error("the gateway test database is not ready (used outside a test?)");
    return db;
  };
}
