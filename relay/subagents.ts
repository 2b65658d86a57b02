/**
 * Subagents: child sessions an agent starts with its `subagent` tool
 * (runner/subagents.ts). Each child is an ordinary session of the same
 * user on the same runner (same folder, roots and sandbox), stored with
 * its parent's id, so it is durable, listed and streamed like any other.
 *
 * The runner's calls (`subagents.spawn`, `.wait`, `.stop`) are checked and
 * served here. The child's answer is its last assistant text when its
 * agent's run ends, cut to RESULT_MAX_CHARS; the child then ends (its
 * conversation stays readable). When a parent ends, its live children end
 * with it; when a parent is stopped, its worker stops them (`.stop`).
 *
 * @module
 */
import { docNameProblem } from "../shared/skills_api.ts";
import { type Clock, systemClock } from "./_clock.ts";
import { conflict, invalid, notFound } from "./errors.ts";
import type { Committed } from "./event_pipeline.ts";
import type { RunnerLink } from "./runner_link.ts";
import type { RunnerCalls } from "./runner_socket.ts";
import type { SessionControl } from "./session_service.ts";
import { isEnded } from "./session_state.ts";
import type { AsyncStore, SessionRecord } from "./store/mod.ts";
import {
  MAX_SUBAGENT_DEPTH,
  MAX_SUBAGENTS_PER_SESSION,
  SUBAGENT_RESULT_MAX_CHARS,
  SUBAGENT_WAIT_MS,
  type SubagentOutcome,
  type SubagentWaitAnswer,
} from "../shared/subagents_api.ts";

/** Children followed at once at most (their answers wait here until the parent takes them). */
const MAX_TRACKED = 10_000;
/**
 * Waits held at once, per child and in all: a runner that repeats its calls
 * gets `{done: false}` at once past them instead of one more timer each.
 */
const MAX_WAITS_PER_CHILD = 4;
const MAX_WAITS = 10_000;

/** What is known of one child while its parent waits for it. */
interface Tracked {
  userId: string;
  /** Its last assistant text so far, and the error of its last turn, if any. */
  lastText: string;
  lastError: string | null;
  outcome: SubagentOutcome | null;
}

/** Options of {@linkcode Subagents}. */
export interface SubagentsOptions {
  store: Pick<AsyncStore, "sessions" | "events">;
  sessions: Pick<SessionControl, "spawn" | "input">;
  log?: (line: string) => void;
  clock?: Clock;
  /** How long one `subagents.wait` holds at most (default SUBAGENT_WAIT_MS). */
  waitMs?: number;
}

/** Serves the subagent calls and follows the children's events. */
export class Subagents {
  readonly #opts: SubagentsOptions;
  readonly #clock: Clock;
  readonly #tracked = new Map<string, Tracked>();
  readonly #waiters = new Map<string, Set<() => void>>();
  #waits = 0;

