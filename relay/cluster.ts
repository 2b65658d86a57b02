/**
 * This node's part in a cluster of relay nodes (`--bus`): what it commits
 * and what changes in its feed goes out on the bus, and for the sessions its
 * viewers watch and the users they belong to, what other nodes commit and
 * change comes in. Viewers never wait on the bus: a gap in what it carries
 * (an outage, a slow consumer) is caught up from the store by `seq`.
 *
 * @module
 */
import type { Bus, EventSubscription } from "./bus/mod.ts";
import type { EventPipeline } from "./event_pipeline.ts";
import type { Fanout } from "./fanout.ts";
import type { Clock } from "./_clock.ts";
import { isScreenNotice, type ScreenNotice, Screens } from "./screens.ts";
import { type FeedChange, isFeedChange, type StateFeed } from "./state_feed.ts";
import type { StoredEvent } from "./store/mod.ts";

/** Options of {@linkcode Cluster}. */
export interface ClusterOptions {
  bus: Bus;
  events: Pick<EventPipeline, "mirror" | "catchUp" | "get" | "drop">;
  fanout: Pick<Fanout, "broadcast" | "tailMoved" | "watched" | "sessionDeleted" | "onScreen">;
  feed: Pick<StateFeed, "apply" | "bump">;
  /** Takes what a runner held elsewhere sent on its own (ServiceRouter.fromNode). */
  services?: {
    fromNode(runner: { runnerId: string; userId: string }, msg: Record<string, unknown>): void;
  };
  /** Wakes the waits on a session whose row changed (SessionService.statusChanged). */
  statusChanged?: (sessionId: string) => void;
  log?: (line: string) => void;
  clock?: Clock;
}

/** A runner's own `service_message` (a progress or status notice), for viewers on every node. */
interface ServiceNotice {
  t: "service";
  userId: string;
  runnerId: string;
  msg: Record<string, unknown>;
}

/** What crosses `baton.state.<user>`, with the node it came from. */
type SharedChange = (FeedChange | ServiceNotice | ScreenNotice) & { from: string };

/** Most bytes of a runner's notice that is handed on to other nodes (bigger ones stay here). */
const MAX_SHARED_NOTICE = 256 * 1024;

function isServiceNotice(v: unknown): v is ServiceNotice {
  const c = v as Record<string, unknown> | null;
  return c?.t === "service" && typeof c.userId === "string" &&
    typeof c.runnerId === "string" && typeof c.msg === "object" && c.msg !== null;
}

/** Keeps this node's viewers and feeds in step with the other nodes'. */
export class Cluster {
  readonly #o: ClusterOptions;
  /** The bus subscriptions of the sessions this node's viewers watch. */
  readonly #sessions = new Map<string, EventSubscription>();
  /** Sessions whose subscription is being set up: a second watcher waits for it. */
  readonly #starting = new Map<string, Promise<void>>();
  /**
   * Per user with viewers or runners here: how many, and the stop of their
   * state subscription (a runner's node must hear of its sessions' deletion).
   */
  readonly #users = new Map<string, { count: number; stop: () => void }>();

  /** Sessions on a viewer's screen, here or on other nodes (no push for those). */
  readonly #screens: Screens;

