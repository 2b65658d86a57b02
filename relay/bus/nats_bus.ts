/**
 * The bus over a nats-server (core NATS, no JetStream: what crosses it is
 * either answered at once or already durable in the store, so a lost message
 * is caught up from the store by `seq`). Subjects and message shapes are in
 * docs/scaling.md, "The bus between nodes". Byte streams across nodes are
 * in _nats_streams.ts.
 *
 * Over 400 lines: one connection's requests, events, state and node table
 * share its status (cut off, back) and its confirmed-bytes bound.
 *
 * @module
 */
import { errors, type Msg, type NatsConnection } from "@nats-io/transport-node";
import { connectGuarded } from "./_nats_connect.ts";
import { offline, rejected, RelayError } from "../errors.ts";
import { MAX_WS_MESSAGE_BYTES } from "../../shared/protocol.ts";
import {
  cutOff,
  errorToWire,
  newNodeId,
  requestTimeout,
  SeqCursor,
  type WireError,
  wireToError,
} from "./_common.ts";
import {
  decodeEvents,
  encodeEvents,
  encodeReply,
  encodeTail,
  isNoResponders,
  redacted,
  subjects,
} from "./_nats_wire.ts";
import { NodeTable, Unconfirmed } from "./_nats_flow.ts";
import { NatsStreams } from "./_nats_streams.ts";
import type {
  Bus,
  BusConfig,
  BusOptions,
  EventSubscriber,
  EventSubscription,
  NodeInfo,
  RunnerHandler,
  StateSubscriber,
  StoredEvent,
  StreamTarget,
} from "./types.ts";

export { subjectToken } from "./_nats_wire.ts";

/**
 * The smallest `max_payload` a server must allow: a runner's answer may be as
 * large as its largest socket message, and the bus carries it in one message
 * rather than in parts (docs/scaling.md says how to set it).
 */
export const MIN_MAX_PAYLOAD = MAX_WS_MESSAGE_BYTES;
/** Sessions whose dropped events a node remembers, to announce their tail after. */
const MAX_DROPPED_TAILS = 10_000;
/**
 * Bytes of events this node may have published that the server has not
 * confirmed yet (a flush's answer). Past it, events are dropped (their tail is
 * announced once the server caught up), not queued in the client: the server
 * slows a publisher down while a subscriber lags, and without this bound a
 * stalled node elsewhere would grow this node's memory by what it missed.
 */
const MAX_UNCONFIRMED_BYTES = 16 * 1024 * 1024;
const DEFAULT_ANNOUNCE_MS = 2_000;
const RUNNER_QUEUE = "runner";

const encoder = new TextEncoder();

