/** Thin Connect handlers of AuthService. */
import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { AuthService, UserSchema } from "@cms/contracts/auth/v1/auth_pb";
import { EVENTS, requireCaller, type ServiceBus } from "@cms/platform";
import type { Auth } from "../app/auth.js";
import type { WebSessions } from "../app/web-sessions.js";
import type { AuthStore, UserRow } from "../store/auth-store.js";
import { ALL_SCOPES, hashSecret } from "../domain/tokens.js";

function userMsg(u: UserRow) {
  return create(UserSchema, { userId: u.id, username: u.username, plan: u.plan, isAdmin: u.is_admin, createdAt: u.created_at.toISOString() });
}

export function authRoutes(auth: Auth, sessions: WebSessions, store: AuthStore, bus: ServiceBus) {
  return (router: ConnectRouter) =>
    router.service(AuthService, {
      async introspectToken(req) {
        const service = await auth.serviceOf(req.token);
        if (service) return { active: true, serviceName: service };
        const session = await sessions.resolve(req.token);
        if (session) {
          // The user at their own pages: a first-party session acts with every scope.
          return { active: true, user: userMsg(session.user), scopes: [...ALL_SCOPES], expiresAt: session.expires_at.toISOString(), tokenId: session.id, webSession: true };
        }
        const row = await auth.introspect(req.token);
        if (!row) return { active: false };
        return { active: true, user: userMsg(row.user), scopes: row.scopes, expiresAt: row.expires_at.toISOString(), tokenId: row.id };
      },
      async createUser(req) {
        return userMsg(await auth.createUser(req.username, req.plan || "free", req.isAdmin, req.password));
      },
      async mintToken(req) {
        const t = await auth.mintToken(req.username, req.scopes.length ? req.scopes : undefined, { ttlSeconds: req.ttlSeconds, clientId: req.clientId });
        return { accessToken: t.accessToken, scopes: t.scopes, expiresAt: t.expiresAt.toISOString(), tokenId: t.tokenId };
      },
      async revokeToken(req) {
        const tokenHash = hashSecret(req.token);
        const revoked = await store.revokeToken(tokenHash);
        bus.broadcast(EVENTS.tokenRevoked, { token_hash: tokenHash });
        return { revoked };
      },
      async getUsers(req) {
        const rows = [...await store.usersByIds(req.userIds), ...await store.usersByUsernames(req.usernames)];
        return { users: rows.map(userMsg) };
      },
      async createApiKey(req) {
        return { apikey: await auth.createApiKey(req.label, req.key) };
      },
      async checkApiKey(req) {
        return { valid: await auth.checkApiKey(req.apikey) };
      },
      async createServiceCredential(req) {
        return auth.createServiceCredential(req.name);
      },
      async signIn(req) {
        const s = await sessions.signIn(req.username, req.password, req.address);
        return { sessionToken: s.token, user: userMsg(s.user), expiresAt: s.expiresAt.toISOString() };
      },
      async signOut(req) {
        const out = await sessions.signOut(req.sessionToken);
        if (out.signedOut) bus.broadcast(EVENTS.tokenRevoked, { token_hash: out.tokenHash });
        return { signedOut: out.signedOut };
      },
      async revokeMcpSession(_req, ctx) {
        const caller = requireCaller(ctx);
        const hashes = await store.revokeMcpTokens(caller.userId, caller.tokenId);
        for (const h of hashes) bus.broadcast(EVENTS.tokenRevoked, { token_hash: h });
        return { revoked: hashes.length };
      },
    });
}