  constructor(options: ClusterOptions) {
    this.#o = options;
    this.#screens = new Screens({
      local: (id) => options.fanout.onScreen(id),
      publish: (notice) =>
        this.#o.bus.publishState(notice.userId, { ...notice, from: this.#o.bus.nodeId }),
      ...(options.clock ? { clock: options.clock } : {}),
    });
  }

  #log(line: string): void {
    this.#o.log?.(line);
  }

  /** Tells the other nodes of events this node committed. */
  committed(userId: string, sessionId: string, events: readonly StoredEvent[]): void {
    this.#o.bus.publishEvents(userId, sessionId, events);
  }

  /** Tells the other nodes' feeds of a change in this one. */
  share(change: FeedChange): void {
    if (change.t === "deleted") this.#screens.forget(change.sessionId);
    const shared: SharedChange = { ...change, from: this.#o.bus.nodeId };
    this.#o.bus.publishState(change.userId, shared);
  }

  /** Whether a viewer on any node has the session on screen. */
  onScreen(sessionId: string): boolean {
    return this.#screens.onScreen(sessionId);
  }

  /** A viewer of `userId` here said a session came on or went off its screen. */
  screenChanged(sessionId: string, userId: string): void {
    this.#screens.changed(sessionId, userId);
  }

  /** Hands a runner's own notice on to the other nodes' viewers of its user. */
  shareService(runner: { runnerId: string; userId: string }, msg: Record<string, unknown>): void {
    const notice: ServiceNotice & { from: string } = {
      t: "service",
      userId: runner.userId,
      runnerId: runner.runnerId,
      msg,
      from: this.#o.bus.nodeId,
    };
    const body = JSON.stringify(notice);
    if (body.length > MAX_SHARED_NOTICE) {
      this.#log(`a notice of runner ${runner.runnerId} is too large for other nodes`);
      return;
    }
    this.#o.bus.publishState(runner.userId, notice);
  }

  /**
   * Follows a session's events from every node before a viewer here
   * subscribes: subscribe, flush (the server has the subscription), then move
   * the tail up to the log, so no event falls between the two.
   */
  watchSession(sessionId: string): Promise<void> {
    if (this.#sessions.has(sessionId)) return Promise.resolve();
    let starting = this.#starting.get(sessionId);
    if (!starting) {
      starting = this.#follow(sessionId).finally(() => this.#starting.delete(sessionId));
      this.#starting.set(sessionId, starting);
    }
    return starting;
  }

  async #follow(sessionId: string): Promise<void> {
    const sub = this.#o.bus.subscribeEvents(sessionId, {
      onEvents: (events) => this.#arrived(sessionId, events),
      onGap: () => void this.#behind(sessionId),
    });
    this.#sessions.set(sessionId, sub);
    await this.#o.bus.flush();
    await this.#behind(sessionId);
  }

  #arrived(sessionId: string, events: StoredEvent[]): void {
    const fresh = this.#o.events.mirror(sessionId, events);
    if (fresh.length === 0) return;
    this.#o.fanout.broadcast(sessionId, fresh);
  }

  /** Catches the session's tail up with the log, then its viewers with the tail. */
  async #behind(sessionId: string): Promise<void> {
    try {
      if (await this.#o.events.catchUp(sessionId)) this.#o.fanout.tailMoved(sessionId);
      const live = this.#o.events.get(sessionId);
      if (live) this.#sessions.get(sessionId)?.caughtUp(live.lastSeq);
    } catch (err) {
      this.#log(`catching session ${sessionId} up with its log: ${err}`);
    }
  }

  /** Stops following a session no viewer here watches any more. */
  unwatchSession(sessionId: string): void {
    // A viewer left it: was it the last to have it on screen here?
    this.#screens.changed(sessionId);
    if (this.#o.fanout.watched(sessionId)) return;
    const sub = this.#sessions.get(sessionId);
    if (!sub) return;
    sub.stop();
    this.#sessions.delete(sessionId);
    // Its tail here may now go stale: the next watcher catches it up first (#follow),
    // a runner that moves here too (reconcileRunner), and eviction frees it.
  }

  /**
   * A viewer or runner of `userId` connected here: this node follows the
   * other nodes' changes for that user until the last one leaves.
   */
  followUser(userId: string): void {
    const user = this.#users.get(userId);
    if (user) {
      user.count++;
      return;
    }
    const stop = this.#o.bus.subscribeState(userId, {
      onState: (state) => {
        const ok = isFeedChange(state) || isServiceNotice(state) || isScreenNotice(state);
        if (ok && state.userId === userId) this.#changed(state as SharedChange);
        else this.#log(`a malformed feed change on the bus for user ${userId}`);
      },
      onGap: () => this.#log(`the feed of user ${userId} may have missed changes (bus outage)`),
    });
    this.#users.set(userId, { count: 1, stop });
  }

  unfollowUser(userId: string): void {
    const user = this.#users.get(userId);
    if (!user) return;
    if (--user.count > 0) return;
    user.stop();
    this.#users.delete(userId);
  }

  #changed(change: SharedChange): void {
    if (change.from === this.#o.bus.nodeId) return;
    if (change.t === "service") {
      this.#o.services?.fromNode(change, change.msg);
      return;
    }
    if (change.t === "screen") {
      this.#screens.heard(change.from, change);
      return;
    }
    if (change.t === "deleted") {
      this.#screens.forget(change.sessionId);
      this.#o.events.drop(change.sessionId);
      this.#o.fanout.sessionDeleted(change.userId, change.sessionId);
      this.#o.feed.bump(change.userId);
      return;
    }
    this.#o.feed.apply(change);
    if (change.t === "session") this.#o.statusChanged?.(change.sessionId);
  }

  /** Stops every subscription (the relay shuts down). */
  close(): void {
    this.#screens.close();
    for (const sub of this.#sessions.values()) sub.stop();
    this.#sessions.clear();
    for (const user of this.#users.values()) user.stop();
    this.#users.clear();
  }
}
