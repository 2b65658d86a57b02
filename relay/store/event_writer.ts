import process from "node:process";
import type { SessionPatch } from "./sessions.ts";
import type { EventChunk, StoredEvent } from "./events.ts";
import type { Store } from "./mod.ts";

/** One session's share of a commit: new events, its new last seq, its state change. */
export interface EventCommit {
  sessionId: string;
  events: StoredEvent[];
  lastSeq: number;
  /** Size of the session's stored events once this commit is in (see SessionRecord). */
  eventBytes: number;
  patch: SessionPatch | null;
  /** When the state changed (ISO), for `updated_at`. */
  at: string;
}

/** Writes a batch of commits in one transaction; resolves once it is durable. */
export type CommitEvents = (batch: EventCommit[]) => Promise<void>;

/** Commits on the calling thread, through the store's repositories. */
export function inlineCommit(store: Store): CommitEvents {
  return (batch) => {
    try {
      store.tx(() => applyCommits(store, batch));
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err);
    }
  };
}

/**
 * Most events one commit may carry and still run on the event loop: about
 * 1.2 ms of SQLite for 4,096 small events.
 */
export const INLINE_EVENTS = 4096;
/**
 * Most event bytes one commit may carry and still run on the event loop:
 * about 3 ms of SQLite. (With 512 events and 1 MB, a session streaming an
 * event per frame sent its commits of 1,500–2,000 events to the thread, and
 * the round trips cost it a fifth of the events acked per second.)
 */
const INLINE_BYTES = 2 * 1024 * 1024;

/**
 * Commits on the event loop unless the relay has more work than one core
 * can do, and then on the writer thread.
 *
 * Each trip to the thread and back costs two messages, a copy of the batch
 * and two thread wake-ups, and the commit's acks and fan-out wait for it.
 * That buys a second core's work only once the relay needs one: measured
 * side by side on two cores, committing on the loop carried one viewer
 * 15–25% and 100 viewers 20–40% more deliveries/s (closed loops bound by
 * the commit cycle's latency, not by CPU), and 100 sessions at 50 events/s
 * each took 51–63% of a core against 63–79% through the thread; a single
 * session pushing as fast as it can, or 100 saturated sessions, did as well
 * or better through the thread (docs/performance.md). So the relay measures
 * its own CPU and commits through the thread while it uses more than a
 * core. Large commits (a runner re-sending its backlog) always go to the
 * thread, so that the loop never stalls long on one.
 */
export function adaptiveCommit(
  store: Store,
  writer: { commit: CommitEvents },
  gauge = new CpuGauge(),
): CommitEvents {
  const inline = inlineCommit(store);
  /** Commits on the thread not yet durable: an inline one must not overtake them. */
  let onThread = 0;
  const toThread: CommitEvents = (batch) => {
    onThread++;
    return writer.commit(batch).finally(() => onThread--);
  };
  return (batch) => {
    if (onThread > 0 || gauge.busy()) return toThread(batch);
    let events = 0;
    let bytes = 0;
    for (const c of batch) {
      events += c.events.length;
      for (const e of c.events) bytes += e.json.length;
    }
    return events <= INLINE_EVENTS && bytes <= INLINE_BYTES ? inline(batch) : toThread(batch);
  };
}

/**
 * Whether this process is busy: the CPU it used (all threads) as a share of
 * one core over the last sample, with hysteresis so that the change it
 * causes does not flip it straight back.
 */
export class CpuGauge {
  #busy = false;
  #at = performance.now();
  #cpu = process.cpuUsage();

  constructor(
    /** Becomes busy at this share of a core... */
    readonly busyAt = 1.0,
    /** ...and stops being busy below this one. */
    readonly idleAt = 0.95,
    /** How long one sample is (ms). */
    readonly sampleMs = 200,
  ) {}

  busy(now = performance.now()): boolean {
    const wall = now - this.#at;
    if (wall >= this.sampleMs) {
      const used = process.cpuUsage(this.#cpu);
      const share = (used.user + used.system) / 1000 / wall;
      this.#busy = this.#busy ? share > this.idleAt : share >= this.busyAt;
      this.#at = now;
      this.#cpu = process.cpuUsage();
    }
    return this.#busy;
  }
}

/**
 * A session's share of a commit as the store thread gets it: its events
 * already cut into chunks (see `StoreThread` in store_thread.ts).
 */
export interface ChunkedCommit extends Omit<EventCommit, "events"> {
  chunks: EventChunk[];
}

/** What one commit does, on whichever connection it runs. */
export function applyCommits(
  repos: Pick<Store, "events" | "sessions">,
  batch: (EventCommit | ChunkedCommit)[],
): void {
  for (const c of batch) {
    if ("chunks" in c) repos.events.appendChunks(c.sessionId, c.chunks);
    else repos.events.appendMany(c.sessionId, c.events);
    // The session's row only when its state changes too: writing it for every
    // commit cost a second 4 KB WAL page per session per commit (the log is
    // where the last seq is; see Hub, storeLastSeqs).
    if (c.patch) {
      repos.sessions.update(c.sessionId, c.patch, c.at);
      repos.sessions.setLastSeq(c.sessionId, c.lastSeq, c.eventBytes);
    }
  }
}
