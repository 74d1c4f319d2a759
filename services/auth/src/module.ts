/** The auth service module: users and passwords, web sessions, tokens, API keys. */
import type { ServiceModule } from "@cms/platform";
import { createAuthStore, migrations } from "./store/auth-store.js";
import { createAuth } from "./app/auth.js";
import { createWebSessions } from "./app/web-sessions.js";
import { authRoutes } from "./rpc/auth-rpc.js";

export const authModule: ServiceModule = {
  name: "auth",
  schema: "auth",
  migrations,
  async init(ctx) {
    const store = createAuthStore(ctx.db);
    const auth = createAuth(store);
    return { routes: authRoutes(auth, createWebSessions(store), store, ctx.bus) };
  },
};

export { createAuth, createAuthStore, migrations as authMigrations };
