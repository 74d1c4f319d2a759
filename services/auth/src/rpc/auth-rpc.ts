/** Thin Connect handlers of AuthService. */
import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { AuthService, UserSchema, OAuthErrorSchema, type AuthorizationRequest as AuthorizationRequestMsg } from "@cms/contracts/auth/v1/auth_pb";
import { EVENTS, requireCaller, type ServiceBus } from "@cms/platform";
import type { Auth } from "../app/auth.js";
import type { WebSessions } from "../app/web-sessions.js";
import { AuthorizationRefused, type AuthorizationRequest, type OAuth } from "../app/oauth.js";
import { OAuthError } from "../domain/oauth.js";
import type { AuthStore, UserRow } from "../store/auth-store.js";
import { ALL_SCOPES } from "../domain/tokens.js";

function userMsg(u: UserRow) {
  return create(UserSchema, { userId: u.id, username: u.username, plan: u.plan, isAdmin: u.is_admin, createdAt: u.created_at.toISOString() });
}

function requestOf(m: AuthorizationRequestMsg | undefined): AuthorizationRequest {
  return {
    clientId: m?.clientId ?? "", redirectUri: m?.redirectUri ?? "", responseType: m?.responseType ?? "", codeChallenge: m?.codeChallenge ?? "",
    codeChallengeMethod: m?.codeChallengeMethod ?? "", scope: m?.scope, resources: m?.resource ?? [],
  };
}

const oauthError = (e: OAuthError) => create(OAuthErrorSchema, { error: e.code, errorDescription: e.description });

/** Runs an OAuth use case; its refusal becomes the response's error (other failures stay RPC errors). */
async function refusable<T extends object>(run: () => Promise<T>): Promise<T | { error: ReturnType<typeof oauthError>; redirectable: boolean }> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof AuthorizationRefused) return { error: oauthError(err.error), redirectable: err.redirectable };
    if (err instanceof OAuthError) return { error: oauthError(err), redirectable: false };
    throw err;
  }
}

export interface AuthApps {
  auth: Auth;
  sessions: WebSessions;
  oauth: OAuth;
  store: AuthStore;
  bus: ServiceBus;
}

export function authRoutes({ auth, sessions, oauth, store, bus }: AuthApps) {
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
        return { active: true, user: userMsg(row.user), scopes: row.scopes, expiresAt: row.expires_at.toISOString(), tokenId: row.id, audience: row.audience, clientId: row.client_id };
      },
      async createUser(req) {
        return userMsg(await auth.createUser(req.username, req.plan || "free", req.isAdmin, req.password));
      },
      async mintToken(req) {
        const t = await auth.mintToken(req.username, req.scopes.length ? req.scopes : undefined, { ttlSeconds: req.ttlSeconds, clientId: req.clientId });
        return { accessToken: t.accessToken, scopes: t.scopes, expiresAt: t.expiresAt.toISOString(), tokenId: t.tokenId };
      },
      async revokeToken(req) {
        const { revoked, tokenHash } = await auth.revokeToken(req.token);
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
      async checkAuthorization(req) {
        return refusable(async () => {
          const c = await oauth.checkAuthorization(requestOf(req.request), req.sessionToken || undefined);
          return { clientName: c.client.name, scopes: c.scopes, audience: c.audience, consented: c.consented, username: c.username ?? "", redirectable: true };
        });
      },
      async issueAuthorizationCode(req) {
        return refusable(async () => ({ code: (await oauth.issueCode(requestOf(req.request), req.sessionToken)).code, redirectable: true }));
      },
      async exchangeToken(req) {
        return refusable(async () => {
          const t = await oauth.token({
            grantType: req.grantType, code: req.code || undefined, redirectUri: req.redirectUri || undefined, codeVerifier: req.codeVerifier || undefined,
            refreshToken: req.refreshToken || undefined, scope: req.scope, resources: req.resource, clientId: req.clientId || undefined,
            clientSecret: req.clientSecret || undefined,
          });
          return { accessToken: t.access_token, tokenType: t.token_type, expiresIn: t.expires_in, refreshToken: t.refresh_token, scope: t.scope };
        });
      },
      async registerClient(req) {
        return refusable(async () => {
          const { client, secret } = await oauth.registerClient({
            name: req.clientName, redirectUris: req.redirectUris, confidential: req.confidential, scope: req.scope, registeredBy: req.registeredBy as "cli" | "dynamic",
          });
          return {
            clientId: client.client_id, clientSecret: secret ?? "", clientName: client.name, redirectUris: client.redirect_uris,
            clientIdIssuedAt: BigInt(Math.floor(client.created_at.getTime() / 1000)), scope: (client.scopes ?? []).join(" "),
          };
        });
      },
      async revokeMcpSession(_req, ctx) {
        const caller = requireCaller(ctx);
        return oauth.revokeMcpSession(caller.userId, caller.tokenId);
      },
    });
}
