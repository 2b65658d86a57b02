/**
 * Session events to viewers: subscriptions from a `seq`, catch-up from the
 * ring or the log at the pace of each socket, live broadcast of committed
 * events in shared frames, and the bounded send queues that keep slow
 * viewers from growing the relay's memory.
 *
 * Over 400 lines: the catch-up pump (from the ring, or from the log read
 * asynchronously) and the live broadcast share each subscription's state,
 * and their hand-over is what keeps a viewer's stream free of gaps.
 *
 * @module
 */
import type { RelayToViewer, SessionInfo } from "../shared/protocol.ts";
import { type Clock, systemClock } from "./_clock.ts";
import type { StoredEvent } from "./store/mod.ts";

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
/** Most events read from the ring or the log per catch-up step. */
export const CATCH_UP_EVENTS = 500;
/**
 * Most bytes in one catch-up frame. What the relay keeps after many viewers
 * catch up at once grows with the frame size (Deno's per-frame buffers and
 * malloc): 1,000 viewers catching up on 540 KB each left it 555 MB larger
 * with 512 KB frames, 185 MB with 64 KB ones. A 10,000-event replay still
 * takes ~70 ms: one read of the log feeds several frames.
 */
export const CATCH_UP_BYTES = 64 * 1024;
/**
 * Most bytes of events in one live frame. A batch bigger than this (a runner
 * that fell behind) goes out in several frames, so a viewer's socket never
 * gets a megabytes-long frame on top of its high water.
 */
export const LIVE_FRAME_BYTES = 128 * 1024;
/**
 * Most bytes of events one catch-up read of the log takes (at least one
 * event, whatever its size): what one read feeds is a few frames, since a
 * lagging socket takes little at a time.
 */
export const LOG_READ_BYTES = 4 * CATCH_UP_BYTES;
/**
 * Reads of the log in flight at once, over every viewer. A read answers a
 * promise (the store may be remote), so a poll of lagging viewers could start
 * one per viewer before any came back: 200 stalled viewers each reading up to
 * 500 events of 32 KB held 2 GB at once (tests/faults_test.ts, "200 viewers
 * that never read"). With this cap and LOG_READ_BYTES they hold 4 MB, plus
 * any single event bigger than that.
 */
export const MAX_LOG_READS = 16;
/** Longest wait between looks at viewers whose sockets are stuck (ms). */
const LAG_POLL_MAX_MS = 50;

/** What fan-out needs of a viewer's socket (`Viewer` is one). */
export interface FanoutViewer {
  readonly principal: { readonly userId: string };
  /** The viewer's subscriptions by session id. */
  readonly subs: Map<string, Subscription>;
  readonly closed: boolean;
  /** Bytes its socket has not sent yet. */
  readonly bufferedAmount: number;
  send(msg: RelayToViewer): void;
  sendRaw(frame: string): void;
}

/** One viewer's subscription to one session. */
export interface Subscription {
  viewer: FanoutViewer;
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
  /** The viewer has the session on screen (its `visibility` message): no push for it then. */
  visible?: boolean;
  /** A read of the log is under way for it: no other catch-up step starts meanwhile. */
  reading?: boolean;
}

/** A session's committed tail: its last seq and the events kept in memory. */
export interface SessionTail {
  readonly lastSeq: number;
  readonly ring: { after(seq: number, limit: number): StoredEvent[] | null };
}

/** Options of {@linkcode Fanout}. */
export interface FanoutOptions {
  /** The committed tail of a session in memory (undefined once it left). */
  tail: (sessionId: string) => SessionTail | undefined;
  /**
   * Up to `limit` stored events after `seq`, for what the ring no longer
   * holds. Live events that arrive during the read are not sent to the
   * subscription (it is not live yet): the catch-up goes on from the read.
   */
  readLog: (
    sessionId: string,
    seq: number,
    limit: number,
    maxBytes: number,
  ) => Promise<StoredEvent[]>;
  /** Receives one line per notable incident (a failed read of the log). */
  log?: (line: string) => void;
  clock?: Clock;
}

/** The connected viewers and their subscriptions. */
export class Fanout<V extends FanoutViewer = FanoutViewer> {
  readonly #opts: FanoutOptions;
  readonly #clock: Clock;
  readonly #viewersByUser = new Map<string, Set<V>>();
  readonly #subs = new Map<string, Set<Subscription>>();
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
  #lagTimer: number | null = null;
  /** Delay of the next look at lagging viewers: short while they drain, longer while stuck. */
  #lagDelay = 1;
  /** Reads of the log in flight (at most MAX_LOG_READS). */
  #reads = 0;
  #closed = false;
  /** Events handed to viewer sockets so far, live and catch-up (read by `GET /metrics`). */
  eventsSent = 0;

  constructor(options: FanoutOptions) {
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
  }

  addViewer(v: V): void {
    let set = this.#viewersByUser.get(v.principal.userId);
    if (!set) this.#viewersByUser.set(v.principal.userId, set = new Set());
    if (!set.has(v)) this.#countViewers(1);
    set.add(v);
  }

