/**
 * The relay's live state, composed: runner registry, event pipeline,
 * fan-out, state feed, credential sweeps, the session service and
 * retention (deleting sessions). The hub
 * wires them to one another and is what the runner and viewer sockets talk
 * to; each concern lives in its own module. Everything durable goes through
 * the store.
 *
 * @module
 */
import {
  CloseCode,
  type EventsMessage,
  type InputKind,
  type RunnerInfo,
  type SessionInfo,
} from "../shared/protocol.ts";
import { type Clock, systemClock } from "./_clock.ts";
import type { Credential } from "./auth.ts";
import type { Bus } from "./bus/mod.ts";
import { Cluster } from "./cluster.ts";
import { CredentialSweeps } from "./credential_sweeps.ts";
import { TunnelRegistry } from "./tunnel_link.ts";
import { type Committed, EventPipeline } from "./event_pipeline.ts";
import { Fanout, type Subscription } from "./fanout.ts";
import { type RunnerConnection, RunnerRegistry } from "./runner_registry.ts";
import { SessionService } from "./session_service.ts";
import { ServiceRouter } from "./services.ts";
import { PushNotifier, type PushNotifierOptions } from "./push.ts";
import { isCollab } from "./questions.ts";
import { Retention, type RetentionPolicy } from "./retention.ts";
import { isEnded } from "./session_state.ts";
import { StateFeed } from "./state_feed.ts";
import { Subagents } from "./subagents.ts";
import { notFound } from "./errors.ts";
import type { InputOptions } from "./input_attachments.ts";
import type { RunnerHub } from "./runner_socket.ts";
import type { CommitEvents } from "./store/event_writer.ts";
import type { AsyncStore } from "./store/mod.ts";
import type { Viewer, ViewerHub } from "./viewer.ts";

/** Options of {@linkcode Hub}. */
export interface HubOptions {
  store: AsyncStore;
  /** Events kept in memory per session (`BATON_RELAY_EVENT_BUFFER_SIZE`). */
  eventBufferSize: number;
  baseUrl: string;
  /** Receives one line per notable incident; the CLI prints them. */
  log?: (line: string) => void;
  /** Writes committed events (`inlineCommit`, `adaptiveCommit`, PostgreSQL's committer). */
  commit: CommitEvents;
  /**
   * Whether what a socket was opened with (browser session, key) still holds;
   * given, sockets whose credentials lapsed are closed within
   * CREDENTIAL_SWEEP_MS.
   */
  principalLive?: (c: Credential) => Promise<boolean>;
  /** What retention keeps (default DEFAULT_RETENTION). */
  retention?: RetentionPolicy;
  /** Gives free pages back to the file system (SQLite's; see RetentionOptions). */
  reclaimSpace?: (pages: number) => number | Promise<number>;
  /** Empties the WAL file after space was given back (the checkpointer's thread does it). */
  truncateWal?: () => void;
  clock?: Clock;
  /** Sends push messages (PushSender.send); without it no notification goes out. */
  pushSend?: PushNotifierOptions["send"];
  /**
   * The bus between relay nodes (`--bus`): given, this node serves the
   * runners it holds to the others, reaches theirs, and its viewers follow
   * what every node commits (cluster.ts). Without it the relay is one node.
   */
  bus?: Bus;
}

/** How long a runner may take to forget a deleted session (ms); nothing waits for it. */
const RUNNER_FORGET_MS = 30_000;

/** The relay's services, wired together; {@linkcode Hub.start} starts their timers. */
export class Hub implements RunnerHub, ViewerHub {
  readonly store: AsyncStore;
  readonly runners: RunnerRegistry;
  readonly events: EventPipeline;
  readonly fanout: Fanout<Viewer>;
  readonly feed: StateFeed;
  readonly sessions: SessionService;
  readonly credentials: CredentialSweeps;
  /** The runners' tunnel channels (byte streams: the HTTP tunnel). */
  readonly tunnels: TunnelRegistry;
  readonly retention: Retention;
  /** `service_message` traffic (git) between viewers and runners. */
  readonly services: ServiceRouter<Viewer>;
  /** Push notifications of committed events; null when the relay sends none. */
  readonly push: PushNotifier | null;
  /** Child sessions started by agents (their `subagent` tool). */
  readonly subagents: Subagents;
  /** This node's part in a cluster of relay nodes; null without a bus. */
  readonly cluster: Cluster | null;
  readonly #log: (line: string) => void;
  #closed = false;

