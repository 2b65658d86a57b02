/**
 * Deleting sessions and keeping the store bounded: a session's removal (its
 * row at once, its event log in short steps, then the space given back to
 * the file system), and the retention sweep that removes ended, unpinned
 * sessions past an age or beyond a size, per user and relay-wide.
 *
 * @module
 */
import { type Clock, isoNow, systemClock } from "./_clock.ts";
import type { EventPipeline } from "./event_pipeline.ts";
import type { Fanout } from "./fanout.ts";
import type { StateFeed } from "./state_feed.ts";
import { reclaimSpace } from "./store/vacuum.ts";
import type { Deletable, Store } from "./store/mod.ts";

/** What retention keeps; 0 turns a limit off. */
export interface RetentionPolicy {
  /** Ended, unpinned sessions older than this many days go (by when they ended). */
  maxAgeDays: number;
  /** Most event-log bytes one user's sessions may hold. */
  userMaxBytes: number;
  /** Most event-log bytes all sessions together may hold. */
  maxBytes: number;
}

/** The default policy: ended sessions are kept 90 days; no size limit. */
export const DEFAULT_RETENTION: RetentionPolicy = {
  maxAgeDays: 90,
  userMaxBytes: 0,
  maxBytes: 0,
};

/** How often the sweep runs (ms); it also runs at start. */
export const RETENTION_SWEEP_MS = 60 * 60_000;
/**
 * Chunks of a log deleted per transaction: at most 64 KB each, so about
 * 8 MB, some 10 ms (deleting 60 MB of 60 KB rows took 70 ms here).
 */
const DELETE_CHUNKS = 128;
/**
 * Free pages given back per step (4 KB each, so 4 MB), so no step holds the
 * loop or the writer long. The bench (scenario 10) gave back 43 MB in 1.2 s
 * with the longest stall of the loop 116–203 ms on a machine at load 8, and
 * halving both step sizes did not shorten it: the stalls are not the steps.
 */
const RECLAIM_PAGES = 1024;

/** How long after the last reclaim the WAL is emptied (ms; see scheduleTruncate). */
const TRUNCATE_AFTER_MS = 1000;

/** Options of {@linkcode Retention}. */
export interface RetentionOptions {
  store: Store;
  events: Pick<EventPipeline, "drop" | "inFlight" | "storeTails">;
  fanout: Pick<Fanout, "sessionDeleted">;
  feed: Pick<StateFeed, "bump">;
  policy?: RetentionPolicy;
  /** Empties the WAL file once space was given back (it holds the pages moved). */
  truncateWal?: () => void;
  /** Tells the session's runner it was deleted (it stops it and deletes its conversation). */
  tellRunner?: (runnerId: string, sessionId: string) => void;
  /** Runs the sweep this often (ms); default RETENTION_SWEEP_MS. */
  sweepEveryMs?: number;
  log?: (line: string) => void;
  clock?: Clock;
}

/** What one sweep removed. */
export interface SweepResult {
  sessions: number;
  eventBytes: number;
}

/** Removes sessions (asked for, or by the policy) and gives their space back. */
export class Retention {
  readonly #opts: RetentionOptions;
  readonly #store: Store;
  readonly #clock: Clock;
  readonly policy: RetentionPolicy;
  #timer: number | null = null;
  /** Background work (event deletions, reclaims), one step at a time, in order. */
  #work: Promise<void> = Promise.resolve();
  #reclaimQueued = false;
  /** Background tasks queued and not done: the WAL is emptied once none is left. */
  #queued = 0;
  #truncateTimer: number | null = null;
  /** The sweep running, if any: a second call waits for it rather than start another. */
  #sweeping: Promise<SweepResult> | null = null;
  #closed = false;

  constructor(options: RetentionOptions) {
    this.#opts = options;
    this.#store = options.store;
    this.#clock = options.clock ?? systemClock;
    this.policy = options.policy ?? DEFAULT_RETENTION;
  }

  /** Finishes deletions a stop cut short, sweeps once and then every `sweepEveryMs`. */
  start(): void {
    if (this.#timer !== null) return;
    for (const id of this.#store.retention.pendingDeletions()) this.#queueEvents(id);
    const sweep = () => {
      this.sweep().catch((err) => this.#log(`retention sweep failed: ${err}`));
    };
    sweep();
    this.#timer = this.#clock.setInterval(sweep, this.#opts.sweepEveryMs ?? RETENTION_SWEEP_MS);
  }

  #log(line: string): void {
    this.#opts.log?.(line);
  }

  /**
   * Deletes a session: its row and triggers at once (so no viewer, listing
   * or runner sees it from then on; its viewers are told), then its events,
   * in steps; the space is given back afterwards. Resolves once its events
   * are gone. The caller checked ownership and ended it if it ran.
   */
  async remove(s: { sessionId: string; userId: string }): Promise<void> {
    const { sessionId, userId } = s;
    const runnerId = this.#store.sessions.get(sessionId)?.runnerId;
    this.#store.tx(() =>
      this.#store.retention.beginDeletion(sessionId, userId, isoNow(this.#clock))
    );
    // Nothing more of it is taken (ingest answers unknown_session); what was
    // pending is dropped; a commit in flight may still write some events,
    // which go with the rest.
    this.#opts.events.drop(sessionId);
    this.#opts.feed.bump(userId);
    this.#opts.fanout.sessionDeleted(userId, sessionId);
    if (runnerId !== undefined) this.#opts.tellRunner?.(runnerId, sessionId);
    await this.#opts.events.inFlight();
    await this.#queueEvents(sessionId);
  }

  /** Queues the deletion of a deleted session's events; resolves once they are gone. */
  #queueEvents(sessionId: string): Promise<void> {
    this.#queued++;
    const done = this.#work.then(async () => {
      while (!this.#closed && this.#store.events.deleteSome(sessionId, DELETE_CHUNKS) > 0) {
        await this.#yield();
      }
      if (this.#closed) return;
      this.#store.retention.finishDeletion(sessionId);
      this.#queueReclaim();
    }).finally(() => this.#queued--);
    this.#work = done.catch((err) => this.#log(`deleting events of ${sessionId} failed: ${err}`));
    return done;
  }

