/** The social service module: publish aliases, follows, profiles, bookmarks, the tag vocabulary, bug reports and the synchronized player state. */
import type { ServiceModule } from "@cms/platform";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { migrations } from "./store/migrations.js";
import { createSocialStore } from "./store/social-store.js";
import { createUserDirectory } from "./store/user-directory.js";
import { createSocial } from "./app/social.js";
import { createBookmarks } from "./app/bookmarks.js";
import { createBugReports } from "./app/bug-reports.js";
import { createPlayer } from "./app/player.js";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { socialRoutes } from "./rpc/social-rpc.js";

export const socialModule: ServiceModule = {
  name: "social",
  schema: "social",
  migrations,
  async init(ctx) {
    const store = createSocialStore(ctx.db);
    const social = createSocial(store, createUserDirectory(() => ctx.clients.get(AuthService)));
    const player = createPlayer({
      uow: ctx.unitOfWork(createSocialStore), store,
      collections: () => ctx.clients.get(CollectionsService), media: () => ctx.clients.get(MediaService),
      broadcast: (type, payload) => ctx.bus.broadcast(type, payload),
    });
    return { routes: socialRoutes({ social, player, bookmarks: createBookmarks(store), bugs: createBugReports(store), vocabulary: store }) };
  },
};

export { createSocial, createSocialStore, migrations as socialMigrations };
