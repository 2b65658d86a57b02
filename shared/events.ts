import { jsonTooDeep, MAX_EVENT_DEPTH } from "./json.ts";
import type { SessionEventBody } from "./protocol.ts";

/** Largest event body the runner sends; bigger ones are cut down (see {@linkcode capEvent}). */
export const MAX_EVENT_JSON = 1024 * 1024;

/**
 * Turns a pi `AgentSessionEvent` into the body baton stores. pi repeats the
 * whole partial message in every streaming update and the whole conversation
 * in `agent_end`; those copies are dropped so each delta costs bytes, not the
 * message so far. What remains is enough to rebuild the conversation.
 */
export function slimPiEvent(ev: { type: string; [k: string]: unknown }): SessionEventBody {
  switch (ev.type) {
    case "message_update": {
      const ame = { ...(ev.assistantMessageEvent as Record<string, unknown>) };
      if (typeof ame.type === "string" && ame.type.startsWith("toolcall_")) {
        // Keep who is being called (from the partial message) so a viewer can
        // name the tool while its arguments still stream.
        const block = (ame.partial as { content?: unknown[] } | undefined)?.content?.[
          ame.contentIndex as number
        ] as { id?: unknown; name?: unknown } | undefined;
        if (typeof block?.name === "string" && block.name) ame.toolName = block.name;
        if (typeof block?.id === "string" && block.id) ame.toolCallId = block.id;
      }
      delete ame.partial;
      delete ame.message;
      delete ame.error;
      const role = (ev.message as { role?: string } | undefined)?.role;
      return { type: "message_update", role: role ?? "assistant", assistantMessageEvent: ame };
    }
    case "turn_end":
      return { type: "turn_end" };
    case "agent_end":
      return { type: "agent_end" };
    default:
      return ev as SessionEventBody;
  }
}

/**
 * Serialises an event body, replacing one that cannot be sent whole (too big,
 * nested deeper than MAX_EVENT_DEPTH, or not serialisable) by a marker.
 */
export function capEvent(e: SessionEventBody): SessionEventBody {
  let json: string;
  try {
    json = JSON.stringify(e);
  } catch {
    return { type: e.type, unserializable: true };
  }
  // Nested deeper than the relay takes in a message (a tool's arguments can be
  // anything): the relay would refuse the frame, and the runner re-send it forever.
  if (jsonTooDeep(json, MAX_EVENT_DEPTH)) {
    return { type: e.type, truncated: true, tooDeep: true, ...smallFields(e) };
  }
  if (json.length <= MAX_EVENT_JSON) return e;
  return { type: e.type, truncated: true, bytes: json.length, ...smallFields(e) };
}

function smallFields(e: SessionEventBody): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(e)) {
    if (k === "type") continue;
    if (typeof v === "string" && v.length <= 200) out[k] = v;
    else if (typeof v === "number" || typeof v === "boolean") out[k] = v;
  }
  return out;
}

type Delta = { type: string; contentIndex?: number; delta?: string };

/**
 * Whether `next` can be folded into `prev` without losing meaning: two text,
 * thinking or tool-argument deltas of the same content block concatenate;
 * a tool's newer partial output supersedes the older one.
 */
export function canCoalesce(prev: SessionEventBody, next: SessionEventBody): boolean {
  if (prev.type === "message_update" && next.type === "message_update") {
    const a = prev.assistantMessageEvent as Delta | undefined;
    const b = next.assistantMessageEvent as Delta | undefined;
    return !!a && !!b && a.type === b.type && a.contentIndex === b.contentIndex &&
      (a.type === "text_delta" || a.type === "thinking_delta" || a.type === "toolcall_delta") &&
      typeof a.delta === "string" && typeof b.delta === "string";
  }
  return prev.type === "tool_execution_update" && next.type === "tool_execution_update" &&
    prev.toolCallId === next.toolCallId;
}

/** Folds `next` into `prev` (assumes {@linkcode canCoalesce}). */
export function coalesce(prev: SessionEventBody, next: SessionEventBody): SessionEventBody {
  if (prev.type === "message_update") {
    const a = prev.assistantMessageEvent as Delta;
    const b = next.assistantMessageEvent as Delta;
    return { ...prev, assistantMessageEvent: { ...a, delta: (a.delta ?? "") + (b.delta ?? "") } };
  }
  return next;
}
