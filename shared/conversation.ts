/**
 * Folds a session's event log into the conversation a person reads: user
 * prompts, assistant answers (text, thinking, tool calls), tool executions
 * with their live output, notices, usage and the agent's state. Pure and
 * runtime-neutral: the web client renders it; the relay can use it too.
 *
 * @module
 */
import type { ModelRef, SessionEvent } from "./protocol.ts";
import { isPort, PREVIEW_PORTS_EVENT, type PreviewPort } from "./previews_api.ts";
import { subagentChildren } from "./subagents_api.ts";
import { reduceQuestions } from "./questions_api.ts";
import type { Conversation, Item, Mut, ToolRun } from "./conversation_types.ts";
import {
  finishStreaming,
  interrupt,
  messageEnd,
  messageStart,
  messageUpdate,
} from "./conversation_messages.ts";
import { isMemory, markForgotten } from "./conversation_memory.ts";

export type { Block, Conversation, Item, ToolRun, Usage } from "./conversation_types.ts";

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