/** The bus between relay nodes over NATS. */
export class NatsBus implements Bus {
  readonly nodeId: string;
  readonly #nc: NatsConnection;
  readonly #log: (line: string) => void;
  readonly #announceMs: number;
  readonly #runners = new Map<string, { handler: RunnerHandler; stop: () => void }>();
  readonly #cursors = new Set<SeqCursor>();
  readonly #states = new Set<StateSubscriber>();
  readonly #nodes: NodeTable;
  /** Sessions whose events were dropped while cut off: their highest seq. */
  readonly #dropped = new Map<string, { userId: string; sessionId: string; seq: number }>();
  readonly #timer: ReturnType<typeof setInterval>;
  readonly #watching: Promise<void>;
  #maxPayload: number;
  readonly #unconfirmed = new Unconfirmed(
    () => this.#nc.flush(),
    () => this.connected,
    () => this.#sendTails(),
  );
  readonly #streams: NatsStreams;
  #up = true;
  #closed = false;

  private constructor(nc: NatsConnection, nodeId: string, options: BusOptions) {
    this.#nc = nc;
    this.nodeId = nodeId;
    this.#log = options.log ?? (() => {});
    this.#announceMs = options.announceMs ?? DEFAULT_ANNOUNCE_MS;
    this.#nodes = new NodeTable(nodeId, 3 * this.#announceMs);
    this.#maxPayload = nc.info?.max_payload ?? 0;
    const streams = { nc, nodeId, log: this.#log, idleMs: options.streamIdleMs };
    this.#streams = new NatsStreams({ ...streams, connected: () => this.connected });
    nc.subscribe(subjects.nodes, {
      callback: (err, msg) => {
        if (!err) this.#onNodes(msg);
      },
    });
    this.#timer = setInterval(() => this.#announce(), this.#announceMs);
    this.#watching = this.#watch();
    nc.publish(subjects.node("hello"), encoder.encode(JSON.stringify({ node: nodeId })));
    this.#announce();
  }

  /**
   * Connects to `url` and starts announcing this node. Throws when the server
   * cannot be reached or allows too small a payload.
   */
  static async connect(bus: string | BusConfig, options: BusOptions = {}): Promise<NatsBus> {
    const { url, token, user, password, tls } = typeof bus === "string"
      ? { url: bus } as BusConfig
      : bus;
    const servers = url.split(",");
    const usesTls = servers.some((u) => /^tls:\/\//i.test(u));
    const nodeId = newNodeId();
    let nc: NatsConnection;
    try {
      nc = await connectGuarded({
        servers,
        ...(token ? { token } : {}),
        // A tls:// server is only ever spoken to over TLS, checked against the system's CAs or these.
        ...(tls || usesTls ? { tls: { ...tls } } : {}),
        ...(user ? { user, pass: password ?? "" } : {}),
        name: `baton-relay-${nodeId}`,
        // Keep trying for as long as the relay runs: it serves its own runners meanwhile.
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        // A server that stopped answering is noticed within ~30 s even without a TCP reset.
        pingInterval: 10_000,
        maxPingOut: 2,
        timeout: 10_000,
      });
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      // A server that wants a client certificate drops the connection once
      // TLS is up: the client hears its alert, or nothing and times out.
      const refused = why === "timeout" || /certificate/i.test(why);
      const hint = refused && usesTls && !tls?.certFile
        ? " (a server that verifies its clients needs BATON_BUS_CERT and BATON_BUS_KEY)"
        : "";
      throw new Error(`Cannot reach the bus at ${redacted(url)}: ${why}${hint}`);
    }
    const max = nc.info?.max_payload ?? 0;
    if (max < MIN_MAX_PAYLOAD) {
      await nc.close();
      throw new Error(
        `The bus at ${redacted(url)} allows messages of ${max} bytes; baton needs ` +
          `${MIN_MAX_PAYLOAD} (set "max_payload: 8MB" in nats-server.conf)`,
      );
    }
    return new NatsBus(nc, nodeId, options);
  }

  get connected(): boolean {
    return this.#up && !this.#closed;
  }

  serveRunner(runnerId: string, handler: RunnerHandler): () => void {
    this.#runners.get(runnerId)?.stop();
    // A queue group: should two nodes briefly both hold a runner (it moved), one answers.
    const sub = this.#nc.subscribe(subjects.runner(runnerId), {
      queue: RUNNER_QUEUE,
      callback: (err, msg) => {
        if (!err) void this.#answer(handler, msg);
      },
    });
    const entry = {
      handler,
      stop: () => {
        sub.unsubscribe();
        if (this.#runners.get(runnerId) === entry) {
          this.#runners.delete(runnerId);
          this.#announce();
        }
      },
    };
    this.#runners.set(runnerId, entry);
    this.#announce();
    return entry.stop;
  }

  async #answer(handler: RunnerHandler, msg: Msg): Promise<void> {
    let reply: { ok: true; data: unknown } | { ok: false; error: WireError };
    try {
      const req = msg.json<{ op: string; data: unknown; timeoutMs: number }>();
      reply = { ok: true, data: await handler(req.op, req.data, req.timeoutMs) };
    } catch (err) {
      reply = { ok: false, error: errorToWire(err) };
    }
    // Cut off meanwhile: the asker times out; nothing is queued for a server that is gone.
    if (!this.connected || !msg.reply) return;
    try {
      msg.respond(encodeReply(reply, this.#maxPayload));
    } catch {
      // Closed meanwhile: the asker times out.
    }
  }

  async requestRunner(
    runnerId: string,
    op: string,
    data: unknown,
    timeoutMs: number,
  ): Promise<unknown> {
    if (!this.connected) throw cutOff();
    const body = encoder.encode(JSON.stringify({ op, data, timeoutMs }));
    if (body.length > this.#maxPayload) {
      throw new RelayError(
        "invalid",
        "request_too_large",
        `Request is too large for the bus: ${body.length} bytes (at most ${this.#maxPayload})`,
      );
    }
    let msg: Msg;
    try {
      msg = await this.#nc.request(subjects.runner(runnerId), body, {
        timeout: Math.max(1, timeoutMs),
      });
    } catch (err) {
      if (isNoResponders(err)) throw offline();
      if (err instanceof errors.TimeoutError) throw requestTimeout(op);
      throw new RelayError(
        "unreachable",
        "runner_unreachable",
        `Relay bus failed the request: ${err instanceof Error ? err.message : err}`,
      );
    }
    let reply: { ok?: unknown; data?: unknown; error?: Partial<WireError> };
    try {
      reply = msg.json();
    } catch {
      throw rejected("bad_node_answer", "Relay node sent a malformed answer");
    }
    if (reply?.ok === true) return reply.data;
    throw wireToError(reply?.error);
  }

  publishEvents(userId: string, sessionId: string, events: readonly StoredEvent[]): void {
    if (events.length === 0) return;
    if (!this.connected) {
      this.#remember(userId, sessionId, events[events.length - 1]!.seq);
      return;
    }
    const subject = subjects.events(userId, sessionId);
    for (const bytes of encodeEvents(userId, sessionId, events)) {
      // Only an event larger than MAX_EVENT_BYTES could be: its seq is a gap subscribers catch up on.
      if (bytes.length > this.#maxPayload) {
        this.#log(
          `Bus: events of session ${sessionId} too large to publish (${bytes.length} bytes)`,
        );
      } else if (this.#unconfirmed.bytes > MAX_UNCONFIRMED_BYTES) {
        this.#remember(userId, sessionId, events[events.length - 1]!.seq);
        return;
      } else this.#publish(subject, bytes);
    }
  }

  /** Publishes, counting the bytes until the server confirms them. */
  #publish(subject: string, bytes: Uint8Array): void {
    this.#nc.publish(subject, bytes);
    this.#unconfirmed.published(bytes.length);
  }

  /** Tells subscribers how far the sessions got whose events this node dropped. */
  #sendTails(): void {
    if (!this.connected) return;
    for (const { userId, sessionId, seq } of this.#dropped.values()) {
      this.#nc.publish(subjects.events(userId, sessionId), encodeTail(userId, sessionId, seq));
    }
    this.#dropped.clear();
  }

  #remember(userId: string, sessionId: string, seq: number): void {
    const key = `${userId}\n${sessionId}`;
    if (!this.#dropped.has(key) && this.#dropped.size >= MAX_DROPPED_TAILS) return;
    this.#dropped.set(key, { userId, sessionId, seq });
  }

  subscribeEvents(sessionId: string, subscriber: EventSubscriber): EventSubscription {
    const cursor = new SeqCursor(subscriber, this.#log);
    const sub = this.#nc.subscribe(subjects.sessionEvents(sessionId), {
      callback: (err, msg) => {
        if (!err) this.#onEvents(cursor, sessionId, msg);
      },
    });
    this.#cursors.add(cursor);
    return {
      caughtUp: (seq) => cursor.caughtUp(seq),
      stop: () => {
        this.#cursors.delete(cursor);
        sub.unsubscribe();
      },
    };
  }

  #onEvents(cursor: SeqCursor, sessionId: string, msg: Msg): void {
    const got = decodeEvents(msg.string(), sessionId);
    if (!got) this.#log(`Bus: a malformed events message on ${msg.subject}`);
    else if (got.tail !== undefined) cursor.tail(got.tail);
    else cursor.deliver(got.events, got.userId);
  }

  publishState(userId: string, state: unknown): void {
    if (!this.connected) return;
    this.#publish(subjects.state(userId), encoder.encode(JSON.stringify(state)));
  }

  subscribeState(userId: string, subscriber: StateSubscriber): () => void {
    const sub = this.#nc.subscribe(subjects.state(userId), {
      callback: (err, msg) => {
        if (err) return;
        try {
          subscriber.onState(msg.json());
        } catch (e) {
          this.#log(`Bus: a state subscriber threw: ${e instanceof Error ? e.message : e}`);
        }
      },
    });
    this.#states.add(subscriber);
    return () => {
      this.#states.delete(subscriber);
      sub.unsubscribe();
    };
  }

  serveStreams(runnerId: string, target: StreamTarget): () => void {
    return this.#streams.serveStreams(runnerId, target);
  }

  streamsTo(runnerId: string): Promise<StreamTarget | null> {
    return this.#streams.streamsTo(runnerId);
  }

  nodes(): NodeInfo[] {
    return this.#nodes.list([...this.#runners.keys()]);
  }

  #announce(): void {
    if (!this.connected) return;
    const body = { node: this.nodeId, runners: [...this.#runners.keys()] };
    this.#nc.publish(subjects.node("announce"), encoder.encode(JSON.stringify(body)));
  }

  #onNodes(msg: Msg): void {
    let body: { node?: unknown; runners?: unknown };
    try {
      body = msg.json();
    } catch {
      return;
    }
    if (this.#nodes.heard(msg.subject.slice("baton.nodes.".length), body)) this.#announce();
  }

  /** Follows the connection: cut off, then back (every subscriber hears of the gap). */
  async #watch(): Promise<void> {
    for await (const s of this.#nc.status()) {
      if (s.type === "disconnect") {
        this.#up = false;
        this.#log(`Bus: disconnected from ${redacted(s.server)}`);
      } else if (s.type === "reconnect") {
        this.#up = true;
        // What was in flight is gone with the connection (the store has the events).
        this.#unconfirmed.reset();
        this.#maxPayload = this.#nc.info?.max_payload ?? this.#maxPayload;
        this.#log(`Bus: reconnected to ${redacted(s.server)}`);
        this.#afterOutage();
      }
    }
  }

  #afterOutage(): void {
    for (const cursor of [...this.#cursors]) {
      cursor.gap({ reason: "reconnect", after: cursor.last, before: null });
    }
    for (const s of [...this.#states]) {
      try {
        s.onGap();
      } catch (e) {
        this.#log(`Bus: a state subscriber threw: ${e instanceof Error ? e.message : e}`);
      }
    }
    // Subscribers elsewhere may never have been cut off: tell them how far the sessions got.
    this.#sendTails();
    this.#nc.publish(subjects.node("hello"), encoder.encode(JSON.stringify({ node: this.nodeId })));
    this.#announce();
  }

  async flush(): Promise<void> {
    if (this.connected) await this.#nc.flush();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    clearInterval(this.#timer);
    this.#streams.close();
    if (this.connected) {
      this.#nc.publish(
        subjects.node("leave"),
        encoder.encode(JSON.stringify({ node: this.nodeId })),
      );
    }
    this.#closed = true;
    // Drain (what was published goes out), but not for longer than a shutdown may wait.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      this.#up ? this.#nc.drain().catch(() => {}) : Promise.resolve(),
      new Promise((resolve) => timer = setTimeout(resolve, 5_000)),
    ]);
    clearTimeout(timer);
    if (!this.#nc.isClosed()) await this.#nc.close();
    await this.#watching;
  }
}
