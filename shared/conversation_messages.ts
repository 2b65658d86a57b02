/**
 * How the agent's messages move a conversation: a prompt, an answer
 * streaming block by block, its end with usage; and what a lost turn leaves
 * open. Part of the fold in shared/conversation.ts.
 *
 * @module
 */
import type { SessionEvent, SessionEventBody } from "./protocol.ts";
import type { Block, Conversation, Item, Mut, ToolRun } from "./conversation_types.ts";

export function messageStart(
  c: Conversation,
  ev: SessionEvent,
  e: SessionEventBody,
  items: Mut<Item[]>,
): void {
  const m = e.message as { role?: string; content?: unknown; model?: string } | undefined;
  if (m?.role === "user") {
    const { text, images } = userContent(m.content);
    // A trigger's message is already shown as its trigger card.
    const id = text.match(/<trigger id="([^"]+)"/)?.[1];
    if (id && c.items.some((i) => i.kind === "trigger" && i.triggerId === id)) return;
    items().push({ kind: "user", key: `u${ev.seq}`, text, images, forgotten: false });
  } else if (m?.role === "assistant") {
    finishStreaming(c, items);
    items().push({
      kind: "assistant",
      key: `a${ev.seq}`,
      blocks: [],
      streaming: true,
      interrupted: false,
      stopReason: null,
      error: null,
      model: typeof m.model === "string" ? m.model : null,
    });
  }
}

export function messageUpdate(c: Conversation, e: SessionEventBody, items: Mut<Item[]>): void {
  const ame = e.assistantMessageEvent as
    | {
      type: string;
      contentIndex?: number;
      delta?: string;
      content?: string;
      toolCall?: ToolCallLike;
      toolName?: string;
      toolCallId?: string;
    }
    | undefined;
  if (!ame) return;
  const at = lastStreaming(c);
  if (at < 0) return;
  const cur = c.items[at] as Extract<Item, { kind: "assistant" }>;
  const blocks = [...cur.blocks];
  const i = ame.contentIndex ?? blocks.length;
  const block = blocks[i];
  switch (ame.type) {
    case "text_start":
      blocks[i] = { type: "text", text: "" };
      break;
    case "text_delta":
      blocks[i] = {
        type: "text",
        text: (block?.type === "text" ? block.text : "") + (ame.delta ?? ""),
      };
      break;
    case "text_end":
      blocks[i] = { type: "text", text: ame.content ?? (block?.type === "text" ? block.text : "") };
      break;
    case "thinking_start":
      blocks[i] = { type: "thinking", text: "" };
      break;
    case "thinking_delta":
      blocks[i] = {
        type: "thinking",
        text: (block?.type === "thinking" ? block.text : "") + (ame.delta ?? ""),
      };
      break;
    case "thinking_end":
      blocks[i] = {
        type: "thinking",
        text: ame.content ?? (block?.type === "thinking" ? block.text : ""),
      };
      break;
    case "toolcall_start":
      blocks[i] = {
        type: "toolCall",
        id: ame.toolCallId ?? "",
        name: ame.toolName ?? "",
        args: {},
        argsText: "",
      };
      break;
    case "toolcall_delta": {
      const prev = block?.type === "toolCall"
        ? block
        : { type: "toolCall" as const, id: "", name: "", args: {}, argsText: "" };
      blocks[i] = {
        ...prev,
        id: prev.id || (ame.toolCallId ?? ""),
        name: prev.name || (ame.toolName ?? ""),
        argsText: prev.argsText + (ame.delta ?? ""),
      };
      break;
    }
    case "toolcall_end":
      if (ame.toolCall) blocks[i] = toolBlock(ame.toolCall);
      break;
    default:
      return;
  }
  const list = items();
  list[at] = { ...cur, blocks: fill(blocks) };
}

