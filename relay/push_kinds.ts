/**
 * The notification kinds: which ones a subscription wants (`enabledEvents`),
 * how each is delivered (RFC 8030's TTL, Urgency and Topic), and the
 * payload a service worker receives for one (the spec's texts).
 * push.ts decides when to send them.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { PUSH_KINDS, type PushKind, type PushPayload } from "../shared/push_api.ts";
import type { PushDelivery } from "./push_sender.ts";

/** Longest notification text (characters); the payload must stay under ~4 KB encrypted. */
const MAX_BODY = 300;

/** How each kind is delivered (RFC 8030). */
export const DELIVERY: Record<PushKind, Omit<PushDelivery, "topic">> = {
  agent_finished: { ttl: 24 * 3600, urgency: "normal" },
  agent_needs_input: { ttl: 24 * 3600, urgency: "high" },
  agent_error: { ttl: 24 * 3600, urgency: "high" },
};

/** What a subscription's `enabledEvents` lets through. */
export function kindEnabled(enabledEvents: string, kind: PushKind): boolean {
  return enabledEvents.split(",").some((k) => k.trim() === "*" || k.trim() === kind);
}

/**
 * The normalised `enabledEvents` of a request (trimmed, deduplicated; `*`
 * alone when it names every kind), or an Error naming an unknown kind.
 */
export function parseEnabledEvents(text: string): string | Error {
  const names = [...new Set(text.split(",").map((s) => s.trim()).filter(Boolean))];
  if (names.length === 0) return new Error("enabledEvents names no kind (use '*' for all)");
  if (names.includes("*")) return "*";
  const unknown = names.find((n) => !(PUSH_KINDS as readonly string[]).includes(n));
  if (unknown !== undefined) {
    return new Error(
      `Unknown kind in enabledEvents: '${unknown.slice(0, 60)}' (expected ${
        PUSH_KINDS.join(", ")
      } or *)`,
    );
  }
  return names.join(",");
}

/** The Topic of a session's messages: 32 base64url characters from its id. */
export function topicOf(sessionId: string): string {
  return createHash("sha256").update(sessionId).digest("base64url").slice(0, 32);
}

/** One notification, as push.ts queues it. */
export interface Notification {
  sessionId: string;
  kind: PushKind;
  /** The error, or the question asked. */
  detail: string;
  ts: number;
  /** `agent_needs_input`: the waiting tool call and the notification's buttons. */
  input?: { toolCallId: string; actions: PushPayload["actions"] };
  /** `agent_needs_input`: the withdrawal of the question `input.toolCallId`. */
  resolved?: "answered" | "cancelled";
}

/** The payload of notification `n` about a session titled `title` (or untitled). */
export function payloadOf(n: Notification, title: string | null): PushPayload {
  const { sessionId, kind, detail, input, resolved } = n;
  const name = title ? `"${title}"` : `session ${sessionId.slice(0, 8)}`;
  const cut = (s: string) => (s.length > MAX_BODY ? s.slice(0, MAX_BODY - 1) + "…" : s);
  const body = kind === "agent_finished"
    ? `agent in ${name} finished its task`
    : kind === "agent_error"
    ? `error in ${name}: ${detail}`
    : resolved === "answered"
    ? `agent in ${name}: the question was answered`
    : resolved === "cancelled"
    ? `agent in ${name} no longer waits for an answer`
    : `agent in ${name} asks: ${detail}`;
  return {
    kind,
    sessionId,
    title: cut(title ? `baton: ${title}` : "baton"),
    body: cut(body),
    url: `/session/${sessionId}`,
    tag: `session-${sessionId}`,
    ts: n.ts,
    ...(input ? { toolCallId: input.toolCallId } : {}),
    ...(resolved ? { resolved } : {}),
    ...(input?.actions?.length ? { actions: input.actions } : {}),
  };
}
