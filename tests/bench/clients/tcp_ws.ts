/**
 * A small WebSocket client on a raw `Deno.connect` socket with TCP_NODELAY,
 * the bench's publisher for baton's synthetic runner and the bare
 * broadcaster alike, so both servers get the same input at the same cost.
 *
 * Neither library client fits that role. Deno's `WebSocket` leaves Nagle on,
 * and once the relay answers a stream with acks its kernel holds back bare
 * ACKs, so the publisher's frames wait on them (see runner/relay_socket.ts);
 * the bare server never answers, so only baton would pay. npm:ws (the
 * daemon's client) sets TCP_NODELAY but costs the load generator ~20–26 µs
 * per frame on Deno's node:net, three times Deno's client; at one viewer
 * that made the publisher, not the server, the bottleneck.
 *
 * Text frames only, no extensions, no fragmentation on send. Frames sent
 * while a write is in flight go out together in the next write. The
 * handshake and the masked frames are the test harness's (raw_http.ts).
 *
 * @module
 */

import { concatBytes } from "../../../shared/bytes.ts";
import { clientFrame, openRawWebSocket, writeAll } from "../../harness/raw_http.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A connected client. */
export class TcpWebSocket {
  /** Called with the text of every message from the server. */
  onmessage: (text: string) => void = () => {};
  /** Resolves with the close code (1006 when the connection just ended). */
  readonly closed: Promise<number>;
  readonly #conn: Deno.TcpConn;
  #queue: Uint8Array[] = [];
  #writing = false;
  #open = true;
  #closeCode = 1006;

  private constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
    this.closed = this.#read();
  }

  /** Dials `url` (`ws://127.0.0.1:port/path`) and completes the upgrade. */
  static async connect(url: string, headers: Record<string, string> = {}): Promise<TcpWebSocket> {
    const u = new URL(url);
    const { conn } = await openRawWebSocket(Number(u.port), u.pathname + u.search, headers);
    conn.setNoDelay(true);
    return new TcpWebSocket(conn);
  }

  /** Sends one text message. */
  send(text: string): void {
    if (!this.#open) return;
    this.#enqueue(clientFrame(encoder.encode(text)));
  }

  /** Sends a close frame; `closed` resolves once the server closes too. */
  close(code = 1000, reason = ""): void {
    if (!this.#open) return;
    const r = encoder.encode(reason.slice(0, 100));
    const body = new Uint8Array(2 + r.length);
    body[0] = code >> 8;
    body[1] = code & 0xff;
    body.set(r, 2);
    this.#enqueue(clientFrame(body, 0x8));
    this.#open = false;
  }

  #enqueue(frame: Uint8Array): void {
    this.#queue.push(frame);
    if (!this.#writing) this.#drain();
  }

  async #drain(): Promise<void> {
    this.#writing = true;
    try {
      while (this.#queue.length > 0) {
        const frames = this.#queue;
        this.#queue = [];
        const bytes = frames.length === 1 ? frames[0]! : concatBytes(...frames);
        await writeAll(this.#conn, bytes);
      }
    } catch {
      // The read side sees the end and resolves `closed`.
      this.#open = false;
    } finally {
      this.#writing = false;
    }
  }

  async #read(): Promise<number> {
    let buf: Uint8Array = new Uint8Array(0);
    let parts: Uint8Array[] = [];
    const chunk = new Uint8Array(256 * 1024);
    try {
      for (;;) {
        // Parse every complete frame in the buffer.
        let off = 0;
        for (;;) {
          if (buf.length - off < 2) break;
          const b0 = buf[off]!;
          const b1 = buf[off + 1]!;
          let len = b1 & 0x7f;
          let head = 2;
          if (len === 126) {
            if (buf.length - off < 4) break;
            len = (buf[off + 2]! << 8) | buf[off + 3]!;
            head = 4;
          } else if (len === 127) {
            if (buf.length - off < 10) break;
            len = Number(new DataView(buf.buffer, buf.byteOffset + off + 2, 8).getBigUint64(0));
            head = 10;
          }
          if (b1 & 0x80) throw new Error("Server frames must not be masked");
          if (buf.length - off < head + len) break;
          const payload = buf.subarray(off + head, off + head + len);
          off += head + len;
          const opcode = b0 & 0x0f;
          if (opcode === 0x8) {
            this.#closeCode = len >= 2 ? (payload[0]! << 8) | payload[1]! : 1005;
            if (this.#open) this.close(this.#closeCode);
            return this.#closeCode;
          }
          if (opcode === 0x9) {
            if (this.#open) this.#enqueue(clientFrame(payload.slice(), 0xa));
            continue;
          }
          if (opcode === 0x1 || opcode === 0x0) {
            parts.push(payload.slice());
            if (b0 & 0x80) {
              const text = decoder.decode(parts.length === 1 ? parts[0]! : concatBytes(...parts));
              parts = [];
              this.onmessage(text);
            }
          }
        }
        buf = off === buf.length ? new Uint8Array(0) : buf.slice(off);
        const n = await this.#conn.read(chunk);
        if (n === null) return this.#closeCode;
        buf = buf.length === 0 ? chunk.slice(0, n) : concatBytes(buf, chunk.subarray(0, n));
      }
    } catch {
      return this.#closeCode;
    } finally {
      this.#open = false;
      try {
        this.#conn.close();
      } catch {
        // Already closed.
      }
    }
  }
}
