/** Bookmarks: saved sets of collections, seen and deleted by their owner only. */
import { AppError } from "@cms/platform";
import { normalizeCollectionIds } from "../domain/bookmarks.js";
import type { BookmarkRow, SocialStore } from "../store/social-store.js";

export interface Page { limit: number; offset: number }

export function createBookmarks(store: SocialStore) {
  return {
    async create(userId: string, input: { title: string; collectionIds: string; source: string }): Promise<BookmarkRow> {
      const title = input.title.trim();
      if (!title) throw new AppError("invalid_request", "title must not be blank.", { field: "title" });
      return store.insertBookmark({ user_id: userId, title, collection_ids: normalizeCollectionIds(input.collectionIds), source: input.source });
    },

    /** Another user's bookmark is as unknown as a missing one. */
    async delete(userId: string, id: string): Promise<void> {
      if (!(await store.deleteBookmark(userId, id.toLowerCase()))) {
        throw new AppError("not_found", `You have no bookmark with id ${id}.`, { field: "bookmark_id" });
      }
    },

    async list(userId: string, page: Page): Promise<{ rows: BookmarkRow[]; total: number; page: Page }> {
      return { ...(await store.bookmarksPage(userId, page.limit, page.offset)), page };
    },
  };
}

export type Bookmarks = ReturnType<typeof createBookmarks>;
