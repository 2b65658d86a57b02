/**
 * Session events from runners to the log: ingest (in order, re-sends
 * skipped), group commit through the store or the writer thread, acks, and
 * the in-memory tail of each session that viewers are fed from.
 *
 * @module
 */
import type { EventsMessage, SessionEventBody, SessionStatus } from "../shared/protocol.ts";
import { CloseCode } from "../shared/protocol.ts";
import { type Clock, isoNow, systemClock } from "./_clock.ts";
import type { RunnerConnection } from "./runner_registry.ts";
import { EventRing } from "./session_log.ts";
import { STATEFUL_EVENTS, statePatch } from "./session_state.ts";
import { type CommitEvents, inlineCommit } from "./store/event_writer.ts";
import type { SessionPatch, SessionRecord, Store, StoredEvent } from "./store/mod.ts";

/** Largest single event body the relay stores; bigger ones are replaced by a marker. */
export const MAX_EVENT_BYTES = 2 * 1024 * 1024;
/** How often sessions are looked at for leaving memory (ms). */
const EVICT_EVERY_MS = 60_000;
/** How long a session without viewers or events stays in memory (ms). */
const EVICT_IDLE_MS = 10 * 60_000;

/** In-memory state of a session that has viewers or recent events. */
export interface LiveSession {
  readonly id: string;
  readonly userId: string;
  readonly runnerId: string;
  /** Highest seq committed to the database (what acks and viewers see). */
  lastSeq: number;
  /** Size of the committed events' JSON (the row's `eventBytes` lags it; see storeTails). */
  eventBytes: number;
  /** Highest seq received from the runner: committed, or pending in `pending`. */
  receivedSeq: number;
  /** Events received but not yet committed; the next flush stores, acks and fans them out. */
  pending: StoredEvent[];
  /** How the pending events change the session's listed state. */
  pendingPatch: SessionPatch | null;
  /** The session's status and title once everything received is committed. */
  view: { status: SessionStatus; title: string };
  /** The last committed events, for viewers catching up. */
  readonly ring: EventRing;
  touchedAt: number;
}

/** One session's share of a commit that is now durable and acked. */
export interface Committed {
  sessionId: string;
  userId: string;
  runnerId: string;
  /** The new events, in seq order (empty when only the state changed). */
  events: StoredEvent[];
  /** How they changed the session's listed state. */
  patch: SessionPatch | null;
}

/** One session's share of the commit in flight. */
type CommitWork = {
  live: LiveSession;
  events: StoredEvent[];
  patch: SessionPatch | null;
  seq: number;
  bytes: number;
};

/** The runner side of the pipeline: acks go out through it. */
export type IngestLink = Pick<RunnerConnection, "runnerId" | "userId" | "send">;

/** Options of {@linkcode EventPipeline}. */
export interface EventPipelineOptions {
  store: Store;
  /** Events kept in memory per session (`BATON_RELAY_EVENT_BUFFER_SIZE`). */
  eventBufferSize: number;
  /** Writes committed events (default: on this thread, through the store). */
  commit?: CommitEvents;
  /** The runners' links: acks go to them; a failed commit closes them. */
  runners: { link(runnerId: string): Pick<RunnerConnection, "send" | "close"> | undefined };
  /** Called for each session of a commit once it is durable and its runner acked. */
  onCommitted?: (c: Committed) => void;
  /** Whether a session has viewers: it then stays in memory. */
  watched?: (sessionId: string) => boolean;
  log?: (line: string) => void;
  clock?: Clock;
}

/** Takes runners' events, commits them in order and keeps each session's tail. */
export class EventPipeline {
  readonly #opts: EventPipelineOptions;
  readonly #clock: Clock;
  readonly #commit: CommitEvents;
  readonly #live = new Map<string, LiveSession>();
  /** The sessions in memory, read-only (`GET /metrics` counts them at scrape time). */
  readonly liveSessions: ReadonlyMap<string, LiveSession> = this.#live;
  /** Sessions with events waiting for the next flush. */
  readonly #dirty = new Set<LiveSession>();
  #flushScheduled = false;
  /** The commit in flight (one at a time, so events are stored in order). */
  #committing: Promise<void> | null = null;
  #evictTimer: number | null = null;
  #closed = false;

  constructor(options: EventPipelineOptions) {
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
    this.#commit = options.commit ?? inlineCommit(options.store);
  }

