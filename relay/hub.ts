import {
  CloseCode,
  type DeliveredTrigger,
  type EventsMessage,
  type InputKind,
  type ModelInfo,
  type ModelRef,
  PROTOCOL_VERSION,
  type RunnerInfo,
  type SessionEvent,
  type SessionEventBody,
  type SessionInfo,
  type SessionStatus,
  type SpawnRequest,
  type SpawnResult,
  type TriggerRequest,
} from "../shared/protocol.ts";
import { setImmediate } from "node:timers";
import { notFound, offline, rejected, sessionEnded } from "./errors.ts";
import { EventRing } from "./session_log.ts";
import type { SessionPatch, SessionRecord, Store, StoredEvent } from "./store/mod.ts";
import { type CommitEvents, inlineCommit } from "./store/event_writer.ts";
import type { RunnerLink } from "./runner_link.ts";
import type { Viewer } from "./viewer.ts";
import type { Credential } from "./auth.ts";

/** Options of {@linkcode Hub}. */
export interface HubOptions {
  store: Store;
  /** Events kept in memory per session (`BATON_RELAY_EVENT_BUFFER_SIZE`). */
  eventBufferSize: number;
  baseUrl: string;
  /** Receives one line per notable incident; the CLI prints them. */
  log?: (line: string) => void;
  /** Writes committed events (default: on this thread, through the store). */
  commit?: CommitEvents;
  /**
   * Whether what a socket was opened with (browser session, key) still holds;
   * given, sockets whose credentials lapsed are closed within
   * CREDENTIAL_SWEEP_MS.
   */
  principalLive?: (c: Credential) => boolean;
}

/** How often open sockets' credentials are checked for expiry (ms). */
export const CREDENTIAL_SWEEP_MS = 10_000;

/** Largest single event body the relay stores; bigger ones are replaced by a marker. */
export const MAX_EVENT_BYTES = 2 * 1024 * 1024;

/**
 * Bytes a viewer's socket may have waiting before it stops getting live
 * frames and is caught up by pulling from the log instead.
 */
export const VIEWER_HIGH_WATER = 1024 * 1024;
/**
 * What all viewers' sockets together may have waiting. Past
 * `VIEWER_QUEUE_BUDGET / VIEWER_HIGH_WATER` viewers, each one's high water
 * shrinks (down to VIEWER_MIN_HIGH_WATER), so 1,000 slow phones cannot make
 * the relay hold a megabyte each.
 */
export const VIEWER_QUEUE_BUDGET = 32 * 1024 * 1024;
const VIEWER_MIN_HIGH_WATER = 16 * 1024;

/**
 * A viewer's high water with `viewers` connected: VIEWER_HIGH_WATER while
 * the budget allows, else an equal share of VIEWER_QUEUE_BUDGET. A lagging
 * viewer gets its next catch-up chunk once below a quarter of it.
 */
export function viewerHighWater(viewers: number): number {
  return Math.max(
    VIEWER_MIN_HIGH_WATER,
    Math.min(VIEWER_HIGH_WATER, Math.floor(VIEWER_QUEUE_BUDGET / Math.max(1, viewers))),
  );
}
const CATCH_UP_EVENTS = 500;
/**
 * Most bytes in one catch-up frame. What the relay keeps after many viewers
 * catch up at once grows with the frame size (Deno's per-frame buffers and
 * malloc): 1,000 viewers catching up on 540 KB each left it 555 MB larger
 * with 512 KB frames, 185 MB with 64 KB ones. A 10,000-event replay still
 * takes ~70 ms: one read of the log feeds several frames.
 */
const CATCH_UP_BYTES = 64 * 1024;
/**
 * Most bytes of events in one live frame. A batch bigger than this (a runner
 * that fell behind) goes out in several frames, so a viewer's socket never
 * gets a megabytes-long frame on top of its high water.
 */
const LIVE_FRAME_BYTES = 128 * 1024;

/** One viewer's subscription to one session. */
export interface Subscription {
  viewer: Viewer;
  sessionId: string;
  /** Highest seq sent to this viewer. */
  sent: number;
  /** True once caught up: live frames go straight out. */
  live: boolean;
  /**
   * Events to read per catch-up step: about what the socket takes before it
   * is full, from the size of the events read last (at most CATCH_UP_EVENTS).
   */
  readLimit?: number;
}

/** In-memory state of a session that has viewers or recent events. */
interface LiveSession {
  id: string;
  userId: string;
  runnerId: string;
  /** Highest seq committed to the database (what acks and viewers see). */
  lastSeq: number;
  /** Highest seq received from the runner: committed, or pending in `pending`. */
  receivedSeq: number;
  /** Events received but not yet committed; the next flush stores, acks and fans them out. */
  pending: StoredEvent[];
  /** How the pending events change the session's listed state. */
  pendingPatch: SessionPatch | null;
  /** The session's status and title once everything received is committed. */
  view: { status: SessionStatus; title: string };
  ring: EventRing;
  subs: Set<Subscription>;
  touchedAt: number;
}

