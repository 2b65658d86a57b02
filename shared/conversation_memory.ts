/**
 * What a resumed agent still remembers of its conversation, and the prompts
 * it lost marked as forgotten. Part of the fold in shared/conversation.ts.
 *
 * @module
 */
import type { Conversation, Item, Mut } from "./conversation_types.ts";

/** What a resumed agent holds (see the worker's `memoryOf`). */
export interface Memory {
  messages: number;
  /** The start of the agent's last user message (null: it has none). */
  lastPrompt: string | null;
  /** That message's whole length. */
  lastPromptLength: number;
}

export function isMemory(v: unknown): v is Memory {
  const m = v as Memory;
  return typeof v === "object" && v !== null && typeof m.messages === "number" &&
    typeof m.lastPromptLength === "number" &&
    (m.lastPrompt === null || typeof m.lastPrompt === "string");
}

/**
 * Marks the prompts shown after the last one the agent remembers as
 * forgotten; returns how many were newly marked. When the agent's last
 * prompt is not on screen (the log and its memory disagree), nothing is.
 */
export function markForgotten(c: Conversation, items: Mut<Item[]>, memory: Memory): number {
  let from = 0;
  if (memory.lastPrompt !== null) {
    const trigger = memory.lastPrompt.match(/<trigger id="([^"]+)"/)?.[1];
    from = -1;
    for (let i = c.items.length - 1; i >= 0 && from < 0; i--) {
      const it = c.items[i]!;
      if (
        (it.kind === "user" && it.text.length === memory.lastPromptLength &&
          it.text.startsWith(memory.lastPrompt)) ||
        (trigger !== undefined && it.kind === "trigger" && it.triggerId === trigger)
      ) from = i + 1;
    }
    if (from < 0) return 0;
  }
  let n = 0;
  for (let i = from; i < c.items.length; i++) {
    const it = c.items[i]!;
    if (it.kind !== "user" || it.forgotten) continue;
    items()[i] = { ...it, forgotten: true };
    n++;
  }
  return n;
}
