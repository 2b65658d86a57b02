/**
 * WebSockets through the HTTP tunnel (a dev server's hot reload): the
 * browser's socket ends at the relay, the service's at the runner, and one
 * tunnel stream between them carries the messages (docs/protocol.md,
 * "WebSocket streams").
 *
 * The stream opens with a {@linkcode TunnelWsHead}; the runner answers with
 * a response head (tunnel_api.ts's framing: 4-byte length, JSON) of status
 * 101 and the subprotocol the service chose, or an error. Then each message,
 * both ways, is `op (1 byte) | length (4 bytes, big-endian) | payload`:
 * op 1 text, 2 binary, 8 close (payload: 2-byte code, then a UTF-8 reason).
 *
 * @module
 */

/** The open payload of a WebSocket stream (JSON). */
export interface TunnelWsHead {
  kind: "ws";
  /** The loopback port on the runner, 1–65535. */
  port: number;
  /** Path and query on the service, starting with `/`. */
  path: string;
  /** The subprotocols the browser offered (`Sec-WebSocket-Protocol`). */
  protocols: string[];
  /** Other request headers (credentials and handshake headers removed). */
  headers: [string, string][];
}

/** The runner's answer to a WebSocket stream, before the messages. */
export type TunnelWsResponseHead =
  | { status: 101; protocol: string }
  | { status: number; headers: [string, string][] }
  | { error: { code: "port_closed" | "bad_target" | "upstream_error"; message: string } };

/**
 * Largest message either way: 1 MiB (a hot-reload update is a few KB). A
 * larger one closes the socket with 1009; each end holds at most one
 * message being put together, plus the stream's window.
 */
export const MAX_TUNNEL_WS_MESSAGE_BYTES = 1024 * 1024;

/** Bytes of a message's header (op and length). */
const HEADER = 5;

/** Message ops. */
export const WsOp = { text: 1, binary: 2, close: 8 } as const;

/** One message of a WebSocket stream. */
export type WsMessage =
  | { op: typeof WsOp.text; data: string }
  | { op: typeof WsOp.binary; data: Uint8Array }
  | { op: typeof WsOp.close; code: number; reason: string };

const enc = new TextEncoder();
const copy = Uint8Array.prototype.slice;
const dec = new TextDecoder();

/** Encodes one message for the stream. */
export function encodeWsMessage(msg: WsMessage): Uint8Array {
  let payload: Uint8Array;
  if (msg.op === WsOp.text) payload = enc.encode(msg.data);
  else if (msg.op === WsOp.binary) payload = msg.data;
  else {
    const reason = enc.encode(msg.reason.slice(0, 120));
    payload = new Uint8Array(2 + reason.byteLength);
    new DataView(payload.buffer).setUint16(0, msg.code);
    payload.set(reason, 2);
  }
  const out = new Uint8Array(HEADER + payload.byteLength);
  out[0] = msg.op;
  new DataView(out.buffer).setUint32(1, payload.byteLength);
  out.set(payload, HEADER);
  return out;
}

/** A message larger than {@linkcode MAX_TUNNEL_WS_MESSAGE_BYTES}, or an unknown op. */
export class WsFramingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WsFramingError";
  }
}

/** Puts messages back together from a stream's chunks, one message buffered at most. */
export class WsMessageReader {
  #buf: Uint8Array = new Uint8Array(0);

  constructor(readonly maxBytes = MAX_TUNNEL_WS_MESSAGE_BYTES) {}

  /** The messages `chunk` completes; throws a WsFramingError on a bad one. */
  push(chunk: Uint8Array): WsMessage[] {
    let buf: Uint8Array;
    if (this.#buf.byteLength === 0) buf = chunk;
    else {
      buf = new Uint8Array(this.#buf.byteLength + chunk.byteLength);
      buf.set(this.#buf);
      buf.set(chunk, this.#buf.byteLength);
    }
    const out: WsMessage[] = [];
    let at = 0;
    while (buf.byteLength - at >= HEADER) {
      const op = buf[at]!;
      const len = new DataView(buf.buffer, buf.byteOffset + at + 1, 4).getUint32(0);
      if (len > this.maxBytes) throw new WsFramingError(`Message too large: ${len} bytes`);
      if (op !== WsOp.text && op !== WsOp.binary && op !== WsOp.close) {
        throw new WsFramingError(`Unknown op: ${op}`);
      }
      if (buf.byteLength - at - HEADER < len) break;
      // A copy (a node Buffer's own slice() would be a view into the frame's buffer).
      const payload = copy.call(buf, at + HEADER, at + HEADER + len) as Uint8Array;
      at += HEADER + len;
      if (op === WsOp.text) out.push({ op, data: dec.decode(payload) });
      else if (op === WsOp.binary) out.push({ op, data: payload });
      else {
        const code = payload.byteLength >= 2
          ? new DataView(payload.buffer, payload.byteOffset).getUint16(0)
          : 1005;
        out.push({ op, code, reason: dec.decode(payload.subarray(2)) });
      }
    }
    this.#buf = copy.call(buf, at) as Uint8Array;
    return out;
  }
}

/** A close code a WebSocket may send (1000, 3000–4999, and the sendable 10xx). */
export function sendableCloseCode(code: number): number {
  if (code === 1000 || (code >= 3000 && code <= 4999)) return code;
  if ([1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011].includes(code)) return code;
  return 1000;
}
