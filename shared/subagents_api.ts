/**
 * Subagents (docs/subagents.md): the limits both ends keep, the calls a
 * worker's `subagent` tool makes to the relay through its daemon, and the
 * HTTP answer listing a session's children.
 *
 * @module
 */
import type { SessionInfo } from "./protocol.ts";

/** Tasks one parallel call may hold at most (spec: Limits). */
export const MAX_PARALLEL_TASKS = 8;
/** Subagents of one call running at once at most (spec: Limits). */
export const MAX_CONCURRENT_SUBAGENTS = 4;
/** Steps one chain may hold at most. */
export const MAX_CHAIN_STEPS = 8;
/**
 * How deep subagents nest: a session a person started is at depth 0, its
 * children at 1, theirs at 2; a session at this depth starts none.
 */
export const MAX_SUBAGENT_DEPTH = 2;
/** Subagents one session may start in its whole life (ended ones count). */
export const MAX_SUBAGENTS_PER_SESSION = 32;
/**
 * Longest answer handed back to the parent, in characters (about 12k tokens:
 * several answers of a parallel call still fit in the parent's context).
 */
export const SUBAGENT_RESULT_MAX_CHARS = 50_000;
/** How long one `subagents.wait` call holds at most (under the runner's 20 s call timeout). */
export const SUBAGENT_WAIT_MS = 15_000;

/** How a subagent's work ended: its last assistant text, or why it has none. */
export interface SubagentOutcome {
  ok: boolean;
  text: string;
}

/** The relay's answer to `subagents.wait`. */
export type SubagentWaitAnswer = { done: false } | ({ done: true } & SubagentOutcome);

/** The relay's answer to `subagents.spawn`. */
export interface SubagentSpawnAnswer {
  sessionId: string;
}

/** What the `subagent` tool's result carries for each task (its `details`). */
export interface SubagentRun {
  /** The child session (absent when it could not start). */
  sessionId?: string;
  agent?: string;
  task: string;
  ok: boolean;
  /** The child's answer, or the error. */
  text: string;
}

/** The `details` of a `subagent` tool result (the web app links each child from it). */
export interface SubagentDetails {
  mode: "single" | "parallel" | "chain";
  runs: SubagentRun[];
}

/** `GET /api/sessions/{id}/children`. */
export interface SessionChildrenResponse {
  sessions: SessionInfo[];
}

/**
 * `{children}`: the child session ids in a `subagent` tool result's
 * details, in task order; `{}` for any other result.
 */
export function subagentChildren(result: unknown): { children?: string[] } {
  const runs = (result as { details?: { runs?: unknown } } | null)?.details?.runs;
  if (!Array.isArray(runs)) return {};
  const ids = runs.map((r) => (r as { sessionId?: unknown })?.sessionId)
    .filter((id): id is string => typeof id === "string" && id.length <= 100);
  return ids.length ? { children: ids } : {};
}