export function messageEnd(
  c: Conversation,
  ev: SessionEvent,
  e: SessionEventBody,
  items: Mut<Item[]>,
): void {
  const m = e.message as {
    role?: string;
    content?: unknown;
    usage?: {
      input?: number;
      output?: number;
      cacheRead?: number;
      cacheWrite?: number;
      cost?: { total?: number };
    };
    stopReason?: string;
    errorMessage?: string;
    model?: string;
  } | undefined;
  if (m?.role !== "assistant") return;
  if (m.usage) {
    c.usage = {
      input: c.usage.input + (m.usage.input ?? 0),
      output: c.usage.output + (m.usage.output ?? 0),
      cacheRead: c.usage.cacheRead + (m.usage.cacheRead ?? 0),
      cacheWrite: c.usage.cacheWrite + (m.usage.cacheWrite ?? 0),
      cost: c.usage.cost + (m.usage.cost?.total ?? 0),
    };
  }
  const blocks = Array.isArray(m.content)
    ? m.content.map(contentBlock).filter((b) => b !== null)
    : [];
  const final = {
    blocks,
    streaming: false,
    stopReason: m.stopReason ?? null,
    error: m.errorMessage ?? (m.stopReason === "error" ? "The model answered with an error" : null),
  };
  const at = lastStreaming(c);
  const list = items();
  if (at >= 0) list[at] = { ...(list[at] as Extract<Item, { kind: "assistant" }>), ...final };
  else {
    list.push({
      kind: "assistant",
      key: `a${ev.seq}`,
      model: typeof m.model === "string" ? m.model : null,
      interrupted: false,
      ...final,
    });
  }
}

type ToolCallLike = { id?: string; name?: string; arguments?: unknown };

function toolBlock(t: ToolCallLike): Block {
  return {
    type: "toolCall",
    id: String(t.id ?? ""),
    name: String(t.name ?? "tool"),
    args: t.arguments ?? {},
    argsText: JSON.stringify(t.arguments ?? {}),
  };
}

function contentBlock(b: unknown): Block | null {
  const x = b as { type?: string; text?: string; thinking?: string } & ToolCallLike;
  if (x?.type === "text") return { type: "text", text: String(x.text ?? "") };
  if (x?.type === "thinking") return { type: "thinking", text: String(x.thinking ?? x.text ?? "") };
  if (x?.type === "toolCall") return toolBlock(x);
  return null;
}

function fill(blocks: (Block | undefined)[]): Block[] {
  return Array.from(blocks, (b) => b ?? { type: "text", text: "" });
}

function lastStreaming(c: Conversation): number {
  for (let i = c.items.length - 1; i >= 0; i--) {
    const it = c.items[i]!;
    if (it.kind === "assistant") return it.streaming ? i : -1;
  }
  return -1;
}

/** Marks a message left streaming (an aborted or crashed run) as finished. */
export function finishStreaming(c: Conversation, items: Mut<Item[]>): void {
  const at = lastStreaming(c);
  if (at < 0) return;
  const list = items();
  list[at] = { ...(list[at] as Extract<Item, { kind: "assistant" }>), streaming: false };
}

/**
 * Ends what a lost turn left open: the streaming message (marked
 * interrupted), running tools, the working state. Returns whether a turn
 * was in flight.
 */
export function interrupt(
  c: Conversation,
  items: Mut<Item[]>,
  tools: Mut<Record<string, ToolRun>>,
): boolean {
  let cut = c.working;
  c.working = false;
  c.activity = "idle";
  const at = lastStreaming(c);
  if (at >= 0) {
    const list = items();
    list[at] = {
      ...(list[at] as Extract<Item, { kind: "assistant" }>),
      streaming: false,
      interrupted: true,
    };
    cut = true;
  }
  for (const run of Object.values(c.tools)) {
    if (run.status !== "running" && run.status !== "pending") continue;
    tools()[run.id] = { ...run, status: "interrupted" };
    cut = true;
  }
  return cut;
}

function userContent(content: unknown): { text: string; images: number } {
  if (typeof content === "string") return { text: content, images: 0 };
  if (!Array.isArray(content)) return { text: "", images: 0 };
  let text = "";
  let images = 0;
  for (const c of content) {
    if (c?.type === "text") text += (text ? "\n" : "") + String(c.text ?? "");
    else if (c?.type === "image") images++;
  }
  return { text, images };
}
