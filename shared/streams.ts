/**
 * Many byte streams over one message channel (the `/_tunnel` WebSocket),
 * each with its own credit window per direction, so that a fast producer
 * or a reader that stops never grows memory beyond `window` bytes per
 * stream and direction, and a stalled stream holds up no other.
 *
 * A frame is one binary message (docs/protocol.md, "Tunnel frames"):
 *
 * ```
 * byte 0      kind (1 open, 2 data, 3 credit, 4 end, 5 reset)
 * bytes 1..4  stream id, unsigned 32-bit big-endian
 * bytes 5..   payload: open: the opener's header bytes; data: body bytes;
 *             credit: unsigned 32-bit big-endian byte count; end: empty;
 *             reset: a UTF-8 reason (may be empty)
 * ```
 *
 * The side that dials (the relay, for the tunnel) opens odd ids, the other
 * side even ones. Every stream starts with `window` bytes of credit in each
 * direction; a receiver grants credit back as its reader takes bytes (in
 * batches of at least half the window). A
 * sender that exceeds its credit, or a peer opening more than `maxStreams`,
 * gets the stream reset.
 *
 * A stream and the multiplexer share one credit protocol whose invariants
 * (window, grants, end, reset) are easier to check in one file; the frame
 * codec is in stream_frames.ts.
 *
 * @module
 */
import {
  decodeFrame,
  encodeFrame,
  FRAME_HEADER_BYTES,
  FrameKind,
  MAX_DATA_BYTES,
  MAX_OPEN_BYTES,
  writeHeader,
} from "./stream_frames.ts";

export {
  decodeFrame,
  encodeFrame,
  type Frame,
  FRAME_HEADER_BYTES,
  FrameKind,
  MAX_DATA_BYTES,
  MAX_OPEN_BYTES,
} from "./stream_frames.ts";

/**
 * Default credit per stream and direction: 512 KiB, 8 frames of the largest
 * data size. Against 256 KiB it halved the relay's CPU per MB tunnelled in
 * paired runs (credit comes back half as often, and a hop's scheduling
 * delay stalls the sender less): docs/performance.md, "Tunnel".
 */
export const DEFAULT_WINDOW = 512 * 1024;
/** Default cap on the streams open at once on one connection, per opener. */
export const DEFAULT_MAX_STREAMS = 256;

/** The stream was reset (by the peer, by this side, or by the connection's loss). */
export class StreamResetError extends Error {
  constructor(readonly reason: string) {
    super(`Stream reset: ${reason || "no reason given"}`);
    this.name = "StreamResetError";
  }
}

/** Options of {@linkcode StreamMux}. */
export interface StreamMuxOptions {
  /** Writes one encoded frame to the channel. */
  send(frame: Uint8Array): void;
  /** True on the side that dialled: it opens odd stream ids. */
  dialer: boolean;
  /** Called for each stream the peer opens, with its open payload. */
  onStream?: (stream: MuxStream, header: Uint8Array) => void;
  /** Credit per stream and direction (default {@linkcode DEFAULT_WINDOW}). */
  window?: number;
  /** Streams open at once, per side (default {@linkcode DEFAULT_MAX_STREAMS}). */
  maxStreams?: number;
}

/** Bytes of a frame payload to UTF-8 text. */
const text = new TextDecoder();
const encoder = new TextEncoder();

/**
 * One stream: a readable of the peer's bytes and a writable to it. Reading
 * grants the peer credit; writing waits for credit.
 */
export class MuxStream {
  readonly readable: ReadableStream<Uint8Array>;
  readonly writable: WritableStream<Uint8Array>;
  /** Bytes received and not yet read (at most the window). */
  #queued: Uint8Array[] = [];
  #queuedBytes = 0;
  #remoteEnded = false;
  #localEnded = false;
  #reset: StreamResetError | null = null;
  #credit: number;
  /** Bytes read and not yet granted back to the peer (under half the window). */
  #ungranted = 0;
  readonly #window: number;
  #creditWaiter: (() => void) | null = null;
  #pullWaiter: (() => void) | null = null;
  #readController!: ReadableStreamDefaultController<Uint8Array>;
  #writeController!: WritableStreamDefaultController;
  readonly #closed: Promise<void>;
  #resolveClosed!: () => void;