  constructor(options: HubOptions) {
    const { store } = options;
    const clock = options.clock ?? systemClock;
    this.store = store;
    this.#log = options.log ?? (() => {});
    this.runners = new RunnerRegistry({
      store,
      clock,
      log: this.#log,
      ...(options.bus ? { bus: options.bus } : {}),
    });
    this.tunnels = new TunnelRegistry(store, options.bus);
    this.fanout = new Fanout<Viewer>({
      tail: (id) => this.events.get(id),
      readLog: (id, seq, limit, maxBytes) => store.events.after(id, seq, limit, maxBytes),
      log: this.#log,
      clock,
    });
    this.events = new EventPipeline({
      store,
      eventBufferSize: options.eventBufferSize,
      commit: options.commit,
      runners: this.runners,
      onCommitted: (c) => this.#committed(c),
      watched: (id) => this.fanout.watched(id),
      log: this.#log,
      clock,
    });
    this.feed = new StateFeed({
      store,
      viewersOf: (userId) => this.fanout.viewersOf(userId),
      runnerInfo: (id) => this.runners.runnerInfo(id),
      sessionInfo: (s) => this.sessions.sessionInfo(s),
      log: this.#log,
      ...(options.bus ? { share: (change) => this.cluster?.share(change) } : {}),
    });
    this.sessions = new SessionService({
      store,
      runners: this.runners,
      events: this.events,
      feed: this.feed,
      baseUrl: options.baseUrl,
      clock,
      log: this.#log,
    });
    this.services = new ServiceRouter<Viewer>({
      owned: (userId, id) => this.sessions.owned(userId, id),
      // A session with subscribers is in memory: what the runner says of others reaches no one.
      session: (id) => this.events.get(id),
      runners: this.runners,
      viewersOf: (userId) => this.fanout.viewersOf(userId),
      log: this.#log,
      ...(options.bus ? { share: (runner, msg) => this.cluster?.shareService(runner, msg) } : {}),
    });
    this.credentials = new CredentialSweeps({
      links: () => [...this.runners.links(), ...this.tunnels.links()],
      viewers: (userId) =>
        userId === undefined ? this.fanout.viewers() : this.fanout.viewersOf(userId),
      ...(options.principalLive ? { principalLive: options.principalLive } : {}),
      clock,
    });
    this.retention = new Retention({
      store,
      events: this.events,
      fanout: {
        sessionDeleted: (userId, sessionId) => {
          this.fanout.sessionDeleted(userId, sessionId);
          this.cluster?.share({ t: "deleted", userId, sessionId });
        },
      },
      feed: this.feed,
      ...(options.retention ? { policy: options.retention } : {}),
      ...(options.reclaimSpace ? { reclaimSpace: options.reclaimSpace } : {}),
      ...(options.truncateWal ? { truncateWal: options.truncateWal } : {}),
      tellRunner: (runnerId, sessionId) => this.#tellRunnerDeleted(runnerId, sessionId),
      log: this.#log,
      clock,
    });
    this.push = options.pushSend
      ? new PushNotifier({
        store,
        send: options.pushSend,
        onScreen: (id) => this.cluster?.onScreen(id) ?? this.fanout.onScreen(id),
        parentOf: async (id) => (await store.sessions.get(id))?.parentId ?? null,
        collab: (userId, id) => isCollab(store, userId, id),
        log: this.#log,
        clock,
      })
      : null;
    this.subagents = new Subagents({ store, sessions: this.sessions, log: this.#log, clock });
    this.cluster = options.bus
      ? new Cluster({
        bus: options.bus,
        events: this.events,
        fanout: this.fanout,
        feed: this.feed,
        services: this.services,
        statusChanged: (sessionId) => this.sessions.statusChanged(sessionId),
        log: this.#log,
        clock,
      })
      : null;
  }

  /** Catches stored last seqs up with the log and starts the services' timers. */
  async start(): Promise<void> {
    await this.events.start();
    this.credentials.start();
    this.retention.start();
  }

  log(line: string): void {
    this.#log(line);
  }

  /** What a commit changes beyond the log: listings, viewers, waits, triggers, the feed. */
  #committed({ sessionId, userId, runnerId, events, patch }: Committed): void {
    this.feed.bump(userId);
    if (events.length > 0) this.fanout.broadcast(sessionId, events);
    if (events.length > 0) this.cluster?.committed(userId, sessionId, events);
    if (events.length > 0) this.push?.committed({ sessionId, userId, runnerId, events, patch });
    this.subagents.committed({ sessionId, userId, runnerId, events, patch });
    if (!patch) return;
    const ended = patch.status !== undefined && isEnded(patch.status);
    // An ended session receives no more triggers: its subscriptions go with it.
    if (ended) {
      void this.store.triggers.deleteSubscriptionsOfSession(sessionId).catch((err) =>
        this.#log(`deleting the triggers of ended ${sessionId}: ${err}`)
      );
    }
    if (patch.status) this.sessions.statusChanged(sessionId);
    this.feed.sessionChanged(sessionId, userId);
    if (ended) this.feed.runnerChanged(userId, runnerId);
  }

  // Runner sockets -----------------------------------------------------------

  /** Registers an authenticated runner link, replacing an older one for the same id. */
  async attachRunner(link: RunnerConnection, sessions: string[]): Promise<{
    acked: Record<string, number>;
    ended: string[];
  }> {
    if (this.runners.attach(link)) this.cluster?.followUser(link.userId);
    const answer = await this.sessions.reconcileRunner(link, sessions);
    this.feed.runnerChanged(link.userId, link.runnerId);
    return answer;
  }

  detachRunner(link: RunnerConnection): void {
    if (!this.runners.detach(link)) return;
    this.cluster?.unfollowUser(link.userId);
    this.feed.runnerChanged(link.userId, link.runnerId);
  }

  ingest(link: RunnerConnection, msg: EventsMessage): void | Promise<void> {
    return this.events.ingest(link, msg);
  }

  serviceFromRunner(link: RunnerConnection, msg: Record<string, unknown>): void {
    this.services.fromRunner(link, msg);
  }

  serviceFromViewer(v: Viewer, msg: Record<string, unknown>): Promise<void> {
    return this.services.fromViewer(v, msg);
  }

  link(runnerId: string): RunnerConnection | undefined {
    return this.runners.link(runnerId);
  }

  // Viewer sockets -----------------------------------------------------------

  addViewer(v: Viewer): void {
    this.fanout.addViewer(v);
    this.cluster?.followUser(v.principal.userId);
  }

  removeViewer(v: Viewer): void {
    const watched = [...v.subs.keys()];
    const known = this.fanout.viewersOf(v.principal.userId).has(v);
    this.fanout.removeViewer(v);
    if (!this.cluster || !known) return;
    this.cluster.unfollowUser(v.principal.userId);
    for (const sessionId of watched) this.cluster.unwatchSession(sessionId);
  }

  /** Subscribes a viewer to a session of its user from `since` (404 for foreign or unknown). */
  async subscribe(v: Viewer, sessionId: string, since: number): Promise<Subscription> {
    const rec = await this.sessions.owned(v.principal.userId, sessionId);
    let live = await this.events.open(rec);
    // What other relay nodes commit reaches this one from now on.
    if (this.cluster) await this.cluster.watchSession(sessionId);
    // Evicted in the turn between its load and now (eviction spares watched sessions only).
    for (let i = 0; i < 3 && live && this.events.get(sessionId) !== live; i++) {
      live = await this.events.open(rec);
    }
    // Deleted while it loaded: as unknown (and not followed for nobody).
    if (!live || this.events.get(sessionId) !== live) {
      this.cluster?.unwatchSession(sessionId);
      throw notFound("Session");
    }
    return this.fanout.subscribe(v, this.sessions.sessionInfo(rec), since);
  }

  unsubscribe(sub: Subscription): void {
    this.fanout.unsubscribe(sub);
    this.cluster?.unwatchSession(sub.sessionId);
  }

  /** A viewer's session came on or went off its screen: no push while it is on, on any node. */
  screenChanged(v: Viewer, sessionId: string): void {
    this.cluster?.screenChanged(sessionId, v.principal.userId);
  }

  input(
    userId: string,
    sessionId: string,
    kind: InputKind,
    text: string,
    options: InputOptions = {},
  ): Promise<void> {
    return this.sessions.input(userId, sessionId, kind, text, options);
  }

  listRunners(userId: string): Promise<RunnerInfo[]> {
    return this.runners.list(userId);
  }

  listSessions(userId: string): Promise<SessionInfo[]> {
    return this.sessions.list(userId);
  }

  // Credentials, the feed, shutdown -------------------------------------------

  /**
   * Deletes a session of `userId` with its events and triggers (unknown and
   * foreign ids throw the same 404). Its runner is told (see
   * tellRunnerDeleted): one that runs is ended there.
   */
  async deleteSession(userId: string, sessionId: string): Promise<void> {
    const s = await this.sessions.owned(userId, sessionId);
    await this.retention.remove(s);
    this.feed.runnerChanged(userId, s.runnerId);
  }

  /**
   * Tells a deleted session's runner, if connected (`delete_session`): it
   * stops the worker if it runs and deletes its conversation file. A runner
   * from before that request is asked to end the session instead. Nothing
   * waits for the answer; a runner that missed it stops a running session
   * when the relay answers its next events with `unknown_session`, or when
   * it reconnects (the session is then in the welcome's `ended`).
   */
  #tellRunnerDeleted(runnerId: string, sessionId: string): void {
    if (!this.runners.isConnected(runnerId)) return;
    const link = this.runners.connected(runnerId);
    const failed = (err: unknown) => this.#log(`telling runner of deleted ${sessionId}: ${err}`);
    link.request("delete_session", { sessionId }, RUNNER_FORGET_MS).catch((err) => {
      if ((err as { code?: string }).code !== "unknown_op") return failed(err);
      link.request("input", { sessionId, kind: "end", text: "" }, RUNNER_FORGET_MS)
        .catch(() => {/* ended already, or not on it: nothing to stop */});
    });
  }

