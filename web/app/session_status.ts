/**
 * What a session is doing, in the words and the groups the lists show.
 *
 * @module
 */
import type { SessionInfo } from "../../shared/protocol.ts";

/** A group of unpinned sessions in the sidebar. */
export type SessionGroup = "working" | "idle" | "asleep" | "ended";
/** The groups, in the sidebar's order. */
export const GROUPS: SessionGroup[] = ["working", "idle", "asleep", "ended"];

/**
 * What a session is doing, for the sidebar: a session starting or waking up
 * is about to work, so it counts as working; an error is an end.
 */
export function groupOf(s: Pick<SessionInfo, "status" | "activity">): SessionGroup {
  if (s.status === "ended" || s.status === "error") return "ended";
  if (s.status === "starting" || s.activity === "working" || s.activity === "waking") {
    return "working";
  }
  return s.activity === "asleep" ? "asleep" : "idle";
}

/** The live state of a session in one word, for lists and headers. */
export function statusOf(s: Pick<SessionInfo, "status" | "activity">): {
  label: string;
  tone: string;
} {
  if (s.status === "starting") return { label: "starting", tone: "busy" };
  if (s.status === "error") return { label: "error", tone: "error" };
  if (s.status === "ended") return { label: "ended", tone: "off" };
  switch (s.activity) {
    case "working":
      return { label: "working", tone: "busy" };
    case "waking":
      return { label: "waking", tone: "busy" };
    case "asleep":
      return { label: "asleep", tone: "asleep" };
    default:
      return { label: "idle", tone: "ok" };
  }
}
