/**
 * Byte streams across relay nodes over NATS: the tunnel and the terminal of
 * a runner whose tunnel socket sits on another node (docs/scaling.md,
 * "Tunnel and terminal across nodes").
 *
 * A node holding a runner's tunnel link serves `baton.tunnel.<runner>`.
 * Another node asks there for a channel and gets a StreamMux of its own whose
 * frames (shared/streams.ts, unchanged: open, data, credit, end, reset) travel
 * as NATS messages to the serving node; that node bridges each stream to one
 * on the runner's tunnel. Credit flows end to end: the serving node reads the
 * runner's stream only as fast as the opener grants credit, so a reader that
 * stalls on one node stalls the runner's stream and grows nothing anywhere
 * beyond a window per hop.
 *
 * A channel is reset (every stream on it) when its peer is silent for
 * {@linkcode DEAD_MS} (both sides ping every {@linkcode PING_MS}), when this
 * node is cut off from the bus, when one of its numbered messages went
 * missing, or when the runner's tunnel leaves the serving node; a stream that
 * waits (bytes nobody reads, or a writer without credit) with nothing of it
 * moving for the idle time is reset alone.
 *
 * @module
 */
import type { Msg, NatsConnection } from "@nats-io/transport-node";
import type { MuxStream } from "../../shared/streams.ts";
import { bridge, Channel, CLOSE, closeMessage, PING, SEQ_BYTES } from "./_nats_channel.ts";
import { streamSubjects } from "./_nats_wire.ts";
import type { StreamTarget } from "./types.ts";

/** How often each side of a channel says it is alive. */
export const PING_MS = 1_000;
/** A channel whose peer was silent this long is gone (its node died or lost the bus). */
export const DEAD_MS = 4_000;
/** An opener's channel with no stream for this long is closed. */
const CHANNEL_IDLE_MS = 30_000;
/** How long an opener waits for the serving node to accept a channel. */
const OPEN_TIMEOUT_MS = 5_000;
/** Default of BusOptions.streamIdleMs. */
export const DEFAULT_STREAM_IDLE_MS = 300_000;
const TUNNEL_QUEUE = "tunnel";
const CHANNEL_ID = /^[A-Za-z0-9-]{1,64}_[0-9]{1,16}$/;
const NODE_ID = /^[A-Za-z0-9_-]{1,64}$/;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Options of {@linkcode NatsStreams}. */
export interface NatsStreamsOptions {
  nc: NatsConnection;
  nodeId: string;
  /** Whether the bus carries messages now. */
  connected: () => boolean;
  log: (line: string) => void;
  /** BusOptions.streamIdleMs. */
  idleMs?: number | undefined;
}

/** The stream part of NatsBus: channels this node opened and channels it serves. */
export class NatsStreams {
  readonly #o: NatsStreamsOptions;
  readonly #idleMs: number;
  readonly #channels = new Map<string, Channel>();
  /** The channel this node opened to each runner (reused by every stream to it). */
  readonly #toRunner = new Map<string, { channel: Channel; target: StreamTarget }>();
  readonly #opening = new Map<string, Promise<StreamTarget | null>>();
  readonly #served = new Map<string, { target: StreamTarget; stop: () => void }>();
  readonly #timer: ReturnType<typeof setInterval>;
  #counter = 0;

  constructor(options: NatsStreamsOptions) {
    this.#o = options;
    this.#idleMs = options.idleMs ?? DEFAULT_STREAM_IDLE_MS;
    const prefix = `baton.chan.${options.nodeId}.`;
    options.nc.subscribe(streamSubjects.inbox(options.nodeId), {
      callback: (err, msg) => {
        if (!err) this.#onMessage(msg.subject.slice(prefix.length), msg.data);
      },
    });
    this.#timer = setInterval(() => this.#tick(), PING_MS);
    void this.#watch();
  }

  /** Cut off from the bus: every channel's messages may be lost, so its streams end now. */
  async #watch(): Promise<void> {
    for await (const s of this.#o.nc.status()) {
      if (s.type === "disconnect") {
        for (const channel of [...this.#channels.values()]) {
          this.#close(channel, "relay bus lost", false);
        }
      }
    }
  }