  constructor(options: SubagentsOptions) {
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** How deep a session sits: 0 for one a person started, 1 for its child, ... */
  async depthOf(s: SessionRecord): Promise<number> {
    let depth = 0;
    let cur: SessionRecord | undefined = s;
    while (cur?.parentId && depth <= MAX_SUBAGENT_DEPTH) {
      depth++;
      cur = await this.#opts.store.sessions.get(cur.parentId);
    }
    return depth;
  }

  /** Serves one of the runner's `subagents.*` calls on behalf of a session's agent. */
  async call(
    link: Pick<RunnerLink, "runnerId" | "userId">,
    op: string,
    data: Record<string, unknown>,
  ): Promise<unknown> {
    const sessionId = typeof data.sessionId === "string" ? data.sessionId : "";
    const s = await this.#opts.store.sessions.get(sessionId);
    if (!s || s.runnerId !== link.runnerId || s.userId !== link.userId) throw notFound("Session");
    switch (op) {
      case "subagents.spawn":
        return await this.#spawn(s, data);
      case "subagents.wait":
        return await this.#wait(s, str(data.childId));
      case "subagents.stop": {
        const ids = Array.isArray(data.childIds)
          ? data.childIds.filter((id): id is string => typeof id === "string").slice(0, 100)
          : null;
        return { stopped: await this.stopChildren(s, "Stopped with its parent", ids) };
      }
      default:
        throw invalid(`Unknown call: '${op.slice(0, 60)}'`, "unknown_op");
    }
  }

  async #spawn(parent: SessionRecord, data: Record<string, unknown>): Promise<unknown> {
    if (isEnded(parent.status)) throw conflict("session_ended", "The parent session has ended");
    const task = typeof data.task === "string" ? data.task.trim() : "";
    if (!task) throw invalid("A subagent needs a task");
    const agent = data.agent === undefined || data.agent === null || data.agent === ""
      ? undefined
      : data.agent;
    if (agent !== undefined) {
      const problem = docNameProblem(agent);
      if (problem) throw invalid(`Invalid agent: ${problem}`);
    }
    if (await this.depthOf(parent) >= MAX_SUBAGENT_DEPTH) {
      throw conflict(
        "subagent_depth",
        `A subagent at depth ${MAX_SUBAGENT_DEPTH} cannot start subagents of its own`,
      );
    }
    if (
      await this.#opts.store.sessions.countChildren(parent.sessionId) >= MAX_SUBAGENTS_PER_SESSION
    ) {
      throw conflict(
        "subagent_limit",
        `This session has started its ${MAX_SUBAGENTS_PER_SESSION} subagents already`,
      );
    }
    const { sessionId } = await this.#opts.sessions.spawn(parent.userId, {
      runnerId: parent.runnerId,
      prompt: task,
      cwd: parent.cwd || null,
      model: parent.model,
      parentId: parent.sessionId,
      ...(agent !== undefined ? { agent: agent as string } : {}),
    });
    this.#track(sessionId, parent.userId);
    return { sessionId };
  }

  #track(childId: string, userId: string): Tracked {
    let t = this.#tracked.get(childId);
    if (t) return t;
    if (this.#tracked.size >= MAX_TRACKED) {
      this.#tracked.delete(this.#tracked.keys().next().value as string);
    }
    t = { userId, lastText: "", lastError: null, outcome: null };
    this.#tracked.set(childId, t);
    return t;
  }

  /** Waits up to `waitMs` for a child's answer; `{done: false}` when it is still at work. */
  async #wait(parent: SessionRecord, childId: string): Promise<SubagentWaitAnswer> {
    const child = await this.#opts.store.sessions.get(childId);
    if (!child || child.parentId !== parent.sessionId) throw notFound("Subagent");
    let t = this.#tracked.get(childId);
    if (!t) {
      // The relay restarted since the child started: read what its log says so far.
      // (Followed first, so what is committed during the read is folded too.)
      t = this.#track(childId, child.userId);
      await this.#replay(childId, t);
      if (!t.outcome && isEnded(child.status)) {
        t.outcome = { ok: false, text: `The subagent ended before it answered` };
      } else if (t.outcome && !isEnded(child.status)) {
        // It answered while nobody followed it: it ends now, as it would have then.
        this.#endAnswered(childId, t.userId);
      }
    }
    const held = this.#waiters.get(childId)?.size ?? 0;
    if (!t.outcome && (held >= MAX_WAITS_PER_CHILD || this.#waits >= MAX_WAITS)) {
      return { done: false };
    }
    if (!t.outcome) {
      this.#waits++;
      await new Promise<void>((resolve) => {
        let waiters = this.#waiters.get(childId);
        if (!waiters) this.#waiters.set(childId, waiters = new Set());
        const done = () => {
          this.#waits--;
          this.#clock.clearTimeout(timer);
          waiters!.delete(done);
          if (waiters!.size === 0) this.#waiters.delete(childId);
          resolve();
        };
        const timer = this.#clock.setTimeout(done, this.#opts.waitMs ?? SUBAGENT_WAIT_MS);
        waiters.add(done);
      });
    }
    const outcome = t.outcome;
    if (!outcome) return { done: false };
    this.#tracked.delete(childId);
    return { done: true, ...outcome };
  }

  /** Folds a child's stored events into `t` (after a relay restart). */
  async #replay(childId: string, t: Tracked): Promise<void> {
    let seq = 0;
    for (;;) {
      const page = await this.#opts.store.events.after(childId, seq, 500);
      if (page.length === 0) return;
      for (const ev of page) this.#fold(childId, t, ev.json, false);
      seq = page[page.length - 1]!.seq;
    }
  }

  /** Ends the live children of `parent` (all, or those in `only`); answers how many. */
  async stopChildren(
    parent: SessionRecord,
    reason: string,
    only: string[] | null = null,
  ): Promise<number> {
    const want = only ? new Set(only) : null;
    let stopped = 0;
    for (const child of await this.#opts.store.sessions.listChildren(parent.sessionId)) {
      if (want && !want.has(child.sessionId)) continue;
      if (isEnded(child.status)) continue;
      const t = this.#tracked.get(child.sessionId);
      if (t && !t.outcome) t.outcome = { ok: false, text: reason };
      this.#wake(child.sessionId);
      try {
        await this.#opts.sessions.input(child.userId, child.sessionId, "end", reason);
        stopped++;
      } catch (err) {
        this.#opts.log?.(`subagents: could not end ${child.sessionId.slice(0, 8)}: ${err}`);
      }
    }
    return stopped;
  }

  /** Looks at a commit: children's answers, and parents that ended. */
  committed(c: Committed): void {
    const t = this.#tracked.get(c.sessionId);
    if (t && !t.outcome) {
      for (const ev of c.events) {
        if (this.#fold(c.sessionId, t, ev.json, true)) break;
      }
    }
    if (c.patch?.status !== undefined && isEnded(c.patch.status)) {
      this.#parentEnded(c.sessionId).catch((err) =>
        this.#opts.log?.(`subagents: ending the children of ${c.sessionId.slice(0, 8)}: ${err}`)
      );
    }
  }

  /** Ends the live children of a session that just ended. */
  async #parentEnded(sessionId: string): Promise<void> {
    const { sessions } = this.#opts.store;
    const s = await sessions.get(sessionId);
    if (s && await sessions.countChildren(s.sessionId) > 0) {
      await this.stopChildren(s, "Its parent session ended");
    }
  }

  /**
   * Takes one stored event of a child into `t`; true once its answer is
   * known. `live`: the child then ends (its answer is all it was for).
   */
  #fold(childId: string, t: Tracked, json: string, live: boolean): boolean {
    if (
      !json.includes('"type":"message_end"') && !json.includes('"type":"agent_end"') &&
      !json.includes('"type":"session_error"') && !json.includes('"type":"session_end"')
    ) return false;
    let e: { type?: string; message?: unknown; reason?: unknown } | undefined;
    try {
      e = (JSON.parse(json) as { e?: typeof e }).e;
    } catch {
      return false;
    }
    switch (e?.type) {
      case "message_end": {
        const m = e.message as {
          role?: string;
          content?: unknown;
          stopReason?: string;
          errorMessage?: string;
        };
        if (m?.role !== "assistant") return false;
        const text = textOf(m.content);
        if (text) t.lastText = text;
        t.lastError = m.stopReason === "error"
          ? String(m.errorMessage ?? "The model answered with an error")
          : m.stopReason === "aborted"
          ? "The subagent was stopped"
          : null;
        return false;
      }
      case "agent_end":
        this.#settle(
          childId,
          t,
          t.lastError
            ? { ok: false, text: t.lastError }
            : { ok: true, text: t.lastText || "(The subagent gave no text answer)" },
          live,
        );
        return true;
      case "session_error":
        this.#settle(childId, t, { ok: false, text: String(e.message ?? "Error") }, live);
        return true;
      case "session_end":
        this.#settle(
          childId,
          t,
          { ok: false, text: `The subagent ended before it answered: ${String(e.reason ?? "")}` },
          false,
        );
        return true;
    }
    return false;
  }

  #settle(childId: string, t: Tracked, outcome: SubagentOutcome, end: boolean): void {
    t.outcome = { ok: outcome.ok, text: bounded(outcome.text) };
    this.#wake(childId);
    if (end) this.#endAnswered(childId, t.userId);
  }

  /** Ends a child whose answer is known (its worker has nothing left to do). */
  #endAnswered(childId: string, userId: string): void {
    const why = "Answered: the answer went to the parent session";
    this.#opts.sessions.input(userId, childId, "end", why).catch((err) =>
      this.#opts.log?.(`subagents: could not end ${childId.slice(0, 8)}: ${err}`)
    );
  }

  #wake(childId: string): void {
    for (const w of [...this.#waiters.get(childId) ?? []]) w();
  }
}

