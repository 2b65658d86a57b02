/**
 * The shapes of a conversation as a person reads it; shared/conversation.ts
 * folds a session's events into them.
 *
 * @module
 */
import type { ModelRef, SessionActivity } from "./protocol.ts";
import type { PreviewPort } from "./previews_api.ts";
import type { PendingQuestion } from "./questions_api.ts";

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

/** Gives a part of the conversation to change, copied on first use (unchanged parts keep their identity). */
export type Mut<T> = () => T;
