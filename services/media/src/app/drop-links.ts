/**
 * Drop links (media.drop_link): a page on the API origin a person opens in a browser to drop
 * files into one collection. The link carries a signed "drop" grant naming the collection and
 * the user who minted it; it expires (default one hour) and is good for nothing else. The
 * gateway serves the page and streams the files to the store; this side checks the grant and
 * the user's upload permission (again, on every use) and makes each stored file a media item.
 */
import { AppError, isStoreKey, signGrant, verifyGrant, type Caller, type Grant } from "@cms/platform";
import { MAX_PUT_BYTES } from "@cms/platform/upload-urls";
import type { MediaRow } from "../domain/media-row.js";
import { itemName } from "../domain/rules.js";
import { callerOfUser, type MediaAccess } from "./access.js";
import type { Ingest } from "./ingest.js";
import type { MediaDeps } from "./ports.js";
import type { StoredFiles } from "./stored-files.js";

/** Path of a drop link's page on the API origin (the gateway serves it). */
export const DROP_PREFIX = "/drop/";
/** Lifetime of a drop link when none is asked for. */
export const DROP_LINK_DEFAULT_SECONDS = 3600;
/** A file whose upload began before the link expired may still finish within this time. */
const IN_FLIGHT_GRACE_MS = 10 * 60_000;

/** The signed grant a drop link carries. */
export interface DropGrant extends Grant { purpose: "drop"; collection_id: number; user_id: string }

/** A drop link and its limits. */
export interface DropLink { url: string; collectionId: number; expiresAt: Date; expiresInSeconds: number; maxBytes: number; hint: string }

/** Where the files dropped through a valid link go. */
export interface DropTarget { collectionId: number; keyPrefix: string; expiresAt: Date; maxBytes: number }

function keyPrefix(grant: DropGrant): string {
  return `store://${grant.user_id}/${grant.collection_id}/`;
}

/** The drop-link use cases: minting a link, checking its grant, adopting what was dropped. */
export function createDropLinks(
  { config }: Pick<MediaDeps, "config">,
  { access, ingest, files }: { access: MediaAccess; ingest: Ingest; files: StoredFiles },
) {
  async function createDropLink(caller: Caller, collectionId: number, expiresInSeconds: number | undefined): Promise<DropLink> {
    await access.authorize(caller, collectionId, "upload");
    const seconds = expiresInSeconds ?? DROP_LINK_DEFAULT_SECONDS;
    const expiresAt = new Date(Date.now() + seconds * 1000);
    const grant: DropGrant = { purpose: "drop", exp: expiresAt.getTime(), collection_id: collectionId, user_id: caller.userId };
    const token = signGrant(config.grantSecret!, grant);
    return {
      url: `${config.baseUrl}${DROP_PREFIX}${token}`,
      collectionId,
      expiresAt,
      expiresInSeconds: seconds,
      maxBytes: MAX_PUT_BYTES,
      hint: "Open the url in a browser and drop or pick files; each becomes a media item of the collection. The link works only for this collection and expires at expires_at.",
    };
  }

  /** CheckDropGrant: the grant verifies and its user may still upload into the collection. */
  async function checkDropGrant(token: string): Promise<DropTarget> {
    const grant = verifyGrant<DropGrant>(config.grantSecret!, token, "drop");
    await access.authorize(callerOfUser(grant.user_id), grant.collection_id, "upload");
    return { collectionId: grant.collection_id, keyPrefix: keyPrefix(grant), expiresAt: new Date(grant.exp), maxBytes: MAX_PUT_BYTES };
  }

  /** AdoptDroppedFile: the gateway stored a dropped file under the grant's key prefix. */
  async function adoptDroppedFile(input: { grant: string; storeKey: string; filename?: string; sha256?: string }): Promise<MediaRow> {
    let grant: DropGrant;
    try {
      grant = verifyGrant<DropGrant>(config.grantSecret!, input.grant, "drop", Date.now() - IN_FLIGHT_GRACE_MS);
    } catch (err) {
      await ingest.removeObjects([input.storeKey]);
      throw err;
    }
    if (!isStoreKey(input.storeKey) || !input.storeKey.startsWith(keyPrefix(grant)) || input.storeKey.slice(keyPrefix(grant).length).includes("/")) {
      throw new AppError("forbidden", "The dropped file's key is outside the drop link's collection.");
    }
    const caller = callerOfUser(grant.user_id);
    try {
      const { ownerUserId } = await access.authorize(caller, grant.collection_id, "upload");
      const row = await files.createItemFromStored(caller, ownerUserId, grant.collection_id, input.storeKey, {
        name: itemName(undefined, input.filename), description: null, tags: [], sha256: input.sha256 ?? null,
      });
      return row;
    } catch (err) {
      await ingest.removeObjects([input.storeKey]);
      throw err;
    }
  }

  return { createDropLink, checkDropGrant, adoptDroppedFile };
}
