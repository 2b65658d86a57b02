/**
 * The feed of runners and sessions: watching viewers hear of every change
 * to their user's runners and sessions, and listings learn when to rebuild.
 *
 * @module
 */
import type { RelayToViewer, RunnerInfo, SessionInfo } from "../shared/protocol.ts";
import type { AsyncStore, SessionRecord } from "./store/mod.ts";

/** A viewer as the feed sees it. */
export interface FeedViewer {
  /** Whether it asked for the feed (`watch`). */
  readonly watching: boolean;
  send(msg: RelayToViewer): void;
}

/** A change the feeds of other relay nodes hear of (cluster.ts carries it). */
export type FeedChange =
  | { t: "runner"; userId: string; runnerId: string }
  | { t: "session"; userId: string; sessionId: string }
  | { t: "deleted"; userId: string; sessionId: string };

/** Whether a value off the bus is a {@linkcode FeedChange}. */
export function isFeedChange(v: unknown): v is FeedChange {
  const c = v as Record<string, unknown> | null;
  if (typeof c?.userId !== "string") return false;
  if (c.t === "runner") return typeof c.runnerId === "string";
  return (c.t === "session" || c.t === "deleted") && typeof c.sessionId === "string";
}

/** Options of {@linkcode StateFeed}. */
export interface StateFeedOptions {
  store: Pick<AsyncStore, "sessions">;
  /** The connected viewers of a user. */
  viewersOf: (userId: string) => ReadonlySet<FeedViewer>;
  runnerInfo: (runnerId: string) => Promise<RunnerInfo | undefined>;
  sessionInfo: (s: SessionRecord) => SessionInfo;
  /** Receives one line per notable incident (a failed read). */
  log?: (line: string) => void;
  /** Hands each change made here on to the other relay nodes' feeds (cluster.ts). */
  share?: (change: FeedChange) => void;
}

/** Tells each user's watching viewers what changed, and counts changes per user. */
export class StateFeed {
  readonly #opts: StateFeedOptions;
  /** Per user, bumped on every change to one of their sessions (see version). */
  readonly #versions = new Map<string, number>();
  /**
   * Per runner or session, the number of the newest read of its state: an
   * older read that comes back after it is not sent (it would undo it).
   */
  readonly #reads = new Map<string, number>();
  #nextRead = 0;

  constructor(options: StateFeedOptions) {
    this.#opts = options;
  }

  /** Sends the runner's current state to its owner's watching viewers, here and on other nodes. */
  runnerChanged(userId: string, runnerId: string): void {
    this.#opts.share?.({ t: "runner", userId, runnerId });
    this.#runner(userId, runnerId);
  }

  /** A change another relay node made: told to the viewers here. */
  apply(change: FeedChange): void {
    if (change.t === "runner") this.#runner(change.userId, change.runnerId);
    else if (change.t === "session") this.#session(change.sessionId, change.userId, false);
  }

  #runner(userId: string, runnerId: string): void {
    if (this.#opts.viewersOf(userId).size === 0) return;
    this.#newest(`r\n${runnerId}`, () => this.#opts.runnerInfo(runnerId), (runner) => {
      if (!runner) return;
      for (const v of this.#opts.viewersOf(userId)) {
        if (v.watching) v.send({ t: "runner", runner });
      }
    });
  }

  /**
   * Sends the session's current state to its owner's watching viewers.
   * Give its owner when known: the listings' version moves at once then.
   */
  sessionChanged(sessionId: string, userId?: string): void {
    this.#session(sessionId, userId, true);
  }

  #session(sessionId: string, userId: string | undefined, share: boolean): void {
    if (userId !== undefined) this.bump(userId);
    if (share && userId !== undefined) this.#opts.share?.({ t: "session", userId, sessionId });
    this.#newest(`s\n${sessionId}`, () => this.#opts.store.sessions.get(sessionId), (s) => {
      if (!s) return;
      if (userId === undefined) {
        this.bump(s.userId);
        if (share) this.#opts.share?.({ t: "session", userId: s.userId, sessionId });
      }
      const viewers = this.#opts.viewersOf(s.userId);
      if (viewers.size === 0) return;
      const session = this.#opts.sessionInfo(s);
      for (const v of viewers) if (v.watching) v.send({ t: "session", session });
    });
  }

  /** Reads a state and hands it to `send` unless a newer read of the same key started since. */
  #newest<T>(key: string, read: () => Promise<T>, send: (value: T) => void): void {
    const n = ++this.#nextRead;
    this.#reads.set(key, n);
    read().then((value) => {
      if (this.#reads.get(key) !== n) return;
      this.#reads.delete(key);
      send(value);
    }, (err) => {
      if (this.#reads.get(key) === n) this.#reads.delete(key);
      this.#opts.log?.(`the feed could not read ${key.replace("\n", " ")}: ${err}`);
    });
  }

  /**
   * A number that changes whenever any session of `userId` changes (state,
   * pin, title, last seq): listings can be reused while it stays the same.
   */
  version(userId: string): number {
    return this.#versions.get(userId) ?? 0;
  }

  /** Marks a change to a session of `userId` that the feed does not carry (new events). */
  bump(userId: string): void {
    this.#versions.set(userId, (this.#versions.get(userId) ?? 0) + 1);
  }
}