  /** Gives free pages back to the file system, a step per turn, once the deletions are done. */
  #queueReclaim(): void {
    if (this.#reclaimQueued) return;
    this.#reclaimQueued = true;
    this.#queued++;
    this.#work = this.#work.then(async () => {
      this.#reclaimQueued = false;
      while (!this.#closed && reclaimSpace(this.#store.db, RECLAIM_PAGES) > 0) {
        await this.#yield();
      }
      this.#scheduleTruncate();
    }).catch((err) => this.#log(`reclaiming space failed: ${err}`))
      .finally(() => this.#queued--);
  }

  /**
   * Empties the WAL once the deletions queued are done and the checkpointer
   * has copied what they moved. Emptying it holds writers for as long as it
   * copies: run right after each reclaim of a 50-session sweep, it made each
   * next deletion wait 25–45 ms for it; TRUNCATE_AFTER_MS later there is
   * next to nothing left to copy.
   */
  #scheduleTruncate(): void {
    if (this.#truncateTimer !== null) this.#clock.clearTimeout(this.#truncateTimer);
    this.#truncateTimer = this.#clock.setTimeout(() => {
      this.#truncateTimer = null;
      if (this.#closed) return;
      if (this.#queued > 0 || this.#sweeping) this.#scheduleTruncate();
      else this.#opts.truncateWal?.();
    }, TRUNCATE_AFTER_MS);
  }

  #yield(): Promise<void> {
    return new Promise((resolve) => this.#clock.setTimeout(resolve, 0));
  }

  /** Resolves once the deletions and the reclaim queued so far are done. */
  idle(): Promise<void> {
    return this.#work;
  }

  /**
   * Removes what the policy no longer keeps: ended, unpinned sessions that
   * ended before the age limit, then the oldest of them while a user, or
   * the relay, holds more than its size limit. Sessions that run, and
   * pinned ones, stay whatever they weigh.
   */
  sweep(): Promise<SweepResult> {
    this.#sweeping ??= this.#sweep().finally(() => this.#sweeping = null);
    return this.#sweeping;
  }

  async #sweep(): Promise<SweepResult> {
    const { maxAgeDays, userMaxBytes, maxBytes } = this.policy;
    const result: SweepResult = { sessions: 0, eventBytes: 0 };
    if (this.#closed || (maxAgeDays <= 0 && userMaxBytes <= 0 && maxBytes <= 0)) return result;
    // The rows of sessions in memory lag their logs' size.
    await this.#opts.events.storeTails();
    const repo = this.#store.retention;
    const doomed = new Map<string, Deletable>();
    if (maxAgeDays > 0) {
      const cutoff = new Date(this.#clock.now() - maxAgeDays * 86_400_000).toISOString();
      for (const d of repo.endedBefore(cutoff)) doomed.set(d.sessionId, d);
    }
    const freedBy = (userId?: string) => {
      let n = 0;
      for (const d of doomed.values()) {
        if (userId === undefined || d.userId === userId) {
          n += d.eventBytes;
        }
      }
      return n;
    };
    const trim = (over: number, userId?: string) => {
      for (const d of repo.oldestDeletable(userId)) {
        if (over <= 0) break;
        if (doomed.has(d.sessionId)) continue;
        doomed.set(d.sessionId, d);
        over -= d.eventBytes;
      }
    };
    if (userMaxBytes > 0) {
      for (const u of repo.usersOver(userMaxBytes)) {
        trim(u.eventBytes - freedBy(u.userId) - userMaxBytes, u.userId);
      }
    }
    if (maxBytes > 0) trim(repo.totalBytes() - freedBy() - maxBytes);
    for (const d of doomed.values()) {
      if (this.#closed) break;
      // Pinned, or gone, while earlier ones were removed.
      const now = this.#store.sessions.get(d.sessionId);
      if (!now || now.isPinned || (now.status !== "ended" && now.status !== "error")) continue;
      await this.remove(d);
      result.sessions++;
      result.eventBytes += d.eventBytes;
    }
    if (result.sessions > 0) {
      this.#log(
        `retention removed ${result.sessions} sessions (${
          (result.eventBytes / 1024 / 1024).toFixed(1)
        } MB of events)`,
      );
    }
    return result;
  }

  /** Stops the sweep; work in progress stops after its step (it resumes at the next start). */
  async close(): Promise<void> {
    if (this.#timer !== null) this.#clock.clearInterval(this.#timer);
    if (this.#truncateTimer !== null) this.#clock.clearTimeout(this.#truncateTimer);
    this.#timer = null;
    this.#truncateTimer = null;
    this.#closed = true;
    await this.#work;
  }
}
