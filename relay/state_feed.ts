/**
 * The feed of runners and sessions: watching viewers hear of every change
 * to their user's runners and sessions, and listings learn when to rebuild.
 *
 * @module
 */
import type { RelayToViewer, RunnerInfo, SessionInfo } from "../shared/protocol.ts";
import type { SessionRecord, Store } from "./store/mod.ts";

/** A viewer as the feed sees it. */
export interface FeedViewer {
  /** Whether it asked for the feed (`watch`). */
  readonly watching: boolean;
  send(msg: RelayToViewer): void;
}

/** Options of {@linkcode StateFeed}. */
export interface StateFeedOptions {
  store: Pick<Store, "sessions">;
  /** The connected viewers of a user. */
  viewersOf: (userId: string) => ReadonlySet<FeedViewer>;
  runnerInfo: (runnerId: string) => RunnerInfo | undefined;
  sessionInfo: (s: SessionRecord) => SessionInfo;
}

/** Tells each user's watching viewers what changed, and counts changes per user. */
export class StateFeed {
  readonly #opts: StateFeedOptions;
  /** Per user, bumped on every change to one of their sessions (see version). */
  readonly #versions = new Map<string, number>();

  constructor(options: StateFeedOptions) {
    this.#opts = options;
  }

  /** Sends the runner's current state to its owner's watching viewers. */
  runnerChanged(userId: string, runnerId: string): void {
    const viewers = this.#opts.viewersOf(userId);
    if (viewers.size === 0) return;
    const runner = this.#opts.runnerInfo(runnerId);
    if (!runner) return;
    for (const v of viewers) if (v.watching) v.send({ t: "runner", runner });
  }

  /** Sends the session's current state to its owner's watching viewers. */
  sessionChanged(sessionId: string): void {
    const s = this.#opts.store.sessions.get(sessionId);
    if (!s) return;
    this.bump(s.userId);
    const viewers = this.#opts.viewersOf(s.userId);
    if (viewers.size === 0) return;
    const session = this.#opts.sessionInfo(s);
    for (const v of viewers) if (v.watching) v.send({ t: "session", session });
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