/** Routes `subagents.*` calls to `subagents` and every other call to `base`. */
export function withSubagentCalls(base: RunnerCalls, subagents: Subagents): RunnerCalls {
  // Everything else (trigger and service announcements) goes to `base` as it is.
  const calls: RunnerCalls = {
    announce: (runnerId, defs) => base.announce(runnerId, defs),
    call: (link, op, data) =>
      op.startsWith("subagents.") ? subagents.call(link, op, data) : base.call(link, op, data),
  };
  if (base.announceServices) {
    calls.announceServices = (link, msg) => base.announceServices!(link, msg);
  }
  return calls;
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

/** The text blocks of a message's content, joined. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((c) => c && typeof c === "object" && (c as { type?: string }).type === "text")
    .map((c) => String((c as { text?: unknown }).text ?? ""))
    .join("\n")
    .trim();
}

/** An answer cut to SUBAGENT_RESULT_MAX_CHARS, saying so. */
function bounded(text: string): string {
  if (text.length <= SUBAGENT_RESULT_MAX_CHARS) return text;
  return text.slice(0, SUBAGENT_RESULT_MAX_CHARS) +
    `\n… (answer cut: ${text.length} characters, the first ${SUBAGENT_RESULT_MAX_CHARS} kept; ` +
    `the whole answer is in the subagent's session)`;
}
