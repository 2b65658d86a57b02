/**
 * The bus's contract: what relay nodes say to each other, and the shapes of
 * what they say it with. Implementations: local_bus.ts and nats_bus.ts.
 *
 * @module
 */
import type { MuxStream } from "../../shared/streams.ts";
import type { StoredEvent } from "../store/mod.ts";

export type { MuxStream, StoredEvent };

/**
 * Byte streams to one runner's machine: its tunnel link on the node that
 * holds it, or a channel over the bus to that node elsewhere.
 */
export interface StreamTarget {
  /** The runner's owner (its tunnel's register was checked against the runner's row). */
  readonly userId: string;
  /**
   * Opens a stream with `header` as its open payload. Throws a RangeError when
   * too many are open, and a StreamResetError once the tunnel or channel is gone.
   */
  open(header: Uint8Array): MuxStream;
}

/** Answers a request for a runner this node holds; throws a RelayError to refuse. */
export type RunnerHandler = (op: string, data: unknown, timeoutMs: number) => Promise<unknown>;

/** Why a subscriber may have missed something. */
export type GapReason =
  /** A `seq` jumped: events between `after` and `before` never arrived. */
  | "seq"
  /** The node was cut off from the bus (an outage, or the server dropped a slow consumer). */
  | "reconnect";

/**
 * Events a subscriber may have missed: what it has after `after` up to
 * (not including) `before` must come from the store (`null`: up to now).
 */
export interface BusGap {
  reason: GapReason;
  /** Highest seq delivered to this subscription (0: none yet). */
  after: number;
  /** The first seq that arrived after the gap; null when unknown. */
  before: number | null;
}

/** Receives one session's committed events. Called synchronously: must not block. */
export interface EventSubscriber {
  /** Events in seq order, each delivered once (older or repeated seqs are dropped). */
  onEvents(events: StoredEvent[], userId: string): void;
  onGap(gap: BusGap): void;
}

/** A subscription to one session's events. */
export interface EventSubscription {
  /**
   * Tells the bus the subscriber holds every event up to `seq` (read from the
   * store after a gap), so live frames at or below it are dropped.
   */
  caughtUp(seq: number): void;
  stop(): void;
}

/** Receives one user's state changes (runner and session notices). Must not block. */
export interface StateSubscriber {
  onState(state: unknown): void;
  /** Notices may have been missed: reload the listing from the store. */
  onGap(): void;
}

/** A relay node as the bus last heard of it. */
export interface NodeInfo {
  nodeId: string;
  /** The runners whose control socket it holds. */
  runners: string[];
  /** When it last announced itself (epoch ms, this node's clock). */
  seenAt: number;
}

/** What relay nodes say to each other. One job per method. */
export interface Bus {
  /** This node's id (unique per process start). */
  readonly nodeId: string;
  /** Whether the bus can carry messages now (a LocalBus always can). */
  readonly connected: boolean;
  /**
   * Answers requests for `runnerId` on this node (it holds the runner's control
   * socket) and announces that; the returned function stops both.
   */
  serveRunner(runnerId: string, handler: RunnerHandler): () => void;
  /**
   * The answer of the node serving `runnerId`. Rejects with a RelayError:
   * `offline` (`runner_offline`) when no node serves it, `timeout`
   * (`runner_timeout`) after `timeoutMs`, or the serving node's own error.
   */
  requestRunner(runnerId: string, op: string, data: unknown, timeoutMs: number): Promise<unknown>;
  /** Tells every node's subscribers about committed events (in seq order). */
  publishEvents(userId: string, sessionId: string, events: readonly StoredEvent[]): void;
  subscribeEvents(sessionId: string, subscriber: EventSubscriber): EventSubscription;
  /** Tells every node's subscribers of `userId` about a state change (JSON-serialisable). */
  publishState(userId: string, state: unknown): void;
  /** Returns a function that stops the subscription. */
  subscribeState(userId: string, subscriber: StateSubscriber): () => void;
  /**
   * Serves stream opens for `runnerId` from other nodes (this node holds its
   * tunnel link); the returned function stops that and resets the streams
   * opened through it.
   */
  serveStreams(runnerId: string, target: StreamTarget): () => void;
  /**
   * Streams to `runnerId` through the node that serves them (its credit
   * flows end to end); null when no node does or this one is cut off.
   */
  streamsTo(runnerId: string): Promise<StreamTarget | null>;
  /** The nodes that announced themselves recently, this one included. */
  nodes(): NodeInfo[];
  /**
   * Resolves once what this node sent, subscriptions included, reached the bus:
   * subscribe, flush, then read the store, so no event falls between the two.
   */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** Where the bus is, and how a node proves itself to it. */
export interface BusConfig {
  /** `nats://host:port`; several comma separated for a NATS cluster. */
  url: string;
  /** The server's `authorization { token }`. */
  token?: string;
  /** The server's `authorization { user, password }`. */
  user?: string;
  password?: string;
  /**
   * TLS beyond the system's trust (a `tls://` URL, or a server that requires
   * TLS, uses it anyway): PEM files of the CA that signed the server's
   * certificate, and of this node's own certificate and key for a server
   * that verifies its clients. Read at each (re)connect.
   */
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
}

/** Options of {@linkcode openBus}. */
export interface BusOptions {
  /** Receives one line per notable incident (a disconnect, a subscriber that threw). */
  log?: (line: string) => void;
  /** How often a node announces itself (ms, default 2000); dead nodes vanish after 3 of these. */
  announceMs?: number;
  /**
   * How long a stream across nodes may sit with bytes nobody reads (or a
   * writer with no credit) before it is reset (ms, default 300000).
   */
  streamIdleMs?: number;
}
