/** The auth service module: users and passwords, web sessions, tokens, the OAuth 2.0 authorization server, API keys. */
import { EVENTS, type ServiceModule } from "@cms/platform";
import { createAuthStore, migrations } from "./store/auth-store.js";
import { createAuth } from "./app/auth.js";
import { createWebSessions } from "./app/web-sessions.js";
import { createOAuth } from "./app/oauth.js";
import { createOAuthStore } from "./store/oauth-store.js";
import { authRoutes } from "./rpc/auth-rpc.js";

export const authModule: ServiceModule = {
  name: "auth",
  schema: "auth",
  migrations,
  async init(ctx) {
    const store = createAuthStore(ctx.db);
    const scrypt = ctx.config.passwordHashParams;
    const auth = createAuth(store, { scrypt });
    const sessions = createWebSessions(store, { scrypt });
    const oauth = createOAuth({
      store: createOAuthStore(ctx.db), uow: ctx.unitOfWork(createOAuthStore), sessions,
      resources: () => ({ mcp: `${ctx.config.mcpUrl}/mcp`, api: `${ctx.config.baseUrl}/functions/v1/thirdparty-v1` }),
      revoked: (hashes) => { for (const h of hashes) ctx.bus.broadcast(EVENTS.tokenRevoked, { token_hash: h }); },
    });
    return { routes: authRoutes({ auth, sessions, oauth, store, bus: ctx.bus }) };
  },
};

export { createAuth, createAuthStore, createOAuth, createOAuthStore, migrations as authMigrations };
