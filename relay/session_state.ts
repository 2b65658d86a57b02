/**
 * A session's listed state: how its events move it, how it is shown, and
 * the one check of whether it ended.
 *
 * @module
 */
import type { ModelRef, SessionEventBody, SessionInfo, SessionStatus } from "../shared/protocol.ts";
import { sessionEnded } from "./errors.ts";
import type { SessionPatch, SessionRecord } from "./store/mod.ts";

/** Whether a session with this status is over (ended, or failed). */
export function isEnded(status: SessionStatus): boolean {
  return status === "ended" || status === "error";
}

/** Throws 409 `session_ended` for a session that is over. */
export function assertNotEnded(s: { status: SessionStatus }): void {
  if (isEnded(s.status)) throw sessionEnded();
}

/** A session as clients see it: without owner and prompt, with the relay's last seq. */
export function sessionInfo(s: SessionRecord, lastSeq: number): SessionInfo {
  const { userId: _u, prompt: _p, eventBytes: _b, ...info } = s;
  return { ...info, lastSeq };
}

/** The event types that move a session's status or title. */
export const STATEFUL_EVENTS: ReadonlySet<string> = new Set([
  "session_start",
  "session_end",
  "session_sleep",
  "session_waking",
  "agent_start",
  "agent_end",
  "message_start",
]);

/** How an event moves the session's listed state; `at` (ISO) dates an end. */
export function statePatch(
  rec: { status: SessionStatus; title: string },
  e: SessionEventBody,
  at: string,
): SessionPatch {
  switch (e.type) {
    case "session_start": {
      // A session the relay already ended (say, it started too late) stays ended.
      if (isEnded(rec.status)) return {};
      // A worker that just started has no turn in flight, whatever the last
      // one did (a runner that crashed mid-turn never sent its agent_end).
      const patch: SessionPatch = { status: "running", activity: "idle" };
      if (typeof e.cwd === "string") patch.cwd = e.cwd;
      if (isModelRef(e.model)) patch.model = { provider: e.model.provider, id: e.model.id };
      return patch;
    }
    case "agent_start":
      return { activity: "working" };
    case "agent_end":
      return { activity: "idle" };
    case "session_sleep":
    case "session_waking":
      if (isEnded(rec.status)) return {};
      return { activity: e.type === "session_sleep" ? "asleep" : "waking" };
    case "message_start": {
      const m = e.message as { role?: string; content?: unknown } | undefined;
      if (rec.title || m?.role !== "user") return {};
      const title = titleFrom(textOf(m.content));
      return title ? { title } : {};
    }
    case "session_end": {
      const failed = e.reason === "crashed" || e.reason === "error" || e.reason === "lost";
      return {
        status: failed ? "error" : "ended",
        activity: "idle",
        endedAt: at,
        endReason: typeof e.message === "string" ? e.message : String(e.reason ?? "ended"),
      };
    }
  }
  return {};
}

export function isModelRef(v: unknown): v is ModelRef {
  return typeof v === "object" && v !== null &&
    typeof (v as ModelRef).provider === "string" && typeof (v as ModelRef).id === "string";
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((c) => (c && typeof c.text === "string" ? c.text : "")).join(" ");
  }
  return "";
}

/** A one-line title from a prompt. */
export function titleFrom(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 80 ? line.slice(0, 79) + "…" : line;
}
