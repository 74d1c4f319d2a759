/** Inline text notes: add, update, get, delete. */
import { AppError, type Caller } from "@cms/platform";
import type { MediaRow } from "../domain/media-json.js";
import { checkName, textNoteColumns, textNoteMode, textNoteThumbnail, TEXT_NOTE_URL } from "../domain/rules.js";
import { lockCollection, renumber } from "../store/media-store.js";
import { authorize, emitUpdated, mediaFor, orphanObjects, type Deps } from "./deps.js";
import { insertRow } from "./catalogue.js";

export interface AddNoteInput {
  collectionId: number; name?: string; text?: string; displayMode?: string; viewer?: string; placeholderKind?: string; thumbnailUrl?: string; description?: string;
}

export async function addTextNote(deps: Deps, caller: Caller, input: AddNoteInput): Promise<MediaRow> {
  checkName(input.name);
  const access = await authorize(deps, caller, input.collectionId, "upload");
  const mode = textNoteMode(input.displayMode, input.viewer) ?? { displayMode: "plain", viewer: "text" };
  const thumb = textNoteThumbnail(input.thumbnailUrl, input.placeholderKind);
  const text = input.text ?? "";
  const row = await insertRow(deps, input.collectionId, access.ownerUserId, caller.userId, {
    name: input.name ?? null,
    description: input.description ?? null,
    tags: [],
    main_url: TEXT_NOTE_URL,
    ...textNoteColumns(mode),
    size_bytes: Buffer.byteLength(text),
    text_note: text,
    placeholder_kind: thumb.placeholderKind,
    thumbnail_url: thumb.thumbnailUrl,
  });
  return row;
}

async function noteFor(deps: Deps, caller: Caller, id: number, action: "read" | "edit" | "delete") {
  const found = await mediaFor(deps, caller, id, action);
  if (found.row.main_url !== TEXT_NOTE_URL) throw new AppError("invalid_request", `Media ${id} is not a text note.`, { field: "media_id" });
  return found;
}

export async function updateTextNote(deps: Deps, caller: Caller, id: number, input: Omit<AddNoteInput, "collectionId">): Promise<MediaRow> {
  checkName(input.name);
  const { row: cur } = await noteFor(deps, caller, id, "edit");
  const patch: Partial<MediaRow> & Record<string, unknown> = {};
  if (input.text !== undefined) { patch.text_note = input.text; patch.size_bytes = Buffer.byteLength(input.text); }
  if (input.name !== undefined) patch.name = input.name;
  if (input.description !== undefined) patch.description = input.description;
  // Omitting both display_mode and viewer keeps the type.
  const mode = textNoteMode(input.displayMode, input.viewer);
  if (mode) Object.assign(patch, textNoteColumns(mode));
  // Omitting both thumbnail_url and placeholder_kind keeps the thumbnail.
  if (input.thumbnailUrl !== undefined || input.placeholderKind !== undefined) {
    const t = textNoteThumbnail(input.thumbnailUrl, input.placeholderKind);
    patch.thumbnail_url = t.thumbnailUrl;
    patch.placeholder_kind = t.placeholderKind;
  }
  const row = await deps.db.transaction(async (trx) => {
    if (!Object.keys(patch).length) return cur;
    patch.updated_at = new Date();
    const [r] = await trx("media").where({ id }).update(patch).returning("*");
    if (patch.thumbnail_url !== undefined && cur.thumbnail_url) await orphanObjects(deps, trx, [cur.thumbnail_url]);
    await emitUpdated(deps, trx, Number(cur.collection_id), "media_updated");
    return r as MediaRow;
  });
  deps.ctx.bus.flush();
  return row;
}

export async function getTextNote(deps: Deps, caller: Caller, id: number): Promise<MediaRow> {
  const { row } = await noteFor(deps, caller, id, "read");
  return row;
}

/** What media.text_note.delete did: with dryRun, nothing (row is the note it would delete). */
export interface NoteDeleteOutcome { dryRun: boolean; row: MediaRow }

export async function deleteTextNote(deps: Deps, caller: Caller, id: number, input: { confirm: boolean; dryRun: boolean }): Promise<NoteDeleteOutcome> {
  const { row } = await noteFor(deps, caller, id, "delete");
  if (input.dryRun) return { dryRun: true, row };
  if (!input.confirm) throw new AppError("confirmation_required", "Deleting a text note needs confirm=true (or dry_run=true to preview).", { field: "confirm" });
  await deps.db.transaction(async (trx) => {
    await lockCollection(trx, Number(row.collection_id));
    await trx("media").where({ id }).delete();
    await renumber(trx, Number(row.collection_id));
    await emitUpdated(deps, trx, Number(row.collection_id), "media_removed");
  });
  deps.ctx.bus.flush();
  return { dryRun: false, row };
}
