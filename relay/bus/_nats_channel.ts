/**
 * One side of a bus channel between two relay nodes for one runner's byte
 * streams (_nats_streams.ts): its multiplexer, its message numbering, its
 * watch for stuck streams, and the bridge from a channel stream to the
 * runner's tunnel on the serving node.
 *
 * @module
 */
import { type MuxStream, StreamMux } from "../../shared/streams.ts";
import { streamSubjects } from "./_nats_wire.ts";
import type { StreamTarget } from "./types.ts";

/** Bytes of a channel message's number, before its body. */
export const SEQ_BYTES = 4;
/** First byte of a channel message's body that is not a frame (frames start with their kind, 1..5). */
export const PING = 0;
export const CLOSE = 0xff;

const encoder = new TextEncoder();

/** A stream watched for sitting stuck: when a frame of it last crossed the channel. */
interface Watched {
  stream: MuxStream;
  movedAt: number;
}

/** One side of a channel between two nodes for one runner. */
export class Channel {
  readonly mux: StreamMux;
  /** Where this side's messages go: the peer's subject for the channel. */
  readonly subject: string;
  readonly #watched = new Map<number, Watched>();
  heardAt = Date.now();
  emptySince = Date.now();
  closed = false;
  /** Messages sent to the peer, and received from it: each carries its number, so a lost one shows. */
  sent = 0;
  received = 0;

  constructor(
    readonly id: string,
    readonly peer: string,
    readonly runnerId: string,
    /** True on the node that asked for the channel (it opens the streams). */
    readonly opener: boolean,
    send: (frame: Uint8Array) => void,
    onStream?: (stream: MuxStream, header: Uint8Array) => void,
  ) {
    this.subject = streamSubjects.channel(peer, id);
    this.mux = new StreamMux({
      dialer: opener,
      send: (frame) => {
        this.moved(frame);
        send(frame);
      },
      ...(onStream ? { onStream } : {}),
    });
  }

  watch(stream: MuxStream): void {
    const w: Watched = { stream, movedAt: Date.now() };
    this.#watched.set(stream.id, w);
    stream.closed.then(() => {
      if (this.#watched.get(stream.id) === w) this.#watched.delete(stream.id);
    });
  }

  /** A frame (sent or received) of a watched stream: it is moving. */
  moved(frame: Uint8Array): void {
    if (frame.byteLength < 5) return;
    const id = new DataView(frame.buffer, frame.byteOffset, 5).getUint32(1);
    const w = this.#watched.get(id);
    if (w) w.movedAt = Date.now();
  }

  /**
   * Resets the streams that wait (bytes queued unread, or a writer without
   * credit) with no frame of theirs crossing the channel for `idleMs`. A quiet
   * stream that waits for nothing (an idle terminal) is left alone.
   */
  sweep(now: number, idleMs: number): void {
    for (const w of this.#watched.values()) {
      const waiting = w.stream.queuedBytes > 0 || w.stream.credit <= 0;
      if (!waiting) w.movedAt = now;
      else if (now - w.movedAt >= idleMs) w.stream.reset("idle: nobody read the stream");
    }
  }
}

/** A close outside any channel's numbering (number 0): the answer to a message for a forgotten channel. */
export function closeMessage(reason: string): Uint8Array {
  const text = encoder.encode(reason.slice(0, 200));
  const out = new Uint8Array(SEQ_BYTES + 1 + text.byteLength);
  out[SEQ_BYTES] = CLOSE;
  out.set(text, SEQ_BYTES + 1);
  return out;
}

/**
 * Carries one stream from another node to the runner's tunnel and back. Each
 * direction is a pipe: the source is read only as the destination has credit
 * (a window per hop is all either node holds), and a reset on either side
 * resets the other with the same reason (a terminal's `terminal_not_found`
 * reaches the browser's node as it is).
 */
export function bridge(stream: MuxStream, target: StreamTarget, header: Uint8Array): void {
  let up: MuxStream;
  try {
    up = target.open(header);
  } catch (err) {
    stream.reset(
      err instanceof RangeError
        ? `tunnel_busy: ${err.message}`
        : "runner_offline: the runner's tunnel is gone",
    );
    return;
  }
  const keep = { preventAbort: true, preventCancel: true } as const;
  up.readable.pipeTo(stream.writable, keep).catch(() => {});
  stream.readable.pipeTo(up.writable, keep).catch(() => {});
  up.closed.then(() => {
    if (up.resetReason !== null) stream.reset(up.resetReason);
  });
  stream.closed.then(() => {
    if (stream.resetReason !== null) up.reset(stream.resetReason);
  });
}
