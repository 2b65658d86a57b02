/**
 * Folds a session's event log into the conversation a person reads: user
 * prompts, assistant answers (text, thinking, tool calls), tool executions
 * with their live output, notices, usage and the agent's state. Pure and
 * runtime-neutral: the web client renders it; the relay can use it too.
 *
 * @module
 */
import type { ModelRef, SessionActivity, SessionEvent, SessionEventBody } from "./protocol.ts";
import { isPort, PREVIEW_PORTS_EVENT, type PreviewPort } from "./previews_api.ts";
import { subagentChildren } from "./subagents_api.ts";
import { type PendingQuestion, reduceQuestions } from "./questions_api.ts";

/** A piece of an assistant message. */
export type Block =
  | { type: "text"; text: string }
  | { type: "thinking"; text: string }
  | { type: "toolCall"; id: string; name: string; args: unknown; argsText: string };

/** A tool execution as the agent ran it. */
export interface ToolRun {
  id: string;
  name: string;
  args: unknown;
  /** `interrupted`: the runner stopped while it ran, so it has no result. */
  status: "pending" | "running" | "done" | "error" | "interrupted";
  /** Latest output while it runs, then the result text. */
  output: string;
  /** The child sessions a `subagent` call started, in task order (shared/subagents_api.ts). */
  children?: string[];
}

/** One entry of the conversation, in order. */
export type Item =
  | {
    kind: "user";
    key: string;
    text: string;
    images: number;
    /** The agent no longer has this message (lost in a runner restart). */
    forgotten: boolean;
  }
  | {
    kind: "assistant";
    key: string;
    blocks: Block[];
    streaming: boolean;
    /** Cut off by a runner restart: the agent never finished (nor remembers) it. */
    interrupted: boolean;
    stopReason: string | null;
    error: string | null;
    model: string | null;
  }
  | { kind: "notice"; key: string; level: "info" | "error"; text: string }
  | {
    /** The sandbox blocked something (`violation`), or the runner answered `/sandbox …` (`info`). */
    kind: "sandbox";
    key: string;
    variant: "violation" | "info";
    title: string;
    text: string;
  }
  | {
    kind: "trigger";
    key: string;
    triggerId: string;
    type: string;
    source: string;
    summary: string | null;
    payload: unknown;
    deliverAs: string;
    instruction: string | null;
  };

/** Tokens and cost of the session so far. */
export interface Usage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  cost: number;
}

/** Everything a viewer shows about a session, derived from its events. */
export interface Conversation {
  items: Item[];
  tools: Record<string, ToolRun>;
  usage: Usage;
  working: boolean;
  /** What the agent is doing, as far as its events tell. */
  activity: SessionActivity;
  model: ModelRef | null;
  cwd: string | null;
  ended: { reason: string; message: string } | null;
  queue: { steering: string[]; followUp: string[] };
  /** Questions and approvals the agent waits on (shared/questions_api.ts). */
  questions: PendingQuestion[];
  lastSeq: number;
  /** Ports the session's processes listen on, as last announced (live previews). */
  previewPorts: PreviewPort[];
}

/** The conversation before any event. */
export function emptyConversation(): Conversation {
  return {
    items: [],
    tools: {},
    usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0 },
    working: false,
    activity: "idle",
    model: null,
    cwd: null,
    ended: null,
    queue: { steering: [], followUp: [] },
    questions: [],
    lastSeq: 0,
    previewPorts: [],
  };
}

/**
 * Applies events in order and returns the new conversation. Objects that did
 * not change keep their identity, so a renderer can skip them. Events at or
 * below `lastSeq` are ignored, which makes replays idempotent.
 */
export function applyEvents(conv: Conversation, events: readonly SessionEvent[]): Conversation {
  const next: Conversation = { ...conv, items: conv.items, tools: conv.tools };
  let itemsCopied = false;
  let toolsCopied = false;
  const items = () => {
    if (!itemsCopied) {
      next.items = [...next.items];
      itemsCopied = true;
    }
    return next.items;
  };
  const tools = () => {
    if (!toolsCopied) {
      next.tools = { ...next.tools };
      toolsCopied = true;
    }
    return next.tools;
  };
  for (const ev of events) {
    if (ev.seq <= next.lastSeq) continue;
    next.lastSeq = ev.seq;
    apply(next, ev, items, tools);
  }
  return next;
}

