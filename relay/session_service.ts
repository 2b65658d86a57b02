/**
 * Sessions as users drive them: spawn, input, triggers into them, their end,
 * renaming and pins, a runner's models, and the folders of recent sessions.
 *
 * @module
 */
import {
  type DeliveredTrigger,
  type InputKind,
  type InputRequest,
  inputTextProblem,
  type ModelInfo,
  type ModelRef,
  type SessionInfo,
  type SpawnRequest,
  type SpawnResult,
  type TriggerRequest,
} from "../shared/protocol.ts";
import { type Clock, isoNow, systemClock } from "./_clock.ts";
import { invalid, notFound, rejected } from "./errors.ts";
import type { EventPipeline } from "./event_pipeline.ts";
import type { RunnerConnection, RunnerRegistry } from "./runner_registry.ts";
import { SPAWN_ANSWER_MS, SPAWN_WITH_ATTACHMENTS_MS } from "./runner_connection.ts";
import { assertNotEnded, isEnded, isModelRef, sessionInfo, titleFrom } from "./session_state.ts";
import type { StateFeed } from "./state_feed.ts";
import { attachmentRefs, type InputOptions, spawnAttachmentRefs } from "./input_attachments.ts";
import type { AsyncStore, SessionRecord } from "./store/mod.ts";

/** What a new session starts with. */
export interface SpawnInput {
  runnerId: string;
  prompt: string;
  cwd: string | null;
  model: ModelRef | null;
  /** A trigger the session starts with, and what to do with it. */
  trigger?: DeliveredTrigger;
  instruction?: string;
  /** Ids of the caller's attachments, of sessions on the same runner, for the first prompt. */
  attachments?: string[];
  /** A subagent's parent session and role (relay/subagents.ts checks both). */
  parentId?: string;
  agent?: string;
  /** Runs once the session's row exists, before the runner is asked (its trigger's history entry). */
  beforeStart?: (sessionId: string) => Promise<void>;
}

/** How a wait for a session's start ended. */
export type StartState = "running" | "ended" | "timeout";

/** The part of the session service that triggers and webhooks drive. */
export interface SessionControl {
  spawn(userId: string, req: SpawnInput): Promise<{ sessionId: string; shareUrl: string }>;
  deliverTrigger(s: SessionRecord, trigger: DeliveredTrigger, instruction?: string): Promise<void>;
  input(
    userId: string,
    sessionId: string,
    kind: InputKind,
    text: string,
    options?: InputOptions,
  ): Promise<void>;
  waitRunning(sessionId: string, timeoutMs: number): Promise<StartState>;
  /** Ends a session on the relay's side; never rejects (a failure is logged). */
  abandonSession(sessionId: string, reason: string): Promise<void>;
}

/** Options of {@linkcode SessionService}. */
export interface SessionServiceOptions {
  store: AsyncStore;
  runners: Pick<RunnerRegistry, "connected" | "connectedRunner" | "assertOwned">;
  events: Pick<
    EventPipeline,
    "lastSeq" | "statusOf" | "inject" | "retitle" | "drop" | "inFlight" | "catchUp"
  >;
  feed: Pick<StateFeed, "sessionChanged" | "runnerChanged" | "bump">;
  /** Public address of the relay, for share URLs. */
  baseUrl: string;
  clock?: Clock;
  /** Receives one line per notable incident. */
  log?: (line: string) => void;
}

/** Spawns and steers sessions, and keeps their listed state. */
export class SessionService implements SessionControl {
  readonly #opts: SessionServiceOptions;
  readonly #store: AsyncStore;
  readonly #clock: Clock;
  /** Checks to run when a session's status changes (see waitRunning). */
  readonly #statusWaiters = new Map<string, Set<() => void>>();

  constructor(options: SessionServiceOptions) {
    this.#opts = options;
    this.#store = options.store;
    this.#clock = options.clock ?? systemClock;
  }