  constructor(readonly id: number, readonly mux: StreamMux, window: number) {
    this.#credit = window;
    this.#window = window;
    this.#closed = new Promise((r) => this.#resolveClosed = r);
    this.readable = new ReadableStream<Uint8Array>({
      start: (c) => {
        this.#readController = c;
      },
      pull: async () => {
        while (this.#queued.length === 0 && !this.#remoteEnded && !this.#reset) {
          await new Promise<void>((r) => this.#pullWaiter = r);
        }
        if (this.#reset) return; // errored already
        const chunk = this.#queued.shift();
        if (chunk) {
          this.#queuedBytes -= chunk.byteLength;
          this.#readController.enqueue(chunk);
          // Credit goes back in batches of half the window, not per chunk: one
          // credit frame (a socket write on this side, a read on the peer's)
          // per half window (256 KiB by default) instead of per data frame.
          // Safe from deadlock: a sender waits only at zero credit, when
          // queued + ungranted is the window, so reading the queue reaches
          // the batch size.
          this.#ungranted += chunk.byteLength;
          if (this.#ungranted >= this.#window / 2) {
            this.mux._grant(this, this.#ungranted);
            this.#ungranted = 0;
          }
          return;
        }
        this.#readController.close();
        this.#maybeDone();
      },
      cancel: (reason) => {
        this.reset(`reader cancelled${reason ? `: ${String(reason)}` : ""}`);
      },
    }, { highWaterMark: 0 });
    this.writable = new WritableStream<Uint8Array>({
      start: (c) => {
        this.#writeController = c;
      },
      write: async (chunk) => {
        let offset = 0;
        while (offset < chunk.byteLength) {
          while (this.#credit <= 0 && !this.#reset) {
            await new Promise<void>((r) => this.#creditWaiter = r);
          }
          if (this.#reset) throw this.#reset;
          const n = Math.min(this.#credit, MAX_DATA_BYTES, chunk.byteLength - offset);
          this.#credit -= n;
          this.mux._send(FrameKind.data, this.id, chunk.subarray(offset, offset + n));
          offset += n;
        }
      },
      close: () => {
        if (this.#reset) throw this.#reset;
        this.#localEnded = true;
        this.mux._send(FrameKind.end, this.id, new Uint8Array());
        this.#maybeDone();
      },
      abort: (reason) => {
        this.reset(`writer aborted${reason ? `: ${String(reason)}` : ""}`);
      },
    }, { highWaterMark: 1 });
  }

  /**
   * Waits until the stream may send (credit above zero) and resolves with
   * the credit; throws the StreamResetError once reset. With
   * {@linkcode sendFrame}, a producer can read straight into a frame's
   * buffer (a BYOB read) and skip the copy `writable` makes.
   */
  async waitForCredit(): Promise<number> {
    while (this.#credit <= 0 && !this.#reset) {
      await new Promise<void>((r) => this.#creditWaiter = r);
    }
    if (this.#reset) throw this.#reset;
    return this.#credit;
  }

  /**
   * Sends a data frame built in place: `frame` is {@linkcode FRAME_HEADER_BYTES}
   * of room for the header, then the payload (at most the credit and
   * {@linkcode MAX_DATA_BYTES}). The header is written into it and the
   * buffer is handed to the channel as it is (do not reuse it). Not to be
   * mixed with a write of `writable` in progress.
   */
  sendFrame(frame: Uint8Array): void {
    if (this.#reset) throw this.#reset;
    if (this.#localEnded) throw new TypeError("Stream ended");
    const n = frame.byteLength - FRAME_HEADER_BYTES;
    if (n <= 0) return;
    if (n > this.#credit || n > MAX_DATA_BYTES) {
      throw new RangeError(`Frame payload of ${n} bytes beyond the credit or MAX_DATA_BYTES`);
    }
    this.#credit -= n;
    writeHeader(frame, FrameKind.data, this.id);
    this.mux._sendRaw(frame);
  }

  /** Bytes received from the peer and not read yet. */
  get queuedBytes(): number {
    return this.#queuedBytes;
  }

  /** Credit left for sending. */
  get credit(): number {
    return this.#credit;
  }

  /** Resolves when the stream is done: ended both ways, or reset. */
  get closed(): Promise<void> {
    return this.#closed;
  }

  /** Whether the stream was reset, and why. */
  get resetReason(): string | null {
    return this.#reset?.reason ?? null;
  }

  /** Abandons the stream both ways and tells the peer. */
  reset(reason = ""): void {
    if (this.#reset) return;
    if (this.#localEnded && this.#remoteEnded) {
      this.#queued = [];
      this.#queuedBytes = 0;
      return this.#done();
    }
    this.mux._send(FrameKind.reset, this.id, encoder.encode(reason.slice(0, 200)));
    this._onReset(reason);
  }

  /** @internal The stream is gone: wake and fail everything waiting on it. */
  _onReset(reason: string): void {
    if (this.#reset) return;
    const err = new StreamResetError(reason);
    this.#reset = err;
    this.#queued = [];
    this.#queuedBytes = 0;
    try {
      this.#readController.error(err);
    } catch { /* closed already */ }
    try {
      this.#writeController.error(err);
    } catch { /* closed already */ }
    this.#creditWaiter?.();
    this.#pullWaiter?.();
    this.#done();
  }

  /** @internal Bytes from the peer; false when they exceed the credit it was given. */
  _onData(bytes: Uint8Array, window: number): boolean {
    if (this.#reset) return true;
    if (this.#remoteEnded || this.#queuedBytes + bytes.byteLength > window) return false;
    // Kept as is: receive() takes the frame's buffer over (ws hands a new one per message).
    this.#queued.push(bytes);
    this.#queuedBytes += bytes.byteLength;
    this.#wakeReader();
    return true;
  }

  /** @internal */
  _onCredit(n: number): void {
    this.#credit += n;
    const w = this.#creditWaiter;
    this.#creditWaiter = null;
    w?.();
  }

  /** @internal */
  _onEnd(): void {
    this.#remoteEnded = true;
    this.#wakeReader();
    // A side that never reads (a GET's empty request body) still frees the stream.
    this.#maybeDone();
  }

  #wakeReader(): void {
    const w = this.#pullWaiter;
    this.#pullWaiter = null;
    w?.();
  }

  #maybeDone(): void {
    if (this.#localEnded && this.#remoteEnded && this.#queued.length === 0) this.#done();
  }

  #done(): void {
    this.mux._forget(this);
    this.#resolveClosed();
  }
}

/** The multiplexer over one channel; feed it every frame received with {@linkcode receive}. */
export class StreamMux {
  readonly #opts: StreamMuxOptions;
  readonly #streams = new Map<number, MuxStream>();
  readonly #window: number;
  readonly #maxStreams: number;
  #nextId: number;
  #localOpen = 0;
  #remoteOpen = 0;
  #closed: string | null = null;

  constructor(options: StreamMuxOptions) {
    this.#opts = options;
    this.#window = options.window ?? DEFAULT_WINDOW;
    this.#maxStreams = options.maxStreams ?? DEFAULT_MAX_STREAMS;
    this.#nextId = options.dialer ? 1 : 2;
  }

  /** Streams open now. */
  get size(): number {
    return this.#streams.size;
  }

  /**
   * Opens a stream with `header` as its open payload. Throws a RangeError
   * when `maxStreams` are open already, and a StreamResetError once closed.
   */
  open(header: Uint8Array): MuxStream {
    if (this.#closed !== null) throw new StreamResetError(this.#closed);
    if (this.#localOpen >= this.#maxStreams) {
      throw new RangeError(`Too many open streams (at most ${this.#maxStreams})`);
    }
    if (header.byteLength > MAX_OPEN_BYTES) {
      throw new RangeError(`Stream header too large (at most ${MAX_OPEN_BYTES} bytes)`);
    }
    const id = this.#nextId;
    this.#nextId = this.#nextId + 2 > 0xffff_ffff ? this.#nextId % 2 || 2 : this.#nextId + 2;
    const stream = new MuxStream(id, this, this.#window);
    this.#streams.set(id, stream);
    this.#localOpen++;
    this._send(FrameKind.open, id, header);
    return stream;
  }

  /**
   * Handles one frame from the channel (an undecodable one is ignored). The
   * stream keeps a view of `bytes` until its reader takes it: pass a buffer
   * the channel will not reuse.
   */
  receive(bytes: Uint8Array): void {
    const frame = decodeFrame(bytes);
    if (!frame || this.#closed !== null) return;
    const { streamId, kind } = frame;
    if (kind === FrameKind.open) return this.#onOpen(streamId, frame.bytes);
    const stream = this.#streams.get(streamId);
    if (!stream) {
      // Frames for a stream already reset here may still be in flight.
      return;
    }
    switch (kind) {
      case FrameKind.data:
        if (!stream._onData(frame.bytes, this.#window)) {
          stream.reset("flow_control: data beyond the credit granted");
        }
        return;
      case FrameKind.credit:
        if (frame.bytes.byteLength === 4) {
          stream._onCredit(new DataView(frame.bytes.buffer, frame.bytes.byteOffset).getUint32(0));
        }
        return;
      case FrameKind.end:
        stream._onEnd();
        return;
      case FrameKind.reset:
        stream._onReset(text.decode(frame.bytes));
        return;
    }
  }

  /** The channel is gone: every open stream is reset with `reason`, and no more open. */
  close(reason = "connection lost"): void {
    if (this.#closed !== null) return;
    this.#closed = reason;
    for (const s of [...this.#streams.values()]) s._onReset(reason);
  }

  #onOpen(id: number, header: Uint8Array): void {
    const theirs = (id % 2 === 1) !== this.#opts.dialer;
    if (!theirs || this.#streams.has(id) || !this.#opts.onStream) {
      this._send(FrameKind.reset, id, encoder.encode("bad_open"));
      return;
    }
    if (this.#remoteOpen >= this.#maxStreams) {
      this._send(FrameKind.reset, id, encoder.encode("too_many_streams"));
      return;
    }
    const stream = new MuxStream(id, this, this.#window);
    this.#streams.set(id, stream);
    this.#remoteOpen++;
    this.#opts.onStream(stream, header.slice());
  }

  /** @internal */
  _send(kind: FrameKind, streamId: number, bytes: Uint8Array): void {
    if (this.#closed !== null) return;
    this._sendRaw(encodeFrame({ kind, streamId, bytes }));
  }

  /** @internal An encoded frame, as it is. */
  _sendRaw(frame: Uint8Array): void {
    if (this.#closed !== null) return;
    try {
      this.#opts.send(frame);
    } catch {
      // The channel is closing: its close resets the streams.
    }
  }

  /** @internal The reader took `n` bytes: the peer may send that many more. */
  _grant(stream: MuxStream, n: number): void {
    if (n <= 0 || !this.#streams.has(stream.id)) return;
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, n);
    this._send(FrameKind.credit, stream.id, b);
  }

  /** @internal */
  _forget(stream: MuxStream): void {
    if (this.#streams.get(stream.id) !== stream) return;
    this.#streams.delete(stream.id);
    const mine = (stream.id % 2 === 1) === this.#opts.dialer;
    if (mine) this.#localOpen--;
    else this.#remoteOpen--;
  }
}