type Mut<T> = () => T;

function apply(
  c: Conversation,
  ev: SessionEvent,
  items: Mut<Item[]>,
  tools: Mut<Record<string, ToolRun>>,
): void {
  const e = ev.e;
  let notices = 0;
  const notice = (level: "info" | "error", text: string) =>
    items().push({ kind: "notice", key: `n${ev.seq}.${notices++}`, level, text });
  if (e.truncated) {
    notice("error", `An event (${e.type}) was too large and was cut`);
    return;
  }
  c.questions = reduceQuestions(c.questions, e);
  switch (e.type) {
    case "session_start": {
      if (isModel(e.model)) c.model = { provider: e.model.provider, id: e.model.id };
      if (typeof e.cwd === "string") c.cwd = e.cwd;
      // A new worker has no turn in flight and an empty queue, whatever the
      // last events said: a turn the runner lost in a restart ends here.
      const cut = interrupt(c, items, tools);
      if (c.queue.steering.length > 0 || c.queue.followUp.length > 0) {
        c.queue = { steering: [], followUp: [] };
      }
      const forgotten = isMemory(e.memory) ? markForgotten(c, items, e.memory) : 0;
      const lost = forgotten === 0
        ? ""
        : forgotten === 1
        ? "the agent does not remember the message marked above (it was not saved yet). " +
          "Send it again to continue"
        : `the agent does not remember the ${forgotten} messages marked above (they were not ` +
          "saved yet). Send them again to continue";
      if (cut) {
        notice(
          "error",
          `The runner restarted during this turn, so the agent stopped${
            lost ? `, and ${lost}` : ". Send a message to continue"
          }`,
        );
      } else if (lost) notice("error", `The runner restarted: ${lost}`);
      else if (e.resumed && !e.woke) notice("info", "Session resumed after the runner restarted");
      if (typeof e.notice === "string") notice("info", e.notice);
      return;
    }
    case "session_sleep":
      if (interrupt(c, items, tools)) {
        notice("error", "The runner restarted during this turn, so the agent stopped");
      }
      c.activity = "asleep";
      return;
    case "session_waking":
      c.activity = "waking";
      return;
    case "agent_start":
      c.working = true;
      c.activity = "working";
      return;
    case "agent_end":
      c.working = false;
      c.activity = "idle";
      finishStreaming(c, items);
      return;
    case "message_start":
      return messageStart(c, ev, e, items);
    case "message_update":
      return messageUpdate(c, e, items);
    case "message_end":
      return messageEnd(c, ev, e, items);
    case "tool_execution_start": {
      const id = String(e.toolCallId);
      tools()[id] = {
        id,
        name: String(e.toolName ?? "tool"),
        args: e.args,
        status: "running",
        output: "",
      };
      return;
    }
    case "tool_execution_update": {
      const id = String(e.toolCallId);
      const prev = c.tools[id];
      tools()[id] = {
        ...(prev ?? { id, name: String(e.toolName ?? "tool"), args: e.args, status: "running" }),
        output: resultText(e.partialResult),
        ...subagentChildren(e.partialResult),
      };
      return;
    }
    case "tool_execution_end": {
      const id = String(e.toolCallId);
      const prev = c.tools[id];
      tools()[id] = {
        ...(prev ?? { id, name: String(e.toolName ?? "tool"), args: e.args }),
        status: e.isError ? "error" : "done",
        output: resultText(e.result),
        ...subagentChildren(e.result),
      };
      return;
    }
    case "queue_update":
      c.queue = {
        steering: strings(e.steering),
        followUp: strings(e.followUp),
      };
      return;
    case "session_error":
      notice("error", String(e.message ?? "Error"));
      return;
    case "session_end": {
      c.working = false;
      c.activity = "idle";
      finishStreaming(c, items);
      const reason = String(e.reason ?? "ended");
      const message = String(e.message ?? "Session ended");
      c.ended = { reason, message };
      // Its runner stops watching; a server it left running can still be opened by number.
      if (c.previewPorts.length > 0) c.previewPorts = [];
      notice(reason === "ended" ? "info" : "error", message);
      return;
    }
    case "auto_retry_start":
      notice("info", `Retrying (attempt ${e.attempt} of ${e.maxAttempts}): ${e.errorMessage}`);
      return;
    case "auto_retry_end":
      if (!e.success) notice("error", `Gave up retrying: ${e.finalError ?? "unknown error"}`);
      return;
    case "compaction_start":
      notice("info", "Compacting the conversation…");
      return;
    case "compaction_end":
      if (e.errorMessage) notice("error", `Compaction failed: ${e.errorMessage}`);
      else if (!e.aborted) notice("info", "Conversation compacted");
      return;
    case "trigger_delivered": {
      const t = (e.trigger ?? {}) as Record<string, unknown>;
      items().push({
        kind: "trigger",
        key: `t${ev.seq}`,
        triggerId: String(t.triggerId ?? ""),
        type: String(t.type ?? "trigger"),
        source: String(t.source ?? ""),
        summary: typeof t.summary === "string" ? t.summary : null,
        payload: t.payload ?? null,
        deliverAs: String(t.deliverAs ?? "steer"),
        instruction: typeof e.instruction === "string" ? e.instruction : null,
      });
      return;
    }
    case "sandbox:violation": {
      const op = String(e.operation ?? "");
      const verb = op === "read" ? "a read of" : op === "write" ? "a write to" : "a connection to";
      items().push({
        kind: "sandbox",
        key: `s${ev.seq}`,
        variant: "violation",
        title: `Sandbox blocked ${verb} ${String(e.target ?? "")}`,
        text: String(e.reason ?? ""),
      });
      return;
    }
    case "sandbox:info":
      items().push({
        kind: "sandbox",
        key: `s${ev.seq}`,
        variant: "info",
        title: String(e.command ?? "/sandbox"),
        text: String(e.text ?? ""),
      });
      return;
    case "mcp:notice":
    case "hook:notice":
      // MCP servers that failed or are slow to start, hooks that failed or hit their limit.
      notice(e.level === "error" ? "error" : "info", String(e.text ?? ""));
      return;
    case PREVIEW_PORTS_EVENT:
      c.previewPorts = Array.isArray(e.ports)
        ? (e.ports as unknown[]).filter((p): p is PreviewPort =>
          isPort((p as PreviewPort | null)?.port)
        ).map((p) => ({
          port: p.port,
          ...(typeof p.process === "string" ? { process: p.process.slice(0, 64) } : {}),
        }))
        : [];
      return;
    case "event_too_large":
      notice("error", `An event of type ${e.originalType} was too large to keep`);
      return;
  }
}

function messageStart(
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

function messageUpdate(c: Conversation, e: SessionEventBody, items: Mut<Item[]>): void {
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

function messageEnd(
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
function finishStreaming(c: Conversation, items: Mut<Item[]>): void {
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
function interrupt(
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

/** What a resumed agent holds (see the worker's `memoryOf`). */
interface Memory {
  messages: number;
  /** The start of the agent's last user message (null: it has none). */
  lastPrompt: string | null;
  /** That message's whole length. */
  lastPromptLength: number;
}

function isMemory(v: unknown): v is Memory {
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
function markForgotten(c: Conversation, items: Mut<Item[]>, memory: Memory): number {
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

/** The text of a tool result (`{content: [{type: "text", text}]}`). */
export function resultText(result: unknown): string {
  const content = (result as { content?: unknown })?.content;
  if (typeof result === "string") return result;
  if (!Array.isArray(content)) return "";
  return content
    .map((c) => (c?.type === "text" ? String(c.text ?? "") : c?.type === "image" ? "[image]" : ""))
    .join("");
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.map(String) : [];
}

function isModel(v: unknown): v is ModelRef {
  return typeof v === "object" && v !== null &&
    typeof (v as ModelRef).provider === "string" && typeof (v as ModelRef).id === "string";
}