  /** Brings stored last seqs up to the log and starts evicting idle sessions. */
  start(): void {
    // A session's stored last seq is written when its state changes, when it
    // leaves memory and at shutdown, not with every commit: after a crash it
    // lags the log, which has every acknowledged event.
    const caughtUp = this.#opts.store.sessions.catchUpLastSeqs();
    if (caughtUp > 0) this.#log(`brought ${caughtUp} sessions' last seq up to their event logs`);
    this.#evictTimer ??= this.#clock.setInterval(() => this.evictIdle(), EVICT_EVERY_MS);
  }

  #log(line: string): void {
    this.#opts.log?.(line);
  }

  /** The session's in-memory state, loaded from its row and log when absent. */
  open(s: SessionRecord): LiveSession {
    let live = this.#live.get(s.sessionId);
    if (!live) {
      const lastSeq = Math.max(s.lastSeq, this.#opts.store.events.maxSeq(s.sessionId));
      live = {
        id: s.sessionId,
        userId: s.userId,
        runnerId: s.runnerId,
        lastSeq,
        eventBytes: s.eventBytes ?? this.#opts.store.sessions.get(s.sessionId)?.eventBytes ?? 0,
        receivedSeq: lastSeq,
        pending: [],
        pendingPatch: null,
        view: { status: s.status, title: s.title },
        ring: new EventRing(this.#opts.eventBufferSize),
        touchedAt: this.#clock.now(),
      };
      this.#live.set(s.sessionId, live);
    }
    return live;
  }

  /** The session's in-memory state, if it is in memory. */
  get(sessionId: string): LiveSession | undefined {
    return this.#live.get(sessionId);
  }

  /** Highest committed seq of a session (its row's may lag while it is in memory). */
  lastSeq(s: SessionRecord): number {
    return this.#live.get(s.sessionId)?.lastSeq ?? s.lastSeq;
  }

  /** The status the session has once everything received is committed. */
  statusOf(sessionId: string): SessionStatus | undefined {
    return this.#live.get(sessionId)?.view.status;
  }

  /**
   * Takes a batch of events from a runner. Re-sent events (seq already
   * received) are skipped. The rest wait for the next flush, which runs once
   * the socket messages of this I/O turn are read: every batch received in
   * the meantime, from every session, is committed in one transaction, then
   * acked and fanned out as one frame per viewer.
   */
  ingest(link: IngestLink, msg: EventsMessage): void {
    let live = this.#live.get(msg.sessionId);
    if (!live || live.runnerId !== link.runnerId || live.userId !== link.userId) {
      const rec = this.#opts.store.sessions.get(msg.sessionId);
      if (!rec || rec.runnerId !== link.runnerId || rec.userId !== link.userId) {
        link.send({
          t: "error",
          code: "unknown_session",
          message: `Unknown session: '${msg.sessionId}'`,
          sessionId: msg.sessionId,
        });
        return;
      }
      live = this.open(rec);
    }
    let seq = live.receivedSeq;
    const before = seq;
    for (const ev of msg.events) {
      if (ev.seq <= seq) continue;
      if (ev.seq !== seq + 1) {
        this.#log(`session ${live.id}: gap in events from runner (${seq} → ${ev.seq})`);
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
      if (STATEFUL_EVENTS.has(ev.e.type)) {
        this.#patch(live, statePatch(live.view, ev.e, isoNow(this.#clock)));
      }
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

  /** Appends an event the relay writes itself (not the runner), with its state change. */
  inject(s: SessionRecord, e: SessionEventBody, patch: SessionPatch): void {
    const live = this.open(s);
    const seq = live.receivedSeq + 1;
    live.receivedSeq = seq;
    live.pending.push({ seq, json: JSON.stringify({ seq, ts: this.#clock.now(), e }) });
    this.#patch(live, patch);
    this.#markDirty(live);
  }

  /**
   * Sets the title a session shows once its events are committed, over one
   * its first prompt would give it; false when the session is not in memory.
   */
  retitle(sessionId: string, title: string): boolean {
    const live = this.#live.get(sessionId);
    if (!live) return false;
    live.view.title = title;
    if (live.pendingPatch) delete live.pendingPatch.title;
    return true;
  }

  /** Forgets a session (its spawn failed): what is pending is dropped, nothing more is taken. */
  drop(sessionId: string): void {
    const live = this.#live.get(sessionId);
    if (!live) return;
    live.pending = [];
    live.pendingPatch = null;
    this.#dirty.delete(live);
    this.#live.delete(sessionId);
  }

  /** The commit in flight, if any (it may still carry events of a session being changed). */
  inFlight(): Promise<void> | null {
    return this.#committing;
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
      this.#clock.setImmediate(() => this.flush());
    }
  }

  /**
   * Commits every pending event in one transaction, then acks each session's
   * runner and hands each session's new events on (to the viewers). Runs by
   * itself after each I/O turn, one commit at a time; what arrives meanwhile
   * goes into the next one.
   */
  flush(): void {
    this.#flushScheduled = false;
    if (this.#committing || this.#dirty.size === 0 || this.#closed) return;
    const at = isoNow(this.#clock);
    const work = [...this.#dirty].map((live): CommitWork => {
      const { pending: events, pendingPatch: patch, receivedSeq: seq } = live;
      const w = { live, events, patch, seq, bytes: live.eventBytes };
      for (const e of events) w.bytes += e.json.length;
      live.pending = [];
      live.pendingPatch = null;
      return w;
    });
    this.#dirty.clear();
    this.#committing = this.#commit(work.map((w) => ({
      sessionId: w.live.id,
      events: w.events,
      lastSeq: w.seq,
      eventBytes: w.bytes,
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

  #committed(work: CommitWork[]): void {
    for (const { live, events, patch, seq, bytes } of work) {
      live.lastSeq = seq;
      live.eventBytes = bytes;
      live.touchedAt = this.#clock.now();
      for (const f of events) live.ring.push(f);
      this.#opts.runners.link(live.runnerId)?.send({ t: "ack", sessionId: live.id, seq });
      this.#opts.onCommitted?.({
        sessionId: live.id,
        userId: live.userId,
        runnerId: live.runnerId,
        events,
        patch,
      });
    }
  }

  /** Nothing of the batch was acked: drop it and make the runners send it again. */
  #commitFailed(work: { live: LiveSession }[], err: unknown): void {
    this.#log(`storing events failed: ${err}`);
    for (const { live } of work) {
      live.pending = [];
      live.pendingPatch = null;
      this.#dirty.delete(live);
      live.receivedSeq = live.lastSeq;
      const rec = this.#opts.store.sessions.get(live.id);
      if (rec) live.view = { status: rec.status, title: rec.title };
      this.#opts.runners.link(live.runnerId)?.close(
        CloseCode.internalError,
        "Relay failed to store events",
      );
    }
  }

  /** Lets sessions without viewers, pending events or recent events leave memory. */
  evictIdle(): void {
    const cutoff = this.#clock.now() - EVICT_IDLE_MS;
    const gone: LiveSession[] = [];
    for (const live of this.#live.values()) {
      if (
        !this.#opts.watched?.(live.id) && live.touchedAt < cutoff && !this.#dirty.has(live)
      ) {
        gone.push(live);
      }
    }
    // Its row answers for a session once it leaves memory: bring it up to date first.
    if (!this.#storeLastSeqs(gone)) return;
    for (const live of gone) this.#live.delete(live.id);
  }

  /** Writes the sessions' committed last seqs to their rows (see start). */
  #storeLastSeqs(lives: Iterable<LiveSession>): boolean {
    const list = [...lives];
    if (list.length === 0) return true;
    const { store } = this.#opts;
    try {
      store.tx(() => {
        for (const live of list) {
          store.sessions.setLastSeq(live.id, live.lastSeq, live.eventBytes);
        }
      });
      return true;
    } catch (err) {
      // The log still has the events; the next start catches the rows up.
      this.#log(`storing sessions' last seq failed: ${err}`);
      return false;
    }
  }

  /**
   * Writes the last seq and log size of every session in memory to its row,
   * so that the rows answer for every session (retention weighs them).
   */
  storeTails(): boolean {
    return this.#storeLastSeqs(this.#live.values());
  }

  /** Stores what is pending and every session's last seq, and stops. */
  async close(): Promise<void> {
    await this.settle();
    this.#closed = true;
    this.#storeLastSeqs(this.#live.values());
    if (this.#evictTimer !== null) this.#clock.clearInterval(this.#evictTimer);
    this.#evictTimer = null;
  }
}
