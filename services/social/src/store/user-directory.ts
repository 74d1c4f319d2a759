/**
 * Users and their primary usernames belong to the auth service; social asks it over Connect
 * (never its tables).
 */
import type { Client } from "@connectrpc/connect";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { fromConnectError } from "@cms/platform";

export interface DirectoryUser {
  userId: string;
  username: string;
  plan: string;
}

export interface UserDirectory {
  byId(userId: string): Promise<DirectoryUser | undefined>;
  byIds(userIds: string[]): Promise<Map<string, DirectoryUser>>;
  byUsername(username: string): Promise<DirectoryUser | undefined>;
}

/**
 * `authClient` is called on first use, not at construction: in the all-in-one process the
 * in-memory transport is built from the routes registered when the first client is created,
 * so asking for a client during init() would leave out the modules initialised later.
 */
export function createUserDirectory(authClient: () => Client<typeof AuthService>): UserDirectory {
  async function getUsers(userIds: string[], usernames: string[]): Promise<DirectoryUser[]> {
    if (!userIds.length && !usernames.length) return [];
    try {
      const res = await authClient().getUsers({ userIds, usernames });
      return res.users.map((u) => ({ userId: u.userId, username: u.username, plan: u.plan }));
    } catch (err) {
      throw fromConnectError(err);
    }
  }
  return {
    async byId(userId) {
      return (await getUsers([userId], []))[0];
    },
    async byIds(userIds) {
      const unique = [...new Set(userIds)];
      const out = new Map<string, DirectoryUser>();
      // GetUsers takes at most 500 ids per call.
      for (let i = 0; i < unique.length; i += 500) {
        for (const u of await getUsers(unique.slice(i, i + 500), [])) out.set(u.userId, u);
      }
      return out;
    },
    async byUsername(username) {
      return (await getUsers([], [username])).find((u) => u.username === username);
    },
  };
}