  /** Forgets a viewer and its subscriptions. */
  removeViewer(v: V): void {
    for (const sub of v.subs.values()) this.unsubscribe(sub);
    const set = this.#viewersByUser.get(v.principal.userId);
    if (set?.delete(v)) this.#countViewers(-1);
    if (set?.size === 0) this.#viewersByUser.delete(v.principal.userId);
  }

  /** The viewers of one user. */
  viewersOf(userId: string): ReadonlySet<V> {
    return this.#viewersByUser.get(userId) ?? new Set();
  }

  /** Every viewer. */
  viewers(): V[] {
    return [...this.#viewersByUser.values()].flatMap((set) => [...set]);
  }

  /** Every viewer's high water now (it shrinks as viewers connect). */
  get highWater(): number {
    return this.#highWater;
  }

  #countViewers(delta: number): void {
    this.#viewerCount += delta;
    this.#highWater = viewerHighWater(this.#viewerCount);
    this.#lowWater = this.#highWater / 4;
  }

  /** Whether a session has subscribers. */
  watched(sessionId: string): boolean {
    return (this.#subs.get(sessionId)?.size ?? 0) > 0;
  }

  /** Whether a viewer has the session open and on screen (see Subscription.visible). */
  onScreen(sessionId: string): boolean {
    for (const sub of this.#subs.get(sessionId) ?? []) {
      if (sub.visible && !sub.viewer.closed) return true;
    }
    return false;
  }

  /**
   * Subscribes a viewer from `since` to a session that is in memory (its
   * tail): it first gets every stored event after `since` (pulled at the
   * pace its socket drains), then live ones.
   */
  subscribe(v: V, session: SessionInfo, since: number): Subscription {
    const { sessionId } = session;
    const tail = this.#opts.tail(sessionId);
    if (!tail) throw new Error(`Session is not in memory: '${sessionId}'`);
    const old = v.subs.get(sessionId);
    if (old) this.unsubscribe(old);
    const sub: Subscription = { viewer: v, sessionId, sent: since, live: false };
    // A resubscription (after a gap) keeps what the viewer said of the screen.
    if (old?.visible) sub.visible = true;
    v.subs.set(sessionId, sub);
    v.send({ t: "subscribed", sessionId, session });
    if (since > tail.lastSeq) {
      // The viewer holds more than the relay has (its data was replaced):
      // it must start over rather than wait for seqs that will mean other events.
      v.send({
        t: "reset",
        sessionId,
        reason: `Viewer is at seq ${since}, the log ends at ${tail.lastSeq}`,
      });
      sub.sent = 0;
    }
    let subs = this.#subs.get(sessionId);
    if (!subs) this.#subs.set(sessionId, subs = new Set());
    subs.add(sub);
    this.#pump(sub, tail);
    return sub;
  }

  unsubscribe(sub: Subscription): void {
    const subs = this.#subs.get(sub.sessionId);
    if (subs?.delete(sub) && subs.size === 0) this.#subs.delete(sub.sessionId);
    this.#lagging.delete(sub);
    if (sub.viewer.subs.get(sub.sessionId) === sub) sub.viewer.subs.delete(sub.sessionId);
  }

  /**
   * Ends a deleted session's subscriptions and tells every viewer of its
   * user (a list on one tab, the open session on another).
   */
  sessionDeleted(userId: string, sessionId: string): void {
    for (const sub of [...this.#subs.get(sessionId) ?? []]) this.unsubscribe(sub);
    for (const v of this.#viewersByUser.get(userId) ?? []) {
      v.send({ t: "session_deleted", sessionId });
    }
  }

  /** Sends newly committed events (in seq order) to the session's live viewers. */
  broadcast(sessionId: string, fresh: StoredEvent[]): void {
    const subs = this.#subs.get(sessionId);
    if (!subs || subs.size === 0 || fresh.length === 0) return;
    const first = fresh[0]!.seq;
    const last = fresh[fresh.length - 1]!.seq;
    // Serialised once for every viewer of the session, in frames of at most
    // LIVE_FRAME_BYTES (one event bigger than that goes alone).
    const frames = liveFrames(fresh);
    const json = frames.map((f) => eventsFrame(sessionId, f));
    for (const sub of subs) {
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
          : eventsFrame(sessionId, events.filter((f) => f.seq > sub.sent));
        sub.viewer.sendRaw(out);
        this.#spend(out.length);
        this.eventsSent += events[events.length - 1]!.seq - sub.sent;
        sub.sent = events[events.length - 1]!.seq;
      }
    }
  }

  /**
   * The session's tail moved without events handed here (another relay node
   * committed them): its live viewers behind it catch up from the log.
   */
  tailMoved(sessionId: string): void {
    const tail = this.#opts.tail(sessionId);
    if (!tail) return;
    for (const sub of this.#subs.get(sessionId) ?? []) {
      if (sub.live && sub.sent < tail.lastSeq) {
        sub.live = false;
        this.#addLagging(sub);
      }
    }
  }

  #spend(bytes: number): void {
    this.#turnBytes += bytes;
    if (this.#turnResetScheduled) return;
    this.#turnResetScheduled = true;
    this.#clock.setImmediate(() => {
      this.#turnResetScheduled = false;
      this.#turnBytes = 0;
    });
  }