  /** Channels open now (both kinds). */
  get size(): number {
    return this.#channels.size;
  }

  serveStreams(runnerId: string, target: StreamTarget): () => void {
    this.#served.get(runnerId)?.stop();
    const sub = this.#o.nc.subscribe(streamSubjects.tunnel(runnerId), {
      queue: TUNNEL_QUEUE,
      callback: (err, msg) => {
        if (!err) this.#accept(runnerId, target, msg);
      },
    });
    let stopped = false;
    const entry = {
      target,
      stop: () => {
        if (stopped) return;
        stopped = true;
        sub.unsubscribe();
        if (this.#served.get(runnerId) === entry) this.#served.delete(runnerId);
        for (const ch of [...this.#channels.values()]) {
          if (!ch.opener && ch.runnerId === runnerId) {
            this.#close(ch, "runner_offline: the runner's tunnel left its relay node", true);
          }
        }
      },
    };
    this.#served.set(runnerId, entry);
    return entry.stop;
  }

  streamsTo(runnerId: string): Promise<StreamTarget | null> {
    const have = this.#toRunner.get(runnerId);
    // A peer that missed a ping may be dead: ask again rather than open streams into silence.
    const fresh = have && !have.channel.closed && Date.now() - have.channel.heardAt <= 2 * PING_MS;
    if (fresh) return Promise.resolve(have.target);
    let opening = this.#opening.get(runnerId);
    if (!opening) {
      opening = this.#openChannel(runnerId).finally(() => this.#opening.delete(runnerId));
      this.#opening.set(runnerId, opening);
    }
    return opening;
  }

  async #openChannel(runnerId: string): Promise<StreamTarget | null> {
    if (!this.#o.connected()) return null;
    const id = `${this.#o.nodeId}_${++this.#counter}`;
    let reply: { ok?: unknown; node?: unknown; userId?: unknown };
    try {
      const msg = await this.#o.nc.request(
        streamSubjects.tunnel(runnerId),
        encoder.encode(JSON.stringify({ node: this.#o.nodeId, channel: id })),
        { timeout: OPEN_TIMEOUT_MS },
      );
      reply = msg.json();
    } catch {
      // No node serves the runner's tunnel, or none answered in time: offline.
      return null;
    }
    const { node, userId } = reply ?? {};
    if (
      reply?.ok !== true || typeof node !== "string" || !NODE_ID.test(node) ||
      typeof userId !== "string"
    ) return null;
    const channel = this.#channel(id, node, runnerId, true);
    const target: StreamTarget = {
      userId,
      open: (header) => {
        const stream = channel.mux.open(header);
        channel.watch(stream);
        return stream;
      },
    };
    this.#toRunner.set(runnerId, { channel, target });
    return target;
  }

  /** A node asks for a channel to `runnerId`, whose tunnel this node holds. */
  #accept(runnerId: string, target: StreamTarget, msg: Msg): void {
    const refuse = () => this.#respond(msg, { ok: false });
    let req: { node?: unknown; channel?: unknown };
    try {
      req = msg.json();
    } catch {
      return refuse();
    }
    const { node, channel: id } = req ?? {};
    if (
      typeof node !== "string" || typeof id !== "string" || !CHANNEL_ID.test(id) ||
      !id.startsWith(`${node}_`) || node === this.#o.nodeId || this.#channels.has(id) ||
      this.#served.get(runnerId)?.target !== target
    ) return refuse();
    const channel = this.#channel(id, node, runnerId, false, (stream, header) => {
      channel.watch(stream);
      bridge(stream, target, header);
    });
    this.#respond(msg, { ok: true, node: this.#o.nodeId, userId: target.userId });
  }

  #respond(msg: Msg, body: object): void {
    try {
      if (msg.reply) msg.respond(encoder.encode(JSON.stringify(body)));
    } catch {
      // Closed meanwhile: the asker times out.
    }
  }

  #channel(
    id: string,
    peer: string,
    runnerId: string,
    opener: boolean,
    onStream?: (stream: MuxStream, header: Uint8Array) => void,
  ): Channel {
    const channel = new Channel(
      id,
      peer,
      runnerId,
      opener,
      (frame) => this.#send(channel, frame),
      onStream,
    );
    this.#channels.set(id, channel);
    return channel;
  }

  /** A channel's message: its number (4 bytes, big-endian, from 1), then `body`. */
  #send(channel: Channel, body: Uint8Array): void {
    if (!this.#o.connected()) return;
    const out = new Uint8Array(SEQ_BYTES + body.byteLength);
    new DataView(out.buffer).setUint32(0, ++channel.sent);
    out.set(body, SEQ_BYTES);
    this.#publish(channel.subject, out);
  }

  #publish(subject: string, bytes: Uint8Array): void {
    // Cut off: nothing is queued in the client; the next tick resets the channel.
    if (this.#o.connected()) this.#o.nc.publish(subject, bytes);
  }

  #onMessage(id: string, data: Uint8Array): void {
    if (data.byteLength <= SEQ_BYTES) return;
    const seq = new DataView(data.buffer, data.byteOffset, SEQ_BYTES).getUint32(0);
    const kind = data[SEQ_BYTES];
    const channel = this.#channels.get(id);
    if (!channel) {
      // A channel this side forgot (its runner left, or it was declared dead): tell the opener.
      const opener = id.slice(0, id.lastIndexOf("_"));
      if (kind !== CLOSE && CHANNEL_ID.test(id) && opener !== this.#o.nodeId) {
        this.#publish(streamSubjects.channel(opener, id), closeMessage("channel_gone"));
      }
      return;
    }
    if (seq !== 0) {
      // A message missing (lost while a node was cut off, others sent after it): the
      // streams' bytes have a hole, so they end here rather than carry on corrupted.
      if (seq !== channel.received + 1) {
        return this.#close(channel, "relay bus lost messages", true);
      }
      channel.received = seq;
    } else if (kind !== CLOSE) return;
    channel.heardAt = Date.now();
    if (kind === PING) return;
    if (kind === CLOSE) {
      return this.#close(
        channel,
        decoder.decode(data.subarray(SEQ_BYTES + 1)) || "channel closed",
        false,
      );
    }
    // The client's read buffer is shared by the messages of one read: the stream keeps a copy.
    const frame = data.slice(SEQ_BYTES);
    channel.moved(frame);
    channel.mux.receive(frame);
  }

  #close(channel: Channel, reason: string, tell: boolean): void {
    if (channel.closed) return;
    channel.closed = true;
    if (this.#channels.get(channel.id) === channel) this.#channels.delete(channel.id);
    const mine = this.#toRunner.get(channel.runnerId);
    if (mine?.channel === channel) this.#toRunner.delete(channel.runnerId);
    if (tell) this.#send(channel, closeMessage(reason).subarray(SEQ_BYTES));
    channel.mux.close(reason);
  }

  #tick(): void {
    const now = Date.now();
    const up = this.#o.connected();
    for (const channel of [...this.#channels.values()]) {
      if (!up) {
        this.#close(channel, "relay bus lost", false);
      } else if (now - channel.heardAt > DEAD_MS) {
        this.#o.log(`Bus: relay node ${channel.peer} went silent; its streams are reset`);
        this.#close(channel, "relay node lost", false);
      } else if (
        channel.opener && channel.mux.size === 0 && now - channel.emptySince > CHANNEL_IDLE_MS
      ) {
        this.#close(channel, "channel idle", true);
      } else {
        if (channel.mux.size > 0) channel.emptySince = now;
        channel.sweep(now, this.#idleMs);
        this.#send(channel, new Uint8Array([PING]));
      }
    }
  }

  /** Closes every channel (telling the peers) and stops serving. */
  close(): void {
    clearInterval(this.#timer);
    for (const channel of [...this.#channels.values()]) {
      this.#close(channel, "relay node shutting down", true);
    }
    for (const s of [...this.#served.values()]) s.stop();
  }
}
