/** Inline text notes: add, update, get, delete. */
import { AppError, emitCollectionUpdated, type Caller } from "@cms/platform";
import type { MediaRow } from "../domain/media-row.js";
import { checkName, textNoteColumns, textNoteMode, textNoteThumbnail, TEXT_NOTE_URL } from "../domain/rules.js";
import type { MediaPatch } from "../store/media-store.js";
import type { MediaAccess } from "./access.js";
import type { MediaDeps } from "./ports.js";
import { removeRows, type StoredFiles } from "./stored-files.js";

/** A media.text_note.add request (update takes the same fields but the collection). */
export interface AddNoteInput {
  collectionId: number; name?: string; text?: string; displayMode?: string; viewer?: string; placeholderKind?: string; thumbnailUrl?: string; description?: string;
}

/** What media.text_note.delete did: with dryRun, nothing (row is the note it would delete). */
export interface NoteDeleteOutcome { dryRun: boolean; row: MediaRow }

/** The text-note use cases. */
export function createTextNotes({ unitOfWork }: Pick<MediaDeps, "unitOfWork">, { access, files }: { access: MediaAccess; files: StoredFiles }) {
  async function noteFor(caller: Caller, id: number, action: "read" | "edit" | "delete") {
    const found = await access.mediaFor(caller, id, action);
    if (found.row.main_url !== TEXT_NOTE_URL) throw new AppError("invalid_request", `Media ${id} is not a text note.`, { field: "media_id" });
    return found;
  }

  async function addTextNote(caller: Caller, input: AddNoteInput): Promise<MediaRow> {
    checkName(input.name);
    const { ownerUserId } = await access.authorize(caller, input.collectionId, "upload");
    const mode = textNoteMode(input.displayMode, input.viewer) ?? { displayMode: "plain", viewer: "text" };
    const thumb = textNoteThumbnail(input.thumbnailUrl, input.placeholderKind);
    const text = input.text ?? "";
    return files.insertRow({
      collection_id: input.collectionId,
      owner_user_id: ownerUserId,
      created_by: caller.userId,
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
  }

  async function updateTextNote(caller: Caller, id: number, input: Omit<AddNoteInput, "collectionId">): Promise<MediaRow> {
    checkName(input.name);
    const { row: cur } = await noteFor(caller, id, "edit");
    const patch: MediaPatch = {};
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
      patch.thumbnail_source = null;
      patch.placeholder_kind = t.placeholderKind;
    }
    if (!Object.keys(patch).length) return cur;
    return files.updateRow(cur, patch, (events) => emitCollectionUpdated(events, { collectionId: Number(cur.collection_id), kind: "media_updated" }));
  }

  async function getTextNote(caller: Caller, id: number): Promise<MediaRow> {
    return (await noteFor(caller, id, "read")).row;
  }

  async function deleteTextNote(caller: Caller, id: number, input: { confirm: boolean; dryRun: boolean }): Promise<NoteDeleteOutcome> {
    const { row } = await noteFor(caller, id, "delete");
    if (input.dryRun) return { dryRun: true, row };
    if (!input.confirm) throw new AppError("confirmation_required", "Deleting a text note needs confirm=true (or dry_run=true to preview).", { field: "confirm" });
    const collectionId = Number(row.collection_id);
    await unitOfWork(async (unit, events) => {
      const { media } = unit;
      await media.lockCollections([collectionId]);
      // A thumbnail the note stored goes with it.
      await removeRows(unit, events, [id]);
      await media.renumber(collectionId);
      await emitCollectionUpdated(events, { collectionId, kind: "media_removed" });
    });
    return { dryRun: false, row };
  }

  return { addTextNote, updateTextNote, getTextNote, deleteTextNote };
}
