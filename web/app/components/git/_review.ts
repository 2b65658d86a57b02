/**
 * Review comments being written on a session's diffs, kept per session
 * while the person moves between files, until they are sent.
 *
 * @module
 */
import { type Signal, signal } from "@preact/signals";
import type { ReviewComment } from "../../../../shared/git_api.ts";

const drafts = new Map<string, Signal<ReviewComment[]>>();

/** The comments not yet sent on a session's diffs. */
export function reviewOf(sessionId: string): Signal<ReviewComment[]> {
  let s = drafts.get(sessionId);
  if (!s) drafts.set(sessionId, s = signal([]));
  return s;
}

/** A line range being commented on, in one file and on one side. */
export interface Selection {
  side: "new" | "old";
  start: number;
  end: number;
}
