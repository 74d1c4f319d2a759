/**
 * The OAuth 2.0 authorization server's use cases: checking an authorization request, issuing a
 * code once the signed-in user consents, exchanging codes and refresh tokens for tokens, client
 * registration, and ending a user's MCP sessions. Protocol rules are in domain/oauth.ts; every
 * change that must hold together (a code's use and the grant it issues, a refresh token's
 * rotation) is one unit of work, and a refusal that revokes something (a code or refresh token
 * presented twice) commits the revocation before it answers.
 */
import type { UnitOfWork } from "@cms/platform";
import {
  ACCESS_TOKEN_TTL_SECONDS, AUTHORIZATION_CODE_TTL_SECONDS, MCP_CLIENT_ID, OAuthError, REFRESH_TOKEN_TTL_SECONDS,
  audienceOf, checkChallenge, consentCovers, narrowedScopes, newAuthorizationCode, newClientId, newClientSecret, newRefreshToken,
  redirectUriMatches, redirectUriProblem, requestedScopes, verifierMatches, type TokenResponse,
} from "../domain/oauth.js";
import { ALL_SCOPES, hashSecret, newAccessToken } from "../domain/tokens.js";
import type { ClientRow, GrantRow, OAuthStore } from "../store/oauth-store.js";
import type { WebSessions } from "./web-sessions.js";

/** The resources this server issues audience-bound tokens for (RFC 8707). */
export interface Resources {
  /** `{MCP_URL}/mcp` */
  mcp: string;
  /** `{BASE_URL}/functions/v1/thirdparty-v1` */
  api: string;
}

export interface OAuthDeps {
  store: OAuthStore;
  uow: UnitOfWork<OAuthStore>;
  /** Web sessions (the signed-in user of the authorization page); not needed by the admin CLI. */
  sessions?: WebSessions;
  /** Read at each call: with PORT=0 the origins are known only once the gateway listens. */
  resources: () => Resources;
  /** Tells every gateway and service to forget revoked tokens (by hash) at once. */
  revoked?: (tokenHashes: string[]) => void;
  now?: () => Date;
}

/** An authorization request as the client sent it (RFC 6749 4.1.1, RFC 7636 4.3, RFC 8707 2). */
export interface AuthorizationRequest {
  clientId: string;
  redirectUri: string;
  responseType: string;
  codeChallenge: string;
  codeChallengeMethod: string;
  scope?: string;
  resources: string[];
}

/**
 * A refused authorization request. Not redirectable when the client or its redirect URI is not
 * valid: the user is told, and nothing is sent to a URI nobody registered (RFC 6749 4.1.2.1).
 */
export class AuthorizationRefused extends Error {
  constructor(readonly error: OAuthError, readonly redirectable: boolean) {
    super(error.message);
  }
}

export interface CheckedAuthorization {
  client: ClientRow;
  redirectUri: string;
  scopes: string[];
  audience: string;
  /** The signed-in user (when a session was given) and whether an earlier consent covers this request. */
  userId?: string;
  username?: string;
  consented: boolean;
}

/** A token request (RFC 6749 4.1.3, 6), with the client's credentials however they came. */
export interface TokenRequest {
  grantType: string;
  code?: string;
  redirectUri?: string;
  codeVerifier?: string;
  refreshToken?: string;
  scope?: string;
  resources: string[];
  clientId?: string;
  clientSecret?: string;
}

export interface ClientRegistration {
  name: string;
  redirectUris: string[];
  confidential: boolean;
  scope?: string;
  registeredBy: "cli" | "dynamic";
}

const list = (r: Resources) => [r.mcp, r.api];