  /** Tells the owner's feed that a session changed outside the event log. */
  sessionChanged(sessionId: string): void {
    this.feed.sessionChanged(sessionId);
  }

  /** Keeps the viewer sockets of browser session `from` open under session `to` (same browser). */
  carryOverSession(userId: string, from: string, to: string): void {
    this.credentials.carryOver(userId, from, to);
  }

  /** Closes the sockets whose key or browser session lapsed (all, or `userId`'s). */
  closeLapsed(live: (c: Credential) => Promise<boolean>, userId?: string): Promise<void> {
    return this.credentials.closeLapsed(live, userId);
  }

  /** Resolves once every event received so far is committed. */
  settle(): Promise<void> {
    return this.events.settle();
  }

  /** Stores what is pending, closes every socket and stops the timers. */
  async close(): Promise<void> {
    if (this.#closed) return;
    await this.retention.close();
    await this.events.close();
    this.#closed = true;
    this.push?.close();
    this.cluster?.close();
    this.fanout.close();
    this.credentials.close();
    this.runners.closeAll(CloseCode.goingAway, "Relay shutting down");
    this.tunnels.closeAll(CloseCode.goingAway, "Relay shutting down");
    for (const v of this.fanout.viewers()) v.close(CloseCode.goingAway, "Relay shutting down");
  }
}