/** The event types that move a session's status or title. */
const STATEFUL_EVENTS = new Set([
  "session_start",
  "session_end",
  "session_sleep",
  "session_waking",
  "agent_start",
  "agent_end",
  "message_start",
]);

/**
 * The relay's live state: connected runners, the in-memory tail of each
 * session's log and the viewers. Everything durable goes through the store.
 */
export class Hub {
  readonly store: Store;
  readonly #opts: HubOptions;
  readonly #links = new Map<string, RunnerLink>();
  readonly #live = new Map<string, LiveSession>();
  readonly #viewersByUser = new Map<string, Set<Viewer>>();
  /** Every viewer's high water and low water, from how many are connected (see viewerHighWater). */
  #highWater = VIEWER_HIGH_WATER;
  #lowWater = VIEWER_HIGH_WATER / 4;
  #viewerCount = 0;
  /**
   * Bytes handed to viewer sockets in this turn of the event loop. Deno copies
   * each frame per socket and writes them out only once the turn ends, so one
   * big batch to many viewers would hold frame × viewers at once; past
   * VIEWER_QUEUE_BUDGET in one turn, the remaining viewers are caught up from
   * the log in the next turns instead.
   */
  #turnBytes = 0;
  #turnResetScheduled = false;
  readonly #lagging = new Set<Subscription>();
  #lagTimer: ReturnType<typeof setTimeout> | null = null;
  /** Delay of the next look at lagging viewers: short while they drain, longer while stuck. */
  #lagDelay = 1;
  readonly #timers: ReturnType<typeof setInterval>[] = [];
  /** Sessions with events waiting for the next flush. */
  readonly #dirty = new Set<LiveSession>();
  /** Checks to run when a session's status changes (see waitRunning). */
  readonly #statusWaiters = new Map<string, Set<() => void>>();
  /** Per user, bumped on every change to one of their sessions (see sessionsVersion). */
  readonly #versions = new Map<string, number>();
  #flushScheduled = false;
  /** The commit in flight (one at a time, so events are stored in order). */
  #committing: Promise<void> | null = null;
  readonly #commit: CommitEvents;
  #closed = false;

  constructor(options: HubOptions) {
    this.#opts = options;
    this.store = options.store;
    this.#commit = options.commit ?? inlineCommit(options.store);
    // A session's stored last seq is written when its state changes, when it
    // leaves memory and at shutdown, not with every commit: after a crash it
    // lags the log, which has every acknowledged event.
    const caughtUp = this.store.sessions.catchUpLastSeqs();
    if (caughtUp > 0) this.log(`brought ${caughtUp} sessions' last seq up to their event logs`);
    this.#timers.push(setInterval(() => this.#evictIdle(), 60_000));
    const live = options.principalLive;
    if (live) this.#timers.push(setInterval(() => this.closeLapsed(live), CREDENTIAL_SWEEP_MS));
  }

  log(line: string): void {
    this.#opts.log?.(line);
  }

  // -------------------------------------------------------------------------
  // Runners

  /** Registers an authenticated runner link, replacing an older one for the same id. */
  attachRunner(link: RunnerLink, sessions: string[]): {
    acked: Record<string, number>;
    ended: string[];
  } {
    const old = this.#links.get(link.runnerId);
    if (old && old !== link) old.close(CloseCode.replaced, "Replaced by a newer connection");
    this.#links.set(link.runnerId, link);

    const acked: Record<string, number> = {};
    const ended: string[] = [];
    const reported = new Set(sessions);
    for (const id of sessions) {
      const s = this.store.sessions.get(id);
      if (!s || s.runnerId !== link.runnerId || s.userId !== link.userId) ended.push(id);
      else if (s.status === "ended" || s.status === "error") ended.push(id);
      else acked[id] = this.#lastSeq(s);
    }
    // Sessions the relay believes run on this runner but the runner no longer
    // has (its state was wiped) end here, so they do not show as running forever.
    for (const s of this.store.sessions.listLiveForRunner(link.runnerId)) {
      if (reported.has(s.sessionId) || link.pendingSpawns.has(s.sessionId)) continue;
      this.#endSession(s, "error", "The runner restarted without this session");
    }
    this.#notifyRunner(link.userId, link.runnerId);
    return { acked, ended };
  }