export function createOAuth(deps: OAuthDeps) {
  const now = deps.now ?? (() => new Date());
  const announce = (hashes: string[]) => { if (hashes.length) deps.revoked?.(hashes); };

  async function check(req: AuthorizationRequest, sessionToken?: string): Promise<CheckedAuthorization> {
    const client = req.clientId ? await deps.store.client(req.clientId) : undefined;
    if (!client) throw new AuthorizationRefused(new OAuthError("invalid_request", req.clientId ? `No client with id ${req.clientId} is registered here.` : "client_id is required."), false);
    if (!req.redirectUri) throw new AuthorizationRefused(new OAuthError("invalid_request", "redirect_uri is required."), false);
    if (!redirectUriMatches(client.redirect_uris, req.redirectUri, client.any_loopback)) {
      throw new AuthorizationRefused(new OAuthError("invalid_request", `${req.redirectUri} is not a redirect URI registered for ${client.name}.`), false);
    }
    // From here on the client hears about it, at its own redirect URI.
    try {
      if (req.responseType !== "code") throw new OAuthError("unsupported_response_type", "Only response_type=code is supported.");
      checkChallenge(req.codeChallenge, req.codeChallengeMethod);
      const scopes = requestedScopes(req.scope, ALL_SCOPES, client.scopes);
      const audience = audienceOf(req.resources, list(deps.resources()));
      const session = sessionToken ? await deps.sessions?.resolve(sessionToken) : undefined;
      const consented = session ? consentCovers(await deps.store.consent(session.user_id, client.client_id), scopes) : false;
      return { client, redirectUri: req.redirectUri, scopes, audience, userId: session?.user_id, username: session?.user.username, consented };
    } catch (err) {
      if (err instanceof OAuthError) throw new AuthorizationRefused(err, true);
      throw err;
    }
  }

  /** The client a token request comes from, authenticated when it is confidential. */
  async function authenticateClient(req: TokenRequest): Promise<ClientRow> {
    if (!req.clientId) throw new OAuthError("invalid_client", "client_id is required (in the body for a public client, or HTTP Basic authentication).");
    const client = await deps.store.client(req.clientId);
    if (!client) throw new OAuthError("invalid_client", "Unknown client.");
    if (client.secret_hash && (!req.clientSecret || hashSecret(req.clientSecret) !== client.secret_hash)) {
      throw new OAuthError("invalid_client", "The client's credentials are missing or wrong.");
    }
    return client;
  }

  /** A new access token and refresh token of a grant, inside the unit of work. */
  async function issue(s: OAuthStore, grant: GrantRow, scopes: string[], at: Date): Promise<TokenResponse> {
    const accessToken = newAccessToken();
    const refreshToken = newRefreshToken();
    await s.insertAccessToken({
      tokenHash: hashSecret(accessToken), userId: grant.user_id, scopes, clientId: grant.client_id,
      expiresAt: new Date(at.getTime() + ACCESS_TOKEN_TTL_SECONDS * 1000), audience: grant.audience, grantId: grant.id,
    });
    await s.insertRefreshToken({ tokenHash: hashSecret(refreshToken), grantId: grant.id, expiresAt: new Date(at.getTime() + REFRESH_TOKEN_TTL_SECONDS * 1000) });
    return { access_token: accessToken, token_type: "Bearer", expires_in: ACCESS_TOKEN_TTL_SECONDS, refresh_token: refreshToken, scope: scopes.join(" ") };
  }

  type Outcome = { tokens: TokenResponse; revoked: string[] } | { error: OAuthError; revoked: string[] };

  async function exchangeCode(client: ClientRow, req: TokenRequest): Promise<Outcome> {
    if (!req.code) throw new OAuthError("invalid_request", "code is required.");
    if (!req.codeVerifier) throw new OAuthError("invalid_request", "code_verifier is required (PKCE).");
    const at = now();
    const codeHash = hashSecret(req.code);
    return deps.uow(async (s): Promise<Outcome> => {
      const row = await s.takeCode(codeHash);
      if (!row) {
        const used = await s.code(codeHash);
        // A code presented again: whatever it issued is revoked (RFC 6749 4.1.2, RFC 9700 4.5).
        const revoked = used?.grant_id ? await s.revokeGrants([used.grant_id], "authorization code reused") : [];
        return { error: new OAuthError("invalid_grant", "The authorization code is invalid, expired or already used."), revoked };
      }
      const refuse = (description: string): Outcome => ({ error: new OAuthError("invalid_grant", description), revoked: [] });
      if (row.expires_at.getTime() <= at.getTime()) return refuse("The authorization code is invalid, expired or already used.");
      if (row.client_id !== client.client_id) return refuse("The authorization code was issued to another client.");
      if (row.redirect_uri !== req.redirectUri) return refuse("redirect_uri differs from the one of the authorization request.");
      if (!verifierMatches(req.codeVerifier!, row.code_challenge)) return refuse("code_verifier does not match the code_challenge.");
      if (req.resources.length && audienceOf(req.resources, list(deps.resources())) !== row.audience) {
        return { error: new OAuthError("invalid_target", "resource differs from the one of the authorization request."), revoked: [] };
      }
      const grant = await s.insertGrant({ userId: row.user_id, clientId: client.client_id, scopes: row.scopes, audience: row.audience });
      await s.setCodeGrant(codeHash, grant.id);
      return { tokens: await issue(s, grant, row.scopes, at), revoked: [] };
    });
  }

  async function refresh(client: ClientRow, req: TokenRequest): Promise<Outcome> {
    if (!req.refreshToken) throw new OAuthError("invalid_request", "refresh_token is required.");
    const at = now();
    const tokenHash = hashSecret(req.refreshToken);
    return deps.uow(async (s): Promise<Outcome> => {
      const invalid: Outcome = { error: new OAuthError("invalid_grant", "The refresh token is invalid, expired or revoked."), revoked: [] };
      const row = await s.refreshToken(tokenHash);
      if (!row) return invalid;
      const grant = await s.grant(row.grant_id);
      if (!grant || grant.client_id !== client.client_id) return invalid;
      if (grant.revoked_at) return invalid;
      // Rotation: a refresh token is good once. Presented again (by a thief or by the client
      // whose token was stolen), the whole family is revoked (RFC 9700 4.14.2).
      const reused = async (): Promise<Outcome> => ({
        error: new OAuthError("invalid_grant", "The refresh token was already used; every token of this grant is revoked."),
        revoked: await s.revokeGrants([grant.id], "refresh token reused"),
      });
      if (row.used_at) return reused();
      if (row.expires_at.getTime() <= at.getTime()) return invalid;
      // The request is checked before the token is used up: a refused refresh (a scope or
      // resource the grant does not cover) leaves it good, so that the client's corrected retry
      // is not taken for a replay that revokes the family.
      const scopes = narrowedScopes(req.scope, grant.scopes);
      if (req.resources.length && audienceOf(req.resources, list(deps.resources())) !== grant.audience) {
        return { error: new OAuthError("invalid_target", "resource differs from the grant's."), revoked: [] };
      }
      // Used up by a concurrent request since it was read: a replay all the same.
      if (!(await s.takeRefreshToken(tokenHash))) return reused();
      return { tokens: await issue(s, grant, scopes, at), revoked: [] };
    });
  }

  return {
    /** Validates an authorization request (and tells whether the signed-in user consented before). */
    checkAuthorization: check,

    /** The signed-in user allows the request: consent remembered, a code issued (single use, 60 s). */
    async issueCode(req: AuthorizationRequest, sessionToken: string): Promise<{ code: string; checked: CheckedAuthorization }> {
      const checked = await check(req, sessionToken);
      if (!checked.userId) throw new AuthorizationRefused(new OAuthError("access_denied", "Nobody is signed in."), true);
      const code = newAuthorizationCode();
      const at = now();
      await deps.uow(async (s) => {
        await s.purgeCodes(new Date(at.getTime() - 24 * 3600_000));
        await s.addConsent(checked.userId!, checked.client.client_id, checked.scopes);
        await s.insertCode({
          code_hash: hashSecret(code), client_id: checked.client.client_id, user_id: checked.userId!, redirect_uri: checked.redirectUri,
          code_challenge: req.codeChallenge, scopes: checked.scopes, audience: checked.audience,
          expires_at: new Date(at.getTime() + AUTHORIZATION_CODE_TTL_SECONDS * 1000),
        });
      });
      return { code, checked };
    },

    /** The token endpoint's work: tokens, or the OAuthError to answer. */
    async token(req: TokenRequest): Promise<TokenResponse> {
      const client = await authenticateClient(req);
      let outcome: Outcome;
      if (req.grantType === "authorization_code") outcome = await exchangeCode(client, req);
      else if (req.grantType === "refresh_token") outcome = await refresh(client, req);
      else throw new OAuthError(req.grantType ? "unsupported_grant_type" : "invalid_request", req.grantType ? `grant_type ${req.grantType} is not supported; use authorization_code or refresh_token.` : "grant_type is required.");
      announce(outcome.revoked);
      if ("error" in outcome) throw outcome.error;
      return outcome.tokens;
    },

    /** Registers a client (admin CLI, or RFC 7591 dynamic registration of public clients). */
    async registerClient(reg: ClientRegistration): Promise<{ client: ClientRow; secret?: string }> {
      const name = reg.name.trim();
      if (!name || name.length > 100) throw new OAuthError("invalid_client_metadata", "client_name must be 1 to 100 characters.");
      if (!reg.redirectUris.length || reg.redirectUris.length > 10) throw new OAuthError("invalid_redirect_uri", "Register 1 to 10 redirect URIs.");
      for (const uri of reg.redirectUris) {
        const problem = redirectUriProblem(uri);
        if (problem) throw new OAuthError("invalid_redirect_uri", problem);
      }
      const scopes = reg.scope === undefined || reg.scope.trim() === "" ? null : (() => {
        try { return requestedScopes(reg.scope, ALL_SCOPES, null); } catch (err) { throw new OAuthError("invalid_client_metadata", (err as Error).message.replace(/^invalid_scope: /, "")); }
      })();
      const secret = reg.confidential ? newClientSecret() : undefined;
      const client = await deps.store.insertClient({
        client_id: newClientId(), name, redirect_uris: [...new Set(reg.redirectUris)], secret_hash: secret ? hashSecret(secret) : null,
        any_loopback: false, scopes, registered_by: reg.registeredBy,
      });
      return { client, secret };
    },

    /**
     * mcp.revoke_session: ends the user's MCP sessions, in one unit of work. Every live grant
     * whose tokens are bound to the MCP endpoint or were issued to the bundled MCP client, with
     * its access and refresh tokens; then the tokens issued to MCP clients outside grants, and
     * the calling token. How many grants and tokens were revoked (each announced).
     */
    async revokeMcpSession(userId: string, currentTokenId: string): Promise<{ revoked: number }> {
      const out = await deps.uow(async (s) => {
        const ids = await s.liveGrantsOf(userId, { audiences: [deps.resources().mcp], clientIds: [MCP_CLIENT_ID] });
        const ofGrants = await s.revokeGrants(ids, "mcp.revoke_session");
        const others = await s.revokeMcpTokens(userId, currentTokenId);
        return { revoked: ids.length + others.length, hashes: [...ofGrants, ...others] };
      });
      announce(out.hashes);
      return { revoked: out.revoked };
    },
  };
}

export type OAuth = ReturnType<typeof createOAuth>;