  /**
   * Sends stored events a viewer has not seen yet while its socket has room.
   * From the ring this runs at once; a step that needs the log reads it and
   * goes on once the read is back (see #readLog).
   */
  #pump(sub: Subscription, tail: SessionTail): void {
    if (sub.reading) return;
    while (sub.sent < tail.lastSeq) {
      if (sub.viewer.closed) return;
      if (sub.viewer.bufferedAmount > this.#lowWater || this.#turnBytes > VIEWER_QUEUE_BUDGET) {
        this.#addLagging(sub);
        return;
      }
      const limit = sub.readLimit ?? CATCH_UP_EVENTS;
      const chunk = tail.ring.after(sub.sent, limit);
      if (chunk === null) {
        // Its turn comes at a later poll, or when a read in flight is back.
        if (this.#reads >= MAX_LOG_READS) return this.#addLagging(sub);
        return this.#readLog(sub, limit);
      }
      if (chunk.length === 0) break;
      this.#sendChunk(sub, chunk);
    }
    this.#lagging.delete(sub);
    if (!sub.live) {
      sub.live = true;
      sub.viewer.send({ t: "caught_up", sessionId: sub.sessionId, seq: sub.sent });
    }
  }

  /**
   * One catch-up step from the log. While it reads, the subscription is not
   * live, so live events only move the tail on; once the read is back its
   * events go out and the pump goes on from the last one sent, up to the
   * tail as it is then: no event is missed or sent twice.
   */
  #readLog(sub: Subscription, limit: number): void {
    sub.reading = true;
    this.#reads++;
    this.#lagging.delete(sub);
    const from = sub.sent;
    const done = () => {
      sub.reading = false;
      this.#reads--;
      // Viewers that waited for a read of their own may start one now.
      if (this.#lagging.size > 0) {
        this.#lagDelay = 1;
        this.#scheduleLagging();
      }
    };
    this.#opts.readLog(sub.sessionId, from, limit, LOG_READ_BYTES).then((chunk) => {
      done();
      const tail = this.#opts.tail(sub.sessionId);
      // Gone meanwhile: unsubscribed, closed, or the session left memory.
      if (!this.#current(sub) || !tail || sub.sent !== from) return;
      if (chunk.length > 0) this.#sendChunk(sub, chunk);
      this.#pump(sub, tail);
    }, (err) => {
      done();
      this.#opts.log?.(`reading the log of ${sub.sessionId} failed: ${err}`);
      if (!this.#current(sub)) return;
      // The viewer starts over from where it is (its client resubscribes from its last seq).
      this.unsubscribe(sub);
      sub.viewer.send({
        t: "error",
        code: "internal",
        message: "Reading the session's events failed: subscribe again",
        sessionId: sub.sessionId,
      });
    });
  }

  /** Whether a subscription still stands (its viewer open and subscribed through it). */
  #current(sub: Subscription): boolean {
    return !this.#closed && !sub.viewer.closed &&
      sub.viewer.subs.get(sub.sessionId) === sub &&
      (this.#subs.get(sub.sessionId)?.has(sub) ?? false);
  }

  /** Sends a catch-up chunk in as many frames as the socket takes, and sizes the next read. */
  #sendChunk(sub: Subscription, chunk: StoredEvent[]): void {
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
      this.eventsSent += n - i;
      sub.sent = chunk[n - 1]!.seq;
      i = n;
      if (sub.viewer.bufferedAmount > this.#lowWater || this.#turnBytes > VIEWER_QUEUE_BUDGET) {
        break;
      }
    }
  }

  #addLagging(sub: Subscription): void {
    this.#lagging.add(sub);
    this.#lagDelay = 1;
    this.#scheduleLagging();
  }

  #scheduleLagging(): void {
    if (this.#lagTimer !== null || this.#closed) return;
    this.#lagTimer = this.#clock.setTimeout(() => {
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
      const tail = this.#opts.tail(sub.sessionId);
      if (!tail || sub.viewer.closed) {
        this.#lagging.delete(sub);
        continue;
      }
      if (sub.viewer.bufferedAmount <= this.#lowWater && !sub.reading) {
        this.#pump(sub, tail);
        progressed = true;
      }
    }
    this.#lagDelay = progressed ? 1 : Math.min(LAG_POLL_MAX_MS, this.#lagDelay * 2);
    if (this.#lagging.size > 0) this.#scheduleLagging();
  }

  /** Stops polling lagging viewers (the relay shuts down). */
  close(): void {
    this.#closed = true;
    if (this.#lagTimer !== null) this.#clock.clearTimeout(this.#lagTimer);
    this.#lagTimer = null;
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