  sessionInfo(s: SessionRecord): SessionInfo {
    return sessionInfo(s, this.#opts.events.lastSeq(s));
  }

  /** A session of `userId`; unknown and foreign ids throw the same 404. */
  async owned(userId: string, sessionId: string): Promise<SessionRecord> {
    const s = await this.#store.sessions.getOwned(userId, sessionId);
    if (!s) throw notFound("Session");
    return s;
  }

  /** Every session of `userId`, newest first. */
  async list(userId: string): Promise<SessionInfo[]> {
    return (await this.#store.sessions.listForUser(userId)).map((s) => this.sessionInfo(s));
  }

  /** Starts a session on a runner; the runner checks `cwd` against its roots first. */
  async spawn(userId: string, req: SpawnInput): Promise<{ sessionId: string; shareUrl: string }> {
    checkInputText(req.prompt);
    const link = await this.#opts.runners.connectedRunner(userId, req.runnerId);
    const attachments = await spawnAttachmentRefs(
      this.#store,
      userId,
      req.runnerId,
      req.attachments ?? [],
      this.#clock,
    );
    const sessionId = crypto.randomUUID();
    const now = isoNow(this.#clock);
    this.#opts.feed.bump(userId);
    // Kept by a runner that reconnects meanwhile (reconcileRunner), from before its row exists.
    link.pendingSpawns.add(sessionId);
    const row: SessionRecord = {
      sessionId,
      userId,
      runnerId: req.runnerId,
      status: "starting",
      activity: "idle",
      cwd: req.cwd ?? "",
      model: req.model,
      prompt: req.prompt,
      title: titleFrom(
        req.prompt || (req.trigger ? `${req.trigger.summary ?? req.trigger.type}` : ""),
      ),
      createdAt: now,
      updatedAt: now,
      endedAt: null,
      endReason: null,
      lastSeq: 0,
      isPinned: false,
      parentId: req.parentId ?? null,
      agent: req.agent ?? null,
    };
    try {
      await this.#store.sessions.insert(row);
    } catch (err) {
      link.pendingSpawns.delete(sessionId);
      throw err;
    }
    try {
      await req.beforeStart?.(sessionId);
      const spawn: SpawnRequest = {
        sessionId,
        cwd: req.cwd,
        prompt: req.prompt,
        model: req.model,
        ...(req.trigger ? { trigger: req.trigger } : {}),
        ...(req.instruction ? { instruction: req.instruction } : {}),
        ...(attachments.length ? { attachments } : {}),
        ...(req.agent ? { agent: req.agent } : {}),
      };
      // The runner fetches the attachments before it answers.
      const wait = attachments.length ? SPAWN_WITH_ATTACHMENTS_MS : SPAWN_ANSWER_MS;
      const res = await link.request("spawn", spawn, wait) as Partial<SpawnResult> | null;
      if (typeof res?.cwd !== "string" || res.cwd.length === 0 || res.cwd.length > 4096) {
        throw badRunnerAnswer("spawn");
      }
      await this.#store.sessions.update(sessionId, { cwd: res.cwd }, isoNow(this.#clock));
    } catch (err) {
      // Nothing started: the session leaves no trace. Its row goes first, so
      // no more of its events are taken (ingest answers unknown_session); what
      // is pending, or loading, is dropped, and its stored events go once the
      // commit in flight, which may hold some of them, is done.
      await this.#store.sessions.delete(sessionId);
      this.#opts.events.drop(sessionId);
      await this.#opts.events.inFlight();
      await this.#store.events.deleteSession(sessionId);
      this.#opts.feed.bump(userId);
      throw err;
    } finally {
      link.pendingSpawns.delete(sessionId);
    }
    this.#opts.feed.sessionChanged(sessionId, userId);
    this.#opts.feed.runnerChanged(userId, req.runnerId);
    return { sessionId, shareUrl: `${this.#opts.baseUrl}/session/${sessionId}` };
  }

  /**
   * Resolves once the session's worker has started (its session_start is
   * stored), with "ended" if it ends first and "timeout" after `timeoutMs`.
   */
  waitRunning(sessionId: string, timeoutMs: number): Promise<StartState> {
    const state = async (): Promise<StartState | null> => {
      const s = await this.#store.sessions.get(sessionId);
      if (!s || isEnded(s.status)) return "ended";
      return s.status === "running" ? "running" : null;
    };
    // The wait is registered before the first look, so a change while the
    // row is read still wakes it.
    return new Promise((resolve, reject) => {
      let waiters = this.#statusWaiters.get(sessionId);
      if (!waiters) this.#statusWaiters.set(sessionId, waiters = new Set());
      let settled = false;
      const done = (v: StartState | Error) => {
        if (settled) return;
        settled = true;
        this.#clock.clearTimeout(timer);
        waiters!.delete(check);
        if (waiters!.size === 0) this.#statusWaiters.delete(sessionId);
        if (v instanceof Error) reject(v);
        else resolve(v);
      };
      const check = () => {
        state().then((v) => v && done(v), (err) => done(err as Error));
      };
      const timer = this.#clock.setTimeout(() => done("timeout"), timeoutMs);
      waiters.add(check);
      check();
    });
  }

  /** Wakes the waits on a session whose status just changed (see waitRunning). */
  statusChanged(sessionId: string): void {
    for (const check of [...this.#statusWaiters.get(sessionId) ?? []]) check();
  }

  /** Ends a session on the relay's side (its runner is told to drop it when it asks). */
  async abandonSession(sessionId: string, reason: string): Promise<void> {
    try {
      // Another relay node may hold the runner and have committed events this
      // node's tail has not heard of (an end among them): the tail catches up
      // first, and the row read after it says whether the session ended there.
      await this.#opts.events.catchUp(sessionId);
      const s = await this.#store.sessions.get(sessionId);
      if (!s || isEnded(s.status)) return;
      if (isEnded(this.#opts.events.statusOf(sessionId) ?? s.status)) return;
      await this.#endSession(s, reason);
    } catch (err) {
      this.#opts.log?.(`abandoning session ${sessionId}: ${err}`);
    }
  }

  /**
   * Takes a runner's list of the sessions it still has, once it connected:
   * how far each one's log goes (`acked`), which ones it should drop
   * (`ended`). Sessions the relay believes run on it but it no longer has
   * (its state was wiped) end here, so they do not show as running forever.
   */
  async reconcileRunner(
    link: Pick<RunnerConnection, "runnerId" | "userId" | "pendingSpawns">,
    sessions: string[],
  ): Promise<{ acked: Record<string, number>; ended: string[] }> {
    const acked: Record<string, number> = {};
    const ended: string[] = [];
    const reported = new Set(sessions);
    // One query, not a read each (a round trip on PostgreSQL): the rest are unknown, another's, or over.
    const live = (await this.#store.sessions.listLiveForRunner(link.runnerId))
      .filter((s) => s.userId === link.userId);
    const mine = new Map(
      live.filter((s) => reported.has(s.sessionId)).map((s) => [s.sessionId, s]),
    );
    for (const id of reported) if (!mine.has(id)) ended.push(id);
    // A tail in memory may lag the log when another relay node held the
    // runner until now: the runner must resend only what the log lacks.
    for (const id of mine.keys()) await this.#opts.events.catchUp(id);
    // Read once the rows are in, so a commit meanwhile counts (a last seq only moves forward).
    for (const [id, s] of mine) acked[id] = this.#opts.events.lastSeq(s);
    for (const s of await this.#store.sessions.listLiveForRunner(link.runnerId)) {
      if (reported.has(s.sessionId) || link.pendingSpawns.has(s.sessionId)) continue;
      await this.#endSession(s, "The runner restarted without this session");
    }
    return { acked, ended };
  }

  /** Ends a session the runner lost or can no longer report on. */
  async #endSession(s: SessionRecord, reason: string): Promise<void> {
    await this.#opts.events.inject(s, { type: "session_end", reason: "lost", message: reason }, {
      status: "error",
      activity: "idle",
      endedAt: isoNow(this.#clock),
      endReason: reason,
    });
  }

  /** Delivers a trigger into a running session through its runner. */
  async deliverTrigger(
    s: SessionRecord,
    trigger: DeliveredTrigger,
    instruction?: string,
  ): Promise<void> {
    assertNotEnded(s);
    const link = this.#opts.runners.connected(s.runnerId);
    const req: TriggerRequest = {
      sessionId: s.sessionId,
      trigger,
      ...(instruction ? { instruction } : {}),
    };
    await link.request("trigger", req, 30_000);
  }

  /** Sends a prompt, steer, follow-up, abort or end into a running session. */
  async input(
    userId: string,
    sessionId: string,
    kind: InputKind,
    text: string,
    options: InputOptions = {},
  ): Promise<void> {
    // Here, not in the route's schema: the HTTP route and the viewer socket both come this way.
    checkInputText(text);
    const s = await this.owned(userId, sessionId);
    const attachments = await attachmentRefs(
      this.#store,
      s,
      kind,
      options.attachments ?? [],
      this.#clock,
    );
    assertNotEnded(s);
    const link = this.#opts.runners.connected(s.runnerId);
    const req: InputRequest = {
      sessionId,
      kind,
      text,
      ...(attachments.length ? { attachments } : {}),
    };
    // The runner fetches each attachment before its worker takes the input.
    await link.request("input", req, attachments.length ? 120_000 : 30_000);
  }

  /**
   * Gives a session of `userId` a new title (checked by the caller) and tells
   * the owner's feed; unknown and foreign ids throw the same 404. A title the
   * session's first prompt would give it later no longer applies.
   */
  async rename(userId: string, sessionId: string, title: string): Promise<SessionInfo> {
    await this.owned(userId, sessionId);
    if (this.#opts.events.retitle(sessionId, title)) {
      // A commit in flight may still carry a title taken from the first prompt: ours goes after.
      await this.#opts.events.inFlight();
    }
    await this.owned(userId, sessionId);
    await this.#store.sessions.update(sessionId, { title }, isoNow(this.#clock));
    this.#opts.feed.sessionChanged(sessionId, userId);
    const s = await this.#store.sessions.get(sessionId);
    if (!s) throw notFound("Session");
    return this.sessionInfo(s);
  }

  /** Pins or unpins a session of `userId` and tells the owner's feed. */
  async setPinned(userId: string, sessionId: string, pinned: boolean): Promise<void> {
    if (!await this.#store.sessions.setPinned(userId, sessionId, pinned)) throw notFound("Session");
    this.#opts.feed.sessionChanged(sessionId, userId);
  }

  /** The models a runner offers, minus the ones `userId` hid, and its models.json error if any. */
  async models(
    userId: string,
    runnerId: string,
  ): Promise<{ models: ModelInfo[]; error?: string }> {
    const link = await this.#opts.runners.connectedRunner(userId, runnerId);
    const res = await link.request("models", {}, 15_000) as { models?: unknown; error?: unknown };
    if (!Array.isArray(res?.models)) throw badRunnerAnswer("models");
    const hidden = new Set(await this.#store.settings.get<string[]>(userId, "hiddenModels", []));
    const models = res.models.filter(isModelInfo).map((m) => ({
      provider: m.provider,
      id: m.id,
      ...(typeof m.name === "string" ? { name: m.name } : {}),
      ...(typeof m.reasoning === "boolean" ? { reasoning: m.reasoning } : {}),
      ...(typeof m.contextWindow === "number" ? { contextWindow: m.contextWindow } : {}),
    }));
    return {
      models: models.filter((m) => !hidden.has(`${m.provider}/${m.id}`)),
      ...(typeof res.error === "string" ? { error: res.error.slice(0, 2000) } : {}),
    };
  }
}

/** A runner answered something that is not the protocol's shape. */
function badRunnerAnswer(op: string) {
  return rejected("bad_runner_answer", `Runner sent an invalid answer to '${op}'`);
}

function isModelInfo(v: unknown): v is ModelInfo {
  return isModelRef(v) && v.provider.length <= 200 && v.id.length <= 200;
}

/** Throws 400 `text_too_long` for an input or prompt over MAX_INPUT_TEXT. */
function checkInputText(text: string): void {
  const problem = inputTextProblem(text);
  if (problem) throw invalid(problem, "text_too_long");
}
