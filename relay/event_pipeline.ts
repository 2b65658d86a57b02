/**
 * Session events from runners to the log: ingest (in order, re-sends
 * skipped), group commit through the store or the writer thread, acks, and
 * the in-memory tail of each session that viewers are fed from.
 *
 * Over 400 lines: ingest, loading a session into memory, the group commit
 * and eviction all change the same in-memory sessions, and their order
 * (one commit at a time, loads shared) is kept in this one place.
 *
 * @module
 */
import type { EventsMessage, SessionEventBody, SessionStatus } from "../shared/protocol.ts";
import { CloseCode } from "../shared/protocol.ts";
import { type Clock, isoNow, systemClock } from "./_clock.ts";
import type { RunnerConnection } from "./runner_registry.ts";
import { EventRing } from "./session_log.ts";
import { STATEFUL_EVENTS, statePatch } from "./session_state.ts";
import type { CommitEvents } from "./store/event_writer.ts";
import type { AsyncStore, SessionPatch, SessionRecord, StoredEvent } from "./store/mod.ts";

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
  store: AsyncStore;
  /** Events kept in memory per session (`BATON_RELAY_EVENT_BUFFER_SIZE`). */
  eventBufferSize: number;
  /** Writes committed events (`inlineCommit`, `adaptiveCommit` or PostgreSQL's committer). */
  commit: CommitEvents;
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
  /**
   * Sessions being loaded into memory (their log's last seq is read): a
   * second open waits for the first rather than load them twice.
   */
  readonly #opening = new Map<string, Promise<LiveSession | null>>();
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
    this.#commit = options.commit;
  }

  /** Brings stored last seqs up to the log and starts evicting idle sessions. */
  async start(): Promise<void> {
    // A session's stored last seq is written when its state changes, when it
    // leaves memory and at shutdown, not with every commit: after a crash it
    // lags the log, which has every acknowledged event.
    const caughtUp = await this.#opts.store.sessions.catchUpLastSeqs();
    if (caughtUp > 0) this.#log(`brought ${caughtUp} sessions' last seq up to their event logs`);
    this.#evictTimer ??= this.#clock.setInterval(() => void this.evictIdle(), EVICT_EVERY_MS);
  }

  #log(line: string): void {
    this.#opts.log?.(line);
  }

  /**
   * The session's in-memory state, loaded from its row and log when absent;
   * null when it was dropped (deleted, or its spawn failed) while it loaded.
   */
  open(s: SessionRecord): Promise<LiveSession | null> {
    const live = this.#live.get(s.sessionId);
    if (live) return Promise.resolve(live);
    let loading = this.#opening.get(s.sessionId);
    if (!loading) {
      loading = this.#load(s);
      this.#opening.set(s.sessionId, loading);
      const done = loading;
      const forget = () => {
        if (this.#opening.get(s.sessionId) === done) this.#opening.delete(s.sessionId);
      };
      done.then(forget, forget);
    }
    return loading;
  }

  async #load(s: SessionRecord): Promise<LiveSession | null> {
    const { store } = this.#opts;
    const maxSeq = await store.events.maxSeq(s.sessionId);
    const eventBytes = s.eventBytes ?? (await store.sessions.get(s.sessionId))?.eventBytes ?? 0;
    // Dropped meanwhile (drop forgets the load): nothing may take its events.
    if (!this.#opening.has(s.sessionId)) return null;
    const already = this.#live.get(s.sessionId);
    if (already) return already;
    const lastSeq = Math.max(s.lastSeq, maxSeq);
    const live: LiveSession = {
      id: s.sessionId,
      userId: s.userId,
      runnerId: s.runnerId,
      lastSeq,
      eventBytes,
      receivedSeq: lastSeq,
      pending: [],
      pendingPatch: null,
      view: { status: s.status, title: s.title },
      ring: new EventRing(this.#opts.eventBufferSize),
      touchedAt: this.#clock.now(),
    };
    this.#live.set(s.sessionId, live);
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
   *
   * A session in memory takes the batch at once; another one is loaded
   * first, and the promise says when the batch was taken: the caller must
   * hand a link's next batch in only then (runner_socket.ts queues them).
   */
  ingest(link: IngestLink, msg: EventsMessage): void | Promise<void> {
    const live = this.#live.get(msg.sessionId);
    if (live && live.runnerId === link.runnerId && live.userId === link.userId) {
      return this.#take(live, link, msg);
    }
    return this.#ingestCold(link, msg);
  }

  /** Ingest of a session not in memory: its row is checked, then it is loaded. */
  async #ingestCold(link: IngestLink, msg: EventsMessage): Promise<void> {
    const rec = await this.#opts.store.sessions.get(msg.sessionId);
    const live = rec && rec.runnerId === link.runnerId && rec.userId === link.userId
      ? await this.open(rec)
      : null;
    if (!live) {
      link.send({
        t: "error",
        code: "unknown_session",
        message: `Unknown session: '${msg.sessionId}'`,
        sessionId: msg.sessionId,
      });
      return;
    }
    this.#take(live, link, msg);
  }

  #take(live: LiveSession, link: IngestLink, msg: EventsMessage): void {
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

  /**
   * Appends an event the relay writes itself (not the runner), with its
   * state change; false when the session was dropped meanwhile.
   */
  async inject(s: SessionRecord, e: SessionEventBody, patch: SessionPatch): Promise<boolean> {
    // In memory: taken at once, in order with what the runner sends.
    const live = this.#live.get(s.sessionId) ?? await this.open(s);
    if (!live) return false;
    const seq = live.receivedSeq + 1;
    live.receivedSeq = seq;
    live.pending.push({ seq, json: JSON.stringify({ seq, ts: this.#clock.now(), e }) });
    this.#patch(live, patch);
    this.#markDirty(live);
    return true;
  }

  /**
   * Takes events another relay node committed (its runner is held there):
   * the tail moves to them and they are answered for from memory. Answers
   * the ones new here (none while this node ingests the session itself: its
   * own commits come back over the bus too). A jump past the tail empties
   * the ring, so viewers read what is between from the log.
   */
  mirror(sessionId: string, events: readonly StoredEvent[]): StoredEvent[] {
    const live = this.#live.get(sessionId);
    if (!live || live.pending.length > 0 || live.receivedSeq !== live.lastSeq) return [];
    const fresh = events.filter((e) => e.seq > live.lastSeq);
    if (fresh.length === 0) return [];
    if (fresh[0]!.seq !== live.lastSeq + 1) live.ring.clear();
    for (const e of fresh) {
      live.ring.push(e);
      live.eventBytes += e.json.length;
    }
    live.lastSeq = live.receivedSeq = fresh[fresh.length - 1]!.seq;
    live.touchedAt = this.#clock.now();
    return fresh;
  }

  /**
   * Moves a session's tail up to its log (another node committed events this
   * one did not hear of); true when it moved. Not while this node ingests it.
   */
  async catchUp(sessionId: string): Promise<boolean> {
    const live = this.#live.get(sessionId);
    if (!live) return false;
    const maxSeq = await this.#opts.store.events.maxSeq(sessionId);
    if (this.#live.get(sessionId) !== live) return false;
    if (live.pending.length > 0 || live.receivedSeq !== live.lastSeq) return false;
    if (maxSeq <= live.lastSeq) return false;
    live.ring.clear();
    live.lastSeq = live.receivedSeq = maxSeq;
    live.touchedAt = this.#clock.now();
    return true;
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
    // A load under way ends with nothing (see #load).
    this.#opening.delete(sessionId);
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
    ).catch((err) => this.#log(`after a commit: ${err}`)).finally(() => {
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

  /**
   * Nothing of the batch was acked: drop it and make the runners send it
   * again. (The commit stays "in flight" until the views are back to the
   * stored state, so no other commit runs meanwhile.)
   */
  async #commitFailed(work: { live: LiveSession }[], err: unknown): Promise<void> {
    this.#log(`storing events failed: ${err}`);
    for (const { live } of work) {
      live.pending = [];
      live.pendingPatch = null;
      this.#dirty.delete(live);
      live.receivedSeq = live.lastSeq;
      this.#opts.runners.link(live.runnerId)?.close(
        CloseCode.internalError,
        "Relay failed to store events",
      );
    }
    for (const { live } of work) {
      const rec = await this.#opts.store.sessions.get(live.id).catch(() => undefined);
      // Unless events came in again meanwhile (a new link): the view is theirs then.
      if (rec && live.pending.length === 0) live.view = { status: rec.status, title: rec.title };
    }
  }

  /** Lets sessions without viewers, pending events or recent events leave memory. */
  async evictIdle(): Promise<void> {
    const cutoff = this.#clock.now() - EVICT_IDLE_MS;
    const idle = (live: LiveSession) =>
      !this.#opts.watched?.(live.id) && live.touchedAt < cutoff && !this.#dirty.has(live) &&
      this.#live.get(live.id) === live;
    const gone = [...this.#live.values()].filter(idle);
    // Its row answers for a session once it leaves memory: bring it up to date first.
    if (!await this.#storeLastSeqs(gone)) return;
    // One that took events or a viewer while the rows were written stays.
    for (const live of gone) if (idle(live)) this.#live.delete(live.id);
  }

  /** Writes the sessions' committed last seqs to their rows (see start). */
  async #storeLastSeqs(lives: Iterable<LiveSession>): Promise<boolean> {
    const list = [...lives].map((l) => ({ id: l.id, seq: l.lastSeq, eventBytes: l.eventBytes }));
    if (list.length === 0) return true;
    try {
      await this.#opts.store.sessions.setLastSeqs(list);
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
  storeTails(): Promise<boolean> {
    return this.#storeLastSeqs(this.#live.values());
  }

  /** Stores what is pending and every session's last seq, and stops. */
  async close(): Promise<void> {
    await this.settle();
    this.#closed = true;
    await this.#storeLastSeqs(this.#live.values());
    if (this.#evictTimer !== null) this.#clock.clearInterval(this.#evictTimer);
    this.#evictTimer = null;
  }
}
