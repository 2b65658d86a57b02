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
 * while a write is in flight go out together in the next write.
 *
 * @module
 */

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
  #seed = (Math.random() * 0xffffffff) >>> 0;
  #closeCode = 1006;

  private constructor(conn: Deno.TcpConn, rest: Uint8Array) {
    this.#conn = conn;
    this.closed = this.#read(rest);
  }

  /** Dials `url` (`ws://host:port/path`) and completes the upgrade. */
  static async connect(url: string, headers: Record<string, string> = {}): Promise<TcpWebSocket> {
    const u = new URL(url);
    if (u.protocol !== "ws:") throw new Error(`Only ws: URLs: '${url}'`);
    const conn = await Deno.connect({ hostname: u.hostname, port: Number(u.port || 80) });
    conn.setNoDelay(true);
    const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
    const lines = [
      `GET ${u.pathname}${u.search} HTTP/1.1`,
      `Host: ${u.host}`,
      "Upgrade: websocket",
      "Connection: Upgrade",
      `Sec-WebSocket-Key: ${key}`,
      "Sec-WebSocket-Version: 13",
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    await writeAll(conn, encoder.encode(lines.join("\r\n") + "\r\n\r\n"));
    let buf = new Uint8Array(0);
    for (;;) {
      const end = indexOfCrlfCrlf(buf);
      if (end >= 0) {
        const head = decoder.decode(buf.subarray(0, end));
        if (!/^HTTP\/1\.1 101 /.test(head)) {
          conn.close();
          throw new Error(`Upgrade refused: ${head.split("\r\n")[0]}`);
        }
        const accept = /\r\nsec-websocket-accept:\s*(\S+)/i.exec(head)?.[1];
        if (accept !== await acceptFor(key)) {
          conn.close();
          throw new Error("Upgrade answered with a wrong Sec-WebSocket-Accept");
        }
        return new TcpWebSocket(conn, buf.slice(end + 4));
      }
      const chunk = new Uint8Array(4096);
      const n = await conn.read(chunk);
      if (n === null) throw new Error("Connection closed during the upgrade");
      buf = concat(buf, chunk.subarray(0, n));
    }
  }

  /** Sends one text message. */
  send(text: string): void {
    if (!this.#open) return;
    this.#enqueue(this.#frame(0x1, encoder.encode(text)));
  }

  /** Sends a close frame; `closed` resolves once the server closes too. */
  close(code = 1000, reason = ""): void {
    if (!this.#open) return;
    const r = encoder.encode(reason.slice(0, 100));
    const body = new Uint8Array(2 + r.length);
    body[0] = code >> 8;
    body[1] = code & 0xff;
    body.set(r, 2);
    this.#enqueue(this.#frame(0x8, body));
    this.#open = false;
  }

  /** A masked frame (clients must mask; a cheap PRNG makes the keys). */
  #frame(opcode: number, payload: Uint8Array): Uint8Array {
    const n = payload.length;
    const head = n < 126 ? 2 : n < 65536 ? 4 : 10;
    const out = new Uint8Array(head + 4 + n);
    out[0] = 0x80 | opcode;
    if (n < 126) out[1] = 0x80 | n;
    else if (n < 65536) {
      out[1] = 0x80 | 126;
      out[2] = n >> 8;
      out[3] = n & 0xff;
    } else {
      out[1] = 0x80 | 127;
      new DataView(out.buffer).setBigUint64(2, BigInt(n));
    }
    // xorshift32: the mask only has to differ per frame, not be secret here.
    let s = this.#seed;
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    this.#seed = s >>> 0;
    const mask = [s & 0xff, (s >>> 8) & 0xff, (s >>> 16) & 0xff, (s >>> 24) & 0xff];
    out.set(mask, head);
    const at = head + 4;
    for (let i = 0; i < n; i++) out[at + i] = payload[i]! ^ mask[i & 3]!;
    return out;
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
        const bytes = frames.length === 1 ? frames[0]! : concat(...frames);
        await writeAll(this.#conn, bytes);
      }
    } catch {
      // The read side sees the end and resolves `closed`.
      this.#open = false;
    } finally {
      this.#writing = false;
    }
  }

  async #read(initial: Uint8Array): Promise<number> {
    let buf = initial;
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
            if (this.#open) this.#enqueue(this.#frame(0xa, payload.slice()));
            continue;
          }
          if (opcode === 0x1 || opcode === 0x0) {
            parts.push(payload.slice());
            if (b0 & 0x80) {
              const text = decoder.decode(parts.length === 1 ? parts[0]! : concat(...parts));
              parts = [];
              this.onmessage(text);
            }
          }
        }
        buf = off === buf.length ? new Uint8Array(0) : buf.slice(off);
        const n = await this.#conn.read(chunk);
        if (n === null) return this.#closeCode;
        buf = buf.length === 0 ? chunk.slice(0, n) : concat(buf, chunk.subarray(0, n));
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

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
}

function concat(...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function indexOfCrlfCrlf(buf: Uint8Array): number {
  for (let i = 0; i + 3 < buf.length; i++) {
    if (buf[i] === 13 && buf[i + 1] === 10 && buf[i + 2] === 13 && buf[i + 3] === 10) return i;
  }
  return -1;
}

async function acceptFor(key: string): Promise<string> {
  const digest = await crypto.subtle.digest(
    "SHA-1",
    encoder.encode(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"),
  );
  return btoa(String.fromCharCode(...new Uint8Array(digest)));
}
