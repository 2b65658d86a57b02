/**
 * Which sessions are on someone's screen, on this relay node or any other:
 * no push notification goes out for a session a person is looking at
 * (push.ts). A viewer says so over its socket (`visibility`); with a bus, a
 * node tells the others when a session comes on or goes off its viewers'
 * screens (on `baton.state.<user>`, which the node holding the user's runner
 * follows, cluster.ts), and says it again every {@linkcode SCREEN_REFRESH_MS}
 * while it stays on: a node that dies stops saying it, and what it said is
 * forgotten {@linkcode SCREEN_TTL_MS} later (a push may then be spared for
 * that long, never held back for good).
 *
 * @module
 */
import { type Clock, systemClock } from "./_clock.ts";

/** A node's word that one of its viewers has a session on screen, or no longer has. */
export interface ScreenNotice {
  t: "screen";
  userId: string;
  sessionId: string;
  on: boolean;
}

/** How often a node says again which sessions are on its screens. */
export const SCREEN_REFRESH_MS = 20_000;
/** How long another node's word counts unless said again. */
export const SCREEN_TTL_MS = 3 * SCREEN_REFRESH_MS;

/** Whether `v` is a well-formed {@linkcode ScreenNotice}. */
export function isScreenNotice(v: unknown): v is ScreenNotice {
  const n = v as Record<string, unknown> | null;
  return n?.t === "screen" && typeof n.userId === "string" &&
    typeof n.sessionId === "string" && typeof n.on === "boolean";
}

/** Options of {@linkcode Screens}. */
export interface ScreensOptions {
  /** Whether a viewer of this node has the session on screen (Fanout.onScreen). */
  local: (sessionId: string) => boolean;
  /** Tells the other nodes (none without a bus). */
  publish?: (notice: ScreenNotice) => void;
  clock?: Clock;
}

/** The sessions on screen here and, as other nodes said, elsewhere. */
export class Screens {
  readonly #o: ScreensOptions;
  readonly #clock: Clock;
  /** Sessions on this node's screens as last told to the others: session → user. */
  readonly #mine = new Map<string, string>();
  /** What other nodes said: session → node → until when it counts. */
  readonly #theirs = new Map<string, Map<string, number>>();
  #refresh: number | null = null;
  #swept = 0;

  constructor(options: ScreensOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** Whether anyone, on any node, has the session on screen. */
  onScreen(sessionId: string): boolean {
    if (this.#o.local(sessionId)) return true;
    const nodes = this.#theirs.get(sessionId);
    return nodes !== undefined && this.#lapse(sessionId, nodes, this.#clock.now());
  }

  /**
   * Something of a session's viewers here changed (a `visibility` message,
   * an unsubscribe, a socket gone): tells the other nodes when that turned
   * it on or off this node's screens. `userId` is needed to turn it on.
   */
  changed(sessionId: string, userId?: string): void {
    if (!this.#o.publish) return;
    const on = this.#o.local(sessionId);
    const owner = this.#mine.get(sessionId) ?? userId;
    if (on === this.#mine.has(sessionId) || owner === undefined) return;
    if (on) this.#mine.set(sessionId, owner);
    else this.#mine.delete(sessionId);
    this.#o.publish({ t: "screen", userId: owner, sessionId, on });
    if (this.#mine.size > 0 && this.#refresh === null) {
      this.#refresh = this.#clock.setInterval(() => this.#sayAgain(), SCREEN_REFRESH_MS);
    } else if (this.#mine.size === 0) this.#stopRefresh();
  }

  /** What node `from` said of a session. */
  heard(from: string, notice: ScreenNotice): void {
    this.#sweep();
    let nodes = this.#theirs.get(notice.sessionId);
    if (!notice.on) {
      nodes?.delete(from);
      if (nodes?.size === 0) this.#theirs.delete(notice.sessionId);
      return;
    }
    if (!nodes) this.#theirs.set(notice.sessionId, nodes = new Map());
    nodes.set(from, this.#clock.now() + SCREEN_TTL_MS);
  }

  /** A session was deleted: nobody looks at it any more. */
  forget(sessionId: string): void {
    this.#theirs.delete(sessionId);
    if (this.#mine.delete(sessionId) && this.#mine.size === 0) this.#stopRefresh();
  }

  /** Stops saying anything (the relay shuts down). */
  close(): void {
    this.#stopRefresh();
  }

  /** Forgets, at most once per TTL, what other nodes said long ago (sessions nobody asked about). */
  #sweep(): void {
    const now = this.#clock.now();
    if (now - this.#swept < SCREEN_TTL_MS) return;
    this.#swept = now;
    for (const [sessionId, nodes] of this.#theirs) this.#lapse(sessionId, nodes, now);
  }

  /** Drops the nodes whose word on a session lapsed by `now`; whether any still counts. */
  #lapse(sessionId: string, nodes: Map<string, number>, now: number): boolean {
    for (const [node, until] of nodes) if (until <= now) nodes.delete(node);
    if (nodes.size === 0) this.#theirs.delete(sessionId);
    return nodes.size > 0;
  }

  #sayAgain(): void {
    for (const [sessionId, userId] of this.#mine) {
      this.#o.publish?.({ t: "screen", userId, sessionId, on: true });
    }
  }

  #stopRefresh(): void {
    if (this.#refresh !== null) this.#clock.clearInterval(this.#refresh);
    this.#refresh = null;
  }
}
