/**
 * A WebSocket client on a raw TCP socket for the limits tests: it can stream
 * one huge message without holding it (the frame header first, then the
 * payload chunk by chunk), and it reports the close code the server sent.
 *
 * @module
 */
import { concatBytes } from "../../shared/bytes.ts";
import { clientFrame, openRawWebSocket, writeAll } from "./raw_http.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** An open client socket; it answers pings and collects text messages. */
export class WsPeer {
  readonly messages: unknown[] = [];
  /** The server's close code; 1006 when the connection ended without one. */
  readonly closed: Promise<number>;
  #waiters: { test: (m: unknown) => boolean; resolve: (m: unknown) => void }[] = [];

  private constructor(readonly conn: Deno.TcpConn) {
    this.closed = this.#read();
  }

  /** Opens `path` on 127.0.0.1 (or `hostname`) with extra handshake `headers`. */
  static async open(
    port: number,
    path: string,
    headers: Record<string, string> = {},
  ): Promise<WsPeer> {
    const { conn } = await openRawWebSocket(port, path, headers);
    return new WsPeer(conn);
  }

  /** Sends one text message whole. */
  async send(msg: unknown): Promise<void> {
    await writeAll(this.conn, clientFrame(encoder.encode(JSON.stringify(msg))));
  }

  /** The next message (past or future) for which `test` holds. */
  next(test: (m: unknown) => boolean, ms = 10_000): Promise<unknown> {
    const seen = this.messages.find(test);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("No such message in time")), ms);
      this.#waiters.push({
        test,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
      });
    });
  }

  /**
   * Streams one text message of `size` bytes (spaces) in 256 KB writes,
   * stopping when the server closes. Returns the bytes written.
   */
  async stream(size: number): Promise<number> {
    const head = new Uint8Array(14);
    head[0] = 0x81;
    head[1] = 0x80 | 127;
    new DataView(head.buffer).setBigUint64(2, BigInt(size));
    // A zero mask leaves the payload as is, so one chunk serves every write.
    await writeAll(this.conn, head);
    const chunk = new Uint8Array(256 * 1024).fill(0x20);
    let sent = 0;
    let over = false;
    this.closed.then(() => over = true);
    try {
      while (sent < size && !over) {
        const n = Math.min(chunk.length, size - sent);
        await writeAll(this.conn, chunk.subarray(0, n));
        sent += n;
      }
    } catch {
      // The server closed the connection.
    }
    return sent;
  }

  close(): void {
    try {
      this.conn.close();
    } catch {
      // Already closed.
    }
  }

  async #read(): Promise<number> {
    let buf: Uint8Array = new Uint8Array(0);
    const chunk = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        for (;;) {
          if (buf.length < 2) break;
          let len = buf[1]! & 0x7f;
          let head = 2;
          if (len === 126) {
            if (buf.length < 4) break;
            len = (buf[2]! << 8) | buf[3]!;
            head = 4;
          } else if (len === 127) {
            if (buf.length < 10) break;
            len = Number(new DataView(buf.buffer, buf.byteOffset + 2, 8).getBigUint64(0));
            head = 10;
          }
          if (buf.length < head + len) break;
          const opcode = buf[0]! & 0x0f;
          const payload = buf.slice(head, head + len);
          buf = buf.slice(head + len);
          if (opcode === 0x8) return len >= 2 ? (payload[0]! << 8) | payload[1]! : 1005;
          if (opcode === 0x9) await writeAll(this.conn, clientFrame(payload, 0xa)).catch(() => {});
          if (opcode === 0x1) this.#deliver(JSON.parse(decoder.decode(payload)));
        }
        const n = await this.conn.read(chunk);
        if (n === null) return 1006;
        buf = concatBytes(buf, chunk.subarray(0, n));
      }
    } catch {
      return 1006;
    } finally {
      this.close();
    }
  }

  #deliver(m: unknown): void {
    this.messages.push(m);
    for (const w of [...this.#waiters]) {
      if (w.test(m)) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.resolve(m);
      }
    }
  }
}