  detachRunner(link: RunnerLink): void {
    if (this.#links.get(link.runnerId) !== link) return;
    this.#links.delete(link.runnerId);
    this.store.runners.touch(link.runnerId, new Date().toISOString());
    this.#notifyRunner(link.userId, link.runnerId);
  }

  link(runnerId: string): RunnerLink | undefined {
    return this.#links.get(runnerId);
  }

  runnerInfo(runnerId: string): RunnerInfo | undefined {
    const r = this.store.runners.get(runnerId);
    if (!r) return undefined;
    return {
      id: r.id,
      name: r.name,
      connected: this.#links.has(r.id),
      sessions: this.store.sessions.listLiveForRunner(r.id).map((s) => s.sessionId),
      platform: r.platform,
      version: r.version,
      roots: r.roots,
      lastSeenAt: this.#links.has(r.id) ? new Date().toISOString() : r.lastSeenAt,
    };
  }

  listRunners(userId: string): RunnerInfo[] {
    return this.store.runners.listForUser(userId).map((r) => this.runnerInfo(r.id)!);
  }

  /** The connected link of a runner `userId` owns; 404 for foreign or unknown, 503 when offline. */
  connectedRunner(userId: string, runnerId: string): RunnerLink {
    if (!this.store.runners.getOwned(userId, runnerId)) throw notFound("Runner");
    const link = this.#links.get(runnerId);
    if (!link) throw offline();
    return link;
  }

  // -------------------------------------------------------------------------
  // Sessions

  sessionInfo(s: SessionRecord): SessionInfo {
    const { userId: _u, prompt: _p, ...info } = s;
    return { ...info, lastSeq: this.#lastSeq(s) };
  }

  /** Starts a session on a runner; the runner checks `cwd` against its roots first. */
  async spawn(
    userId: string,
    req: {
      runnerId: string;
      prompt: string;
      cwd: string | null;
      model: ModelRef | null;
      /** A trigger the session starts with, and what to do with it. */
      trigger?: DeliveredTrigger;
      instruction?: string;
    },
  ): Promise<{ sessionId: string; shareUrl: string }> {
    const link = this.connectedRunner(userId, req.runnerId);
    const sessionId = crypto.randomUUID();
    const now = new Date().toISOString();
    this.#bump(userId);
    this.store.sessions.insert({
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
    });
    link.pendingSpawns.add(sessionId);
    try {
      const spawn: SpawnRequest = {
        sessionId,
        cwd: req.cwd,
        prompt: req.prompt,
        model: req.model,
        ...(req.trigger ? { trigger: req.trigger } : {}),
        ...(req.instruction ? { instruction: req.instruction } : {}),
      };
      const res = await link.request("spawn", spawn, 30_000) as Partial<SpawnResult> | null;
      if (typeof res?.cwd !== "string" || res.cwd.length === 0 || res.cwd.length > 4096) {
        throw badRunnerAnswer("spawn");
      }
      this.store.sessions.update(sessionId, { cwd: res.cwd }, new Date().toISOString());
    } catch (err) {
      // Nothing started: the session leaves no trace. Its row goes first, so
      // no more of its events are taken (ingest answers unknown_session); what
      // is pending is dropped, and its stored events go once the commit in
      // flight, which may hold some of them, is done.
      this.store.sessions.delete(sessionId);
      const live = this.#live.get(sessionId);
      if (live) {
        live.pending = [];
        live.pendingPatch = null;
        this.#dirty.delete(live);
        this.#live.delete(sessionId);
      }
      await this.#committing;
      this.store.events.deleteSession(sessionId);
      this.#bump(userId);
      throw err;
    } finally {
      link.pendingSpawns.delete(sessionId);
    }
    this.#notifySession(sessionId);
    this.#notifyRunner(userId, req.runnerId);
    return { sessionId, shareUrl: `${this.#opts.baseUrl}/session/${sessionId}` };
  }

  /**
   * Resolves once the session's worker has started (its session_start is
   * stored), with "ended" if it ends first and "timeout" after `timeoutMs`.
   */
  waitRunning(sessionId: string, timeoutMs: number): Promise<"running" | "ended" | "timeout"> {
    const state = () => {
      const s = this.store.sessions.get(sessionId);
      if (!s || s.status === "ended" || s.status === "error") return "ended";
      return s.status === "running" ? "running" : null;
    };
    const now = state();
    if (now) return Promise.resolve(now);
    return new Promise((resolve) => {
      let waiters = this.#statusWaiters.get(sessionId);
      if (!waiters) this.#statusWaiters.set(sessionId, waiters = new Set());
      const done = (v: "running" | "ended" | "timeout") => {
        clearTimeout(timer);
        waiters!.delete(check);
        if (waiters!.size === 0) this.#statusWaiters.delete(sessionId);
        resolve(v);
      };
      const check = () => {
        const v = state();
        if (v) done(v);
      };
      const timer = setTimeout(() => done("timeout"), timeoutMs);
      waiters.add(check);
    });
  }

  /** Ends a session on the relay's side (its runner is told to drop it when it asks). */
  abandonSession(sessionId: string, reason: string): void {
    const s = this.store.sessions.get(sessionId);
    if (!s) return;
    const status = this.#live.get(sessionId)?.view.status ?? s.status;
    if (status === "ended" || status === "error") return;
    this.#endSession(s, "error", reason);
  }

  /** Delivers a trigger into a running session through its runner. */
  async deliverTrigger(
    s: SessionRecord,
    trigger: DeliveredTrigger,
    instruction?: string,
  ): Promise<void> {
    if (s.status === "ended" || s.status === "error") throw sessionEnded();
    const link = this.#links.get(s.runnerId);
    if (!link) throw offline();
    const req: TriggerRequest = {
      sessionId: s.sessionId,
      trigger,
      ...(instruction ? { instruction } : {}),
    };
    await link.request("trigger", req, 30_000);
  }

  /** Sends a prompt, steer, follow-up, abort or end into a running session. */
  async input(userId: string, sessionId: string, kind: InputKind, text: string): Promise<void> {
    const s = this.store.sessions.getOwned(userId, sessionId);
    if (!s) throw notFound("Session");
    if (s.status === "ended" || s.status === "error") throw sessionEnded();
    const link = this.#links.get(s.runnerId);
    if (!link) throw offline();
    await link.request("input", { sessionId, kind, text }, 30_000);
  }

  /** The models a runner offers, minus the ones `userId` hid, and its models.json error if any. */
  async models(
    userId: string,
    runnerId: string,
  ): Promise<{ models: ModelInfo[]; error?: string }> {
    const link = this.connectedRunner(userId, runnerId);
    const res = await link.request("models", {}, 15_000) as { models?: unknown; error?: unknown };
    if (!Array.isArray(res?.models)) throw badRunnerAnswer("models");
    const hidden = new Set(this.store.settings.get<string[]>(userId, "hiddenModels", []));
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

  // -------------------------------------------------------------------------
  // Events from runners

  /**
   * Takes a batch of events from a runner. Re-sent events (seq already
   * received) are skipped. The rest wait for the next flush, which runs once
   * the socket messages of this I/O turn are read: every batch received in
   * the meantime, from every session, is committed in one transaction, then
   * acked and fanned out as one frame per viewer.
   */
  ingest(link: RunnerLink, msg: EventsMessage): void {
    let live = this.#live.get(msg.sessionId);
    if (!live || live.runnerId !== link.runnerId || live.userId !== link.userId) {
      const rec = this.store.sessions.get(msg.sessionId);
      if (!rec || rec.runnerId !== link.runnerId || rec.userId !== link.userId) {
        link.send({
          t: "error",
          code: "unknown_session",
          message: `Unknown session: '${msg.sessionId}'`,
          sessionId: msg.sessionId,
        });
        return;
      }
      live = this.#liveSession(rec);
    }
    let seq = live.receivedSeq;
    const before = seq;
    for (const ev of msg.events) {
      if (ev.seq <= seq) continue;
      if (ev.seq !== seq + 1) {
        this.log(`session ${live.id}: gap in events from runner (${seq} → ${ev.seq})`);
      }
      seq = ev.seq;
      let json = JSON.stringify({ seq: ev.seq, ts: ev.ts, e: ev.e });
      if (json.length > MAX_EVENT_BYTES) {
        json = JSON.stringify({
          seq: ev.seq,
          ts: ev.ts,
          e: { type: "event_too_large", originalType: ev.e.type, bytes: json.length },
        });
      }
      live.pending.push({ seq: ev.seq, json });
      if (STATEFUL_EVENTS.has(ev.e.type)) this.#patch(live, statePatch(live.view, ev.e));
    }
    live.receivedSeq = seq;
    if (seq === before) {
      // Nothing new (a re-send): the runner still wants to hear where we stand.
      if (live.pending.length === 0) {
        link.send({ t: "ack", sessionId: live.id, seq: live.lastSeq });
      }
      return;
    }
    this.#markDirty(live);
  }

  /** Adds a state change to the session's pending ones (and to its view). */
  #patch(live: LiveSession, patch: SessionPatch): void {
    live.pendingPatch = Object.assign(live.pendingPatch ?? {}, patch);
    if (patch.status) live.view.status = patch.status;
    if (patch.title !== undefined) live.view.title = patch.title;
  }

  #markDirty(live: LiveSession): void {
    this.#dirty.add(live);
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /**
   * Commits every pending event in one transaction, then acks each session's
   * runner and sends each live viewer one frame with the new events. Runs by
   * itself after each I/O turn, one commit at a time; what arrives meanwhile
   * goes into the next one.
   */
  flush(): void {
    this.#flushScheduled = false;
    if (this.#committing || this.#dirty.size === 0 || this.#closed) return;
    const at = new Date().toISOString();
    const work = [...this.#dirty].map((live) => {
      const w = { live, events: live.pending, patch: live.pendingPatch, seq: live.receivedSeq };
      live.pending = [];
      live.pendingPatch = null;
      return w;
    });
    this.#dirty.clear();
    this.#committing = this.#commit(work.map((w) => ({
      sessionId: w.live.id,
      events: w.events,
      lastSeq: w.seq,
      patch: w.patch,
      at,
    }))).then(
      () => this.#committed(work),
      (err) => this.#commitFailed(work, err),
    ).finally(() => {
      this.#committing = null;
      if (this.#dirty.size > 0) this.flush();
    });
  }

  /**
   * Resolves once everything received before the call is committed: the
   * commit in flight, then one with what was pending. (Events that keep
   * arriving do not hold it up; they are not acked yet anyway.)
   */
  async settle(): Promise<void> {
    for (let round = 0; round < 2; round++) {
      if (!this.#committing) this.flush();
      if (!this.#committing) return;
      await this.#committing;
    }
  }

  #committed(
    work: { live: LiveSession; events: StoredEvent[]; patch: SessionPatch | null; seq: number }[],
  ): void {
    for (const { live, events, patch, seq } of work) {
      this.#bump(live.userId);
      live.lastSeq = seq;
      live.touchedAt = Date.now();
      for (const f of events) live.ring.push(f);
      this.#links.get(live.runnerId)?.send({ t: "ack", sessionId: live.id, seq });
      if (events.length > 0) this.#broadcast(live, events);
      if (!patch) continue;
      if (patch.status === "ended" || patch.status === "error") {
        // An ended session receives no more triggers: its subscriptions go with it.
        this.store.triggers.deleteSubscriptionsOfSession(live.id);
      }
      if (patch.status) {
        for (const check of [...this.#statusWaiters.get(live.id) ?? []]) check();
      }
      this.#notifySession(live.id);
      if (patch.status === "ended" || patch.status === "error") {
        this.#notifyRunner(live.userId, live.runnerId);
      }
    }
  }

  /** Nothing of the batch was acked: drop it and make the runners send it again. */
  #commitFailed(work: { live: LiveSession }[], err: unknown): void {
    this.log(`storing events failed: ${err}`);
    for (const { live } of work) {
      live.pending = [];
      live.pendingPatch = null;
      this.#dirty.delete(live);
      live.receivedSeq = live.lastSeq;
      const rec = this.store.sessions.get(live.id);
      if (rec) live.view = { status: rec.status, title: rec.title };
      this.#links.get(live.runnerId)?.close(
        CloseCode.internalError,
        "Relay failed to store events",
      );
    }
  }

  /** Ends a session the runner lost or can no longer report on. */
  #endSession(s: SessionRecord, status: "ended" | "error", reason: string): void {
    const live = this.#liveSession(s);
    const seq = live.receivedSeq + 1;
    const e: SessionEventBody = { type: "session_end", reason: "lost", message: reason };
    live.receivedSeq = seq;
    live.pending.push({ seq, json: JSON.stringify({ seq, ts: Date.now(), e }) });
    this.#patch(live, {
      status,
      activity: "idle",
      endedAt: new Date().toISOString(),
      endReason: reason,
    });
    this.#markDirty(live);
  }

  #lastSeq(s: SessionRecord): number {
    return this.#live.get(s.sessionId)?.lastSeq ?? s.lastSeq;
  }

  #liveSession(s: SessionRecord): LiveSession {
    let live = this.#live.get(s.sessionId);
    if (!live) {
      const lastSeq = Math.max(s.lastSeq, this.store.events.maxSeq(s.sessionId));
      live = {
        id: s.sessionId,
        userId: s.userId,
        runnerId: s.runnerId,
        lastSeq,
        receivedSeq: lastSeq,
        pending: [],
        pendingPatch: null,
        view: { status: s.status, title: s.title },
        ring: new EventRing(this.#opts.eventBufferSize),
        subs: new Set(),
        touchedAt: Date.now(),
      };
      this.#live.set(s.sessionId, live);
    }
    return live;
  }

  #evictIdle(): void {
    const cutoff = Date.now() - 10 * 60_000;
    const gone: LiveSession[] = [];
    for (const live of this.#live.values()) {
      if (live.subs.size === 0 && live.touchedAt < cutoff && !this.#dirty.has(live)) {
        gone.push(live);
      }
    }
    // Its row answers for a session once it leaves memory: bring it up to date first.
    if (!this.#storeLastSeqs(gone)) return;
    for (const live of gone) this.#live.delete(live.id);
  }

  /** Writes the sessions' committed last seqs to their rows (see the constructor). */
  #storeLastSeqs(lives: Iterable<LiveSession>): boolean {
    const list = [...lives];
    if (list.length === 0) return true;
    try {
      this.store.tx(() => {
        for (const live of list) this.store.sessions.setLastSeq(live.id, live.lastSeq);
      });
      return true;
    } catch (err) {
      // The log still has the events; the next start catches the rows up.
      this.log(`storing sessions' last seq failed: ${err}`);
      return false;
    }
  }

  // -------------------------------------------------------------------------
  // Viewers

  addViewer(v: Viewer): void {
    let set = this.#viewersByUser.get(v.principal.userId);
    if (!set) this.#viewersByUser.set(v.principal.userId, set = new Set());
    if (!set.has(v)) this.#countViewers(1);
    set.add(v);
  }

  removeViewer(v: Viewer): void {
    for (const sub of v.subs.values()) this.unsubscribe(sub);
    const set = this.#viewersByUser.get(v.principal.userId);
    if (set?.delete(v)) this.#countViewers(-1);
    if (set?.size === 0) this.#viewersByUser.delete(v.principal.userId);
  }

  #spend(bytes: number): void {
    this.#turnBytes += bytes;
    if (this.#turnResetScheduled) return;
    this.#turnResetScheduled = true;
    setImmediate(() => {
      this.#turnResetScheduled = false;
      this.#turnBytes = 0;
    });
  }

  #countViewers(delta: number): void {
    this.#viewerCount += delta;
    this.#highWater = viewerHighWater(this.#viewerCount);
    this.#lowWater = this.#highWater / 4;
  }

  /**
   * Subscribes a viewer from `since`: it first gets every stored event after
   * `since` (pulled at the pace its socket drains), then live ones.
   */
  subscribe(v: Viewer, sessionId: string, since: number): Subscription {
    const rec = this.store.sessions.getOwned(v.principal.userId, sessionId);
    if (!rec) throw notFound("Session");
    const live = this.#liveSession(rec);
    const old = v.subs.get(sessionId);
    if (old) this.unsubscribe(old);
    const sub: Subscription = { viewer: v, sessionId, sent: since, live: false };
    v.subs.set(sessionId, sub);
    v.send({ t: "subscribed", sessionId, session: this.sessionInfo(rec) });
    if (since > live.lastSeq) {
      // The viewer holds more than the relay has (its data was replaced):
      // it must start over rather than wait for seqs that will mean other events.
      v.send({
        t: "reset",
        sessionId,
        reason: `Viewer is at seq ${since}, the log ends at ${live.lastSeq}`,
      });
      sub.sent = 0;
    }
    live.subs.add(sub);
    this.#pump(sub, live);
    return sub;
  }

  unsubscribe(sub: Subscription): void {
    this.#live.get(sub.sessionId)?.subs.delete(sub);
    this.#lagging.delete(sub);
    if (sub.viewer.subs.get(sub.sessionId) === sub) sub.viewer.subs.delete(sub.sessionId);
  }

  #broadcast(live: LiveSession, fresh: StoredEvent[]): void {
    if (live.subs.size === 0) return;
    const first = fresh[0]!.seq;
    const last = fresh[fresh.length - 1]!.seq;
    // Serialised once for every viewer of the session, in frames of at most
    // LIVE_FRAME_BYTES (one event bigger than that goes alone).
    const frames = liveFrames(fresh);
    const json = frames.map((f) => eventsFrame(live.id, f));
    for (const sub of live.subs) {
      if (!sub.live || sub.sent >= last) continue;
      if (sub.sent < first - 1) {
        sub.live = false;
        this.#addLagging(sub);
        continue;
      }
      for (let i = 0; i < frames.length; i++) {
        const events = frames[i]!;
        if (events[events.length - 1]!.seq <= sub.sent) continue;
        const buffered = sub.viewer.bufferedAmount;
        if (
          this.#turnBytes > VIEWER_QUEUE_BUDGET ||
          (buffered > 0 && buffered + json[i]!.length > this.#highWater)
        ) {
          // Too much waiting: the rest comes from the log at the pace of its socket.
          sub.live = false;
          this.#addLagging(sub);
          break;
        }
        const out = events[0]!.seq > sub.sent
          ? json[i]!
          : eventsFrame(live.id, events.filter((f) => f.seq > sub.sent));
        sub.viewer.sendRaw(out);
        this.#spend(out.length);
        sub.sent = events[events.length - 1]!.seq;
      }
    }
  }

  /** Sends stored events a viewer has not seen yet while its socket has room. */
  #pump(sub: Subscription, live: LiveSession): void {
    while (sub.sent < live.lastSeq) {
      if (sub.viewer.closed) return;
      if (sub.viewer.bufferedAmount > this.#lowWater || this.#turnBytes > VIEWER_QUEUE_BUDGET) {
        this.#addLagging(sub);
        return;
      }
      const limit = sub.readLimit ?? CATCH_UP_EVENTS;
      const chunk = live.ring.after(sub.sent, limit) ??
        this.store.events.after(sub.sessionId, sub.sent, limit);
      if (chunk.length === 0) break;
      let read = 0;
      for (const ev of chunk) read += ev.json.length;
      sub.readLimit = Math.max(
        8,
        Math.min(
          CATCH_UP_EVENTS,
          Math.ceil((this.#lowWater + CATCH_UP_BYTES) * chunk.length / read),
        ),
      );
      // As many frames from this read as the socket takes (not one frame per read).
      for (let i = 0; i < chunk.length;) {
        let bytes = 0;
        let n = i;
        while (n < chunk.length && bytes < CATCH_UP_BYTES) bytes += chunk[n++]!.json.length;
        const out = eventsFrame(sub.sessionId, chunk.slice(i, n));
        sub.viewer.sendRaw(out);
        this.#spend(out.length);
        sub.sent = chunk[n - 1]!.seq;
        i = n;
        if (sub.viewer.bufferedAmount > this.#lowWater || this.#turnBytes > VIEWER_QUEUE_BUDGET) {
          break;
        }
      }
    }
    this.#lagging.delete(sub);
    if (!sub.live) {
      sub.live = true;
      sub.viewer.send({ t: "caught_up", sessionId: sub.sessionId, seq: sub.sent });
    }
  }

  #addLagging(sub: Subscription): void {
    this.#lagging.add(sub);
    this.#lagDelay = 1;
    this.#scheduleLagging();
  }

  #scheduleLagging(): void {
    if (this.#lagTimer !== null || this.#closed) return;
    this.#lagTimer = setTimeout(() => {
      this.#lagTimer = null;
      this.#pumpLagging();
    }, this.#lagDelay);
  }

  /**
   * Feeds the lagging viewers whose sockets drained. Polled (Deno's WebSocket
   * has no drain event): every millisecond while some make progress, backing
   * off to 50 ms while all are stuck, so a catch-up runs at the speed of the
   * socket and a viewer that never reads costs next to nothing.
   */
  #pumpLagging(): void {
    let progressed = false;
    for (const sub of this.#lagging) {
      const live = this.#live.get(sub.sessionId);
      if (!live || sub.viewer.closed) {
        this.#lagging.delete(sub);
        continue;
      }
      if (sub.viewer.bufferedAmount <= this.#lowWater) {
        this.#pump(sub, live);
        progressed = true;
      }
    }
    this.#lagDelay = progressed ? 1 : Math.min(50, this.#lagDelay * 2);
    if (this.#lagging.size > 0) this.#scheduleLagging();
  }

  // -------------------------------------------------------------------------
  // Feed of runners and sessions

  #notifyRunner(userId: string, runnerId: string): void {
    const viewers = this.#viewersByUser.get(userId);
    if (!viewers) return;
    const runner = this.runnerInfo(runnerId);
    if (!runner) return;
    for (const v of viewers) if (v.watching) v.send({ t: "runner", runner });
  }

  #notifySession(sessionId: string): void {
    const s = this.store.sessions.get(sessionId);
    if (!s) return;
    this.#bump(s.userId);
    const viewers = this.#viewersByUser.get(s.userId);
    if (!viewers) return;
    const session = this.sessionInfo(s);
    for (const v of viewers) if (v.watching) v.send({ t: "session", session });
  }

  /**
   * A number that changes whenever any session of `userId` changes (state,
   * pin, title, last seq): listings can be reused while it stays the same.
   */
  sessionsVersion(userId: string): number {
    return this.#versions.get(userId) ?? 0;
  }

  #bump(userId: string): void {
    this.#versions.set(userId, (this.#versions.get(userId) ?? 0) + 1);
  }

  /** Tells the owner's feed that a session changed outside the event log (a pin). */
  sessionChanged(sessionId: string): void {
    this.#notifySession(sessionId);
  }

  /**
   * Gives a session of `userId` a new title (checked by the caller) and tells
   * the owner's feed; unknown and foreign ids throw the same 404. A title the
   * session's first prompt would give it later no longer applies.
   */
  async renameSession(userId: string, sessionId: string, title: string): Promise<SessionInfo> {
    if (!this.store.sessions.getOwned(userId, sessionId)) throw notFound("Session");
    const live = this.#live.get(sessionId);
    if (live) {
      live.view.title = title;
      if (live.pendingPatch) delete live.pendingPatch.title;
      // A commit in flight may still carry a title taken from the first prompt: ours goes after.
      await this.#committing;
    }
    if (!this.store.sessions.getOwned(userId, sessionId)) throw notFound("Session");
    this.store.sessions.update(sessionId, { title }, new Date().toISOString());
    this.#notifySession(sessionId);
    return this.sessionInfo(this.store.sessions.get(sessionId)!);
  }

  // -------------------------------------------------------------------------
  // Credentials

  /** Closes every socket opened with a key that was just revoked. */
  revokeKey(keyId: string): void {
    for (const link of [...this.#links.values()]) {
      if (link.keyId === keyId) link.close(CloseCode.revoked, "API key revoked");
    }
    for (const set of this.#viewersByUser.values()) {
      for (const v of [...set]) {
        if (v.principal.keyId === keyId) v.close(CloseCode.revoked, "API key revoked");
      }
    }
  }

  /**
   * Closes the runner and viewer sockets (all, or those of `userId`) whose
   * browser session or key no longer holds: expired, signed out, revoked by
   * a password change, or removed some way the relay was not told of. Code
   * 4401; each credential is looked up once.
   */
  closeLapsed(live: (c: Credential) => boolean, userId?: string): void {
    const seen = new Map<string, boolean>();
    const holds = (c: Credential): boolean => {
      const id = `${c.via}:${c.via === "key" ? c.keyId : c.authSessionId}`;
      let ok = seen.get(id);
      if (ok === undefined) seen.set(id, ok = live(c));
      return ok;
    };
    for (const link of [...this.#links.values()]) {
      if (link.keyId === null || (userId !== undefined && link.userId !== userId)) continue;
      if (!holds({ via: "key", keyId: link.keyId, authSessionId: null })) {
        link.close(CloseCode.revoked, "API key expired or revoked");
      }
    }
    const sets = userId === undefined
      ? [...this.#viewersByUser.values()]
      : [this.#viewersByUser.get(userId) ?? new Set<Viewer>()];
    for (const set of sets) {
      for (const v of [...set]) {
        if (holds(v.principal)) continue;
        v.close(
          CloseCode.revoked,
          v.principal.via === "cookie"
            ? "Signed out or session expired"
            : "API key expired or revoked",
        );
      }
    }
  }

  get protocolVersion(): number {
    return PROTOCOL_VERSION;
  }

  /** Stores what is pending, closes every socket and stops the timers. */
  async close(): Promise<void> {
    if (this.#closed) return;
    await this.settle();
    this.#closed = true;
    this.#storeLastSeqs(this.#live.values());
    for (const t of this.#timers) clearInterval(t);
    if (this.#lagTimer !== null) clearTimeout(this.#lagTimer);
    for (const link of [...this.#links.values()]) {
      link.close(CloseCode.goingAway, "Relay shutting down");
    }
    for (const set of this.#viewersByUser.values()) {
      for (const v of [...set]) v.close(CloseCode.goingAway, "Relay shutting down");
    }
  }
}

/** `events` in groups of at most LIVE_FRAME_BYTES of JSON (a bigger event alone). */
function liveFrames(events: StoredEvent[]): StoredEvent[][] {
  let bytes = 0;
  for (const ev of events) bytes += ev.json.length;
  if (bytes <= LIVE_FRAME_BYTES) return [events];
  const out: StoredEvent[][] = [];
  let group: StoredEvent[] = [];
  bytes = 0;
  for (const ev of events) {
    if (group.length > 0 && bytes + ev.json.length > LIVE_FRAME_BYTES) {
      out.push(group);
      group = [];
      bytes = 0;
    }
    group.push(ev);
    bytes += ev.json.length;
  }
  out.push(group);
  return out;
}

/** The `events` frame for a run of stored events, built without re-serialising them. */
export function eventsFrame(sessionId: string, events: StoredEvent[]): string {
  let body = "";
  for (let i = 0; i < events.length; i++) body += (i ? "," : "") + events[i]!.json;
  return `{"t":"events","sessionId":${JSON.stringify(sessionId)},"events":[${body}]}`;
}

/** How an event moves the session's listed state. */
function statePatch(
  rec: { status: SessionStatus; title: string },
  e: SessionEventBody,
): SessionPatch {
  switch (e.type) {
    case "session_start": {
      // A session the relay already ended (say, it started too late) stays ended.
      if (rec.status === "ended" || rec.status === "error") return {};
      // A worker that just started has no turn in flight, whatever the last
      // one did (a runner that crashed mid-turn never sent its agent_end).
      const patch: SessionPatch = { status: "running", activity: "idle" };
      if (typeof e.cwd === "string") patch.cwd = e.cwd;
      if (isModelRef(e.model)) patch.model = { provider: e.model.provider, id: e.model.id };
      return patch;
    }
    case "agent_start":
      return { activity: "working" };
    case "agent_end":
      return { activity: "idle" };
    case "session_sleep":
    case "session_waking":
      if (rec.status === "ended" || rec.status === "error") return {};
      return { activity: e.type === "session_sleep" ? "asleep" : "waking" };
    case "message_start": {
      const m = e.message as { role?: string; content?: unknown } | undefined;
      if (rec.title || m?.role !== "user") return {};
      const title = titleFrom(textOf(m.content));
      return title ? { title } : {};
    }
    case "session_end": {
      const failed = e.reason === "crashed" || e.reason === "error" || e.reason === "lost";
      return {
        status: failed ? "error" : "ended",
        activity: "idle",
        endedAt: new Date().toISOString(),
        endReason: typeof e.message === "string" ? e.message : String(e.reason ?? "ended"),
      };
    }
  }
  return {};
}

/** A runner answered something that is not the protocol's shape. */
function badRunnerAnswer(op: string) {
  return rejected("bad_runner_answer", `Runner sent an invalid answer to '${op}'`);
}

function isModelInfo(v: unknown): v is ModelInfo {
  return isModelRef(v) && v.provider.length <= 200 && v.id.length <= 200;
}

function isModelRef(v: unknown): v is ModelRef {
  return typeof v === "object" && v !== null &&
    typeof (v as ModelRef).provider === "string" && typeof (v as ModelRef).id === "string";
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((c) => (c && typeof c.text === "string" ? c.text : "")).join(" ");
  }
  return "";
}

/** A one-line title from a prompt. */
export function titleFrom(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 80 ? line.slice(0, 79) + "…" : line;
}

/** Checks the shape of a runner's `events` message; returns a reason when it is wrong. */
export function invalidEvents(msg: Partial<EventsMessage>): string | null {
  if (typeof msg.sessionId !== "string" || msg.sessionId.length > 100) return "bad sessionId";
  if (!Array.isArray(msg.events)) return "events must be an array";
  for (const ev of msg.events as Partial<SessionEvent>[]) {
    if (!ev || !Number.isSafeInteger(ev.seq) || (ev.seq as number) < 1) return "bad seq";
    if (typeof ev.ts !== "number") return "bad ts";
    if (!ev.e || typeof ev.e !== "object" || typeof ev.e.type !== "string") return "bad event";
  }
  return null;
}
