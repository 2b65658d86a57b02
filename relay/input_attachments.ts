/**
 * Attachments named by an input (HTTP or viewer socket): checked against the
 * session before anything reaches the runner, and described to it so it can
 * fetch the bytes itself.
 *
 * @module
 */
import { type AttachmentRef, MAX_INPUT_ATTACHMENTS } from "../shared/attachments_api.ts";
import type { InputKind } from "../shared/protocol.ts";
import { type Clock, isoNow } from "./_clock.ts";
import { invalid, notFound } from "./errors.ts";
import type { AsyncStore, AttachmentRecord, SessionRecord } from "./store/mod.ts";

/** What an input may carry besides its kind and text. */
export interface InputOptions {
  /** Ids of attachments uploaded into the same session. */
  attachments?: string[];
}

/** The kinds of input that take attachments: those that give the agent a message. */
const WITH_ATTACHMENTS: readonly InputKind[] = ["prompt", "steer", "followUp"];

/** A viewer message's `attachments` as ids, or null when it is not a short list of strings. */
export function inputAttachments(value: unknown): string[] | null {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > MAX_INPUT_ATTACHMENTS) return null;
  if (!value.every((v) => typeof v === "string" && v.length <= 100)) return null;
  return value as string[];
}

/**
 * The attachments `ids` name, each one of session `s`'s and unexpired (else
 * 404 `not_found`, alike for unknown, foreign and expired ones), in order,
 * without repeats.
 */
export async function attachmentRefs(
  store: Pick<AsyncStore, "attachments">,
  s: SessionRecord,
  kind: InputKind,
  ids: string[],
  clock: Clock,
): Promise<AttachmentRef[]> {
  if (ids.length === 0) return [];
  if (!WITH_ATTACHMENTS.includes(kind)) {
    throw invalid(`Attachments go with a prompt, steer or followUp, not with '${kind}'`);
  }
  return await refs(
    store,
    ids,
    clock,
    (a) => a.userId === s.userId && a.sessionId === s.sessionId,
  );
}

/** The attachments `ids` name, in order and without repeats, each passing `mine` (else 404). */
async function refs(
  store: Pick<AsyncStore, "attachments">,
  ids: string[],
  clock: Clock,
  mine: (a: AttachmentRecord) => boolean,
): Promise<AttachmentRef[]> {
  const now = isoNow(clock);
  const out: AttachmentRef[] = [];
  for (const id of new Set(ids)) {
    const a = await store.attachments.get(id, now);
    if (!a || !mine(a)) throw notFound("Attachment");
    out.push({
      attachmentId: a.attachmentId,
      filename: a.filename,
      mimeType: a.mimeType,
      size: a.size,
    });
  }
  return out;
}

/**
 * The attachments a spawn names for its first prompt: the caller's, unexpired,
 * of sessions on the runner it spawns on (whose token may fetch them); else
 * 404 `not_found`, alike for every reason.
 */
export function spawnAttachmentRefs(
  store: Pick<AsyncStore, "attachments">,
  userId: string,
  runnerId: string,
  ids: string[],
  clock: Clock,
): Promise<AttachmentRef[]> {
  return refs(store, ids, clock, (a) => a.userId === userId && a.runnerId === runnerId);
}
