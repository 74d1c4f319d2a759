/**
 * Agents' bug reports, quarantined for human triage: refused whole when any field holds secret
 * material, counted on an open report when they repeat it, listed for administrators.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { AppError, type Caller } from "@cms/platform";
import { duplicateKey, refuseSecrets, serializedRepro, statusesOf } from "../domain/bug-reports.js";
import type { BugReportRow, SocialStore } from "../store/social-store.js";

export interface BugReportInput {
  category: string;
  relatedOp: string;
  title: string;
  expected?: string;
  actual?: string;
  errorCode?: string;
  severity?: string;
  repro?: JsonValue;
  notes?: string;
}

export interface BugReceipt { row: BugReportRow; duplicate: boolean }

export function createBugReports(store: SocialStore) {
  return {
    async report(caller: Caller, input: BugReportInput): Promise<BugReceipt> {
      const repro = serializedRepro(input.repro);
      // Every field is checked before anything is stored.
      refuseSecrets({
        category: input.category, related_op: input.relatedOp, title: input.title, expected: input.expected, actual: input.actual,
        error_code: input.errorCode, severity: input.severity, repro, notes: input.notes,
      });
      if (!input.title.trim()) throw new AppError("invalid_request", "title must not be blank.", { field: "title" });
      return store.recordBugReport({
        reporter_user_id: caller.userId, category: input.category, related_op: input.relatedOp.trim(), title: input.title.trim(),
        expected: input.expected ?? null, actual: input.actual ?? null, error_code: input.errorCode?.trim() || null, severity: input.severity ?? null,
        repro: repro ?? null, notes: input.notes ?? null,
        duplicate_key: duplicateKey({ relatedOp: input.relatedOp, category: input.category, errorCode: input.errorCode, title: input.title }),
      });
    },

    /** Administrators only (the operation says so; checked again here for direct callers). */
    async list(caller: Caller, status: string, limit: number): Promise<BugReportRow[]> {
      if (!caller.isAdmin) throw new AppError("forbidden", "bug.list is for administrators only.");
      return store.bugReports(statusesOf(status), limit);
    },
  };
}

export type BugReports = ReturnType<typeof createBugReports>;
