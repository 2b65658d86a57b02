/**
 * Wire types of the web terminal (docs/api.md "Terminals", docs/protocol.md
 * "Terminal streams").
 *
 * @module
 */

/** Where the browser attaches to a terminal. */
export const TERMINAL_WS_PATH = "/_terminal";
/** The close code of a terminal socket whose terminal the runner does not have. */
export const TERMINAL_NOT_FOUND_CLOSE = 4404;
/** Largest message a browser may send on a terminal socket (a paste, a resize). */
export const MAX_TERMINAL_MESSAGE_BYTES = 64 * 1024;
/** Bytes of output a terminal keeps to replay on attach. */
export const TERMINAL_SCROLLBACK_BYTES = 64 * 1024;
/** Terminals open at once on one runner. */
export const MAX_TERMINALS_PER_RUNNER = 16;
/** Largest terminal size accepted. */
export const MAX_TERMINAL_DIMENSION = 1000;

/** One terminal as listed. */
export interface TerminalInfo {
  terminalId: string;
  cwd: string;
  shell: string;
  cols: number;
  rows: number;
  /** ISO time it started. */
  createdAt: string;
  /** Viewers attached now. */
  viewers: number;
}

/** The open payload of a terminal stream (JSON), relay → runner. */
export interface TerminalStreamHead {
  kind: "terminal";
  terminalId: string;
}

/**
 * Messages on a terminal stream from relay to runner: 1 byte type, 4-byte
 * big-endian length, payload. Runner to relay the stream is raw output
 * bytes (the scrollback first), no framing.
 */
export const TerminalMsg = { input: 0, resize: 1 } as const;

/** Encodes one relay → runner terminal message. */
export function encodeTerminalMsg(type: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + payload.byteLength);
  out[0] = type;
  new DataView(out.buffer).setUint32(1, payload.byteLength);
  out.set(payload, 5);
  return out;
}

/** Splits a byte stream back into terminal messages (keeps a partial tail). */
export class TerminalMsgReader {
  #buf = new Uint8Array(0);
  /** Largest payload accepted: a message beyond it is a broken peer. */
  constructor(readonly maxPayload = 64 * 1024) {}

  /** Feeds bytes; returns the whole messages now available. Throws on an oversized one. */
  push(bytes: Uint8Array): { type: number; payload: Uint8Array }[] {
    const merged = new Uint8Array(this.#buf.byteLength + bytes.byteLength);
    merged.set(this.#buf);
    merged.set(bytes, this.#buf.byteLength);
    const out: { type: number; payload: Uint8Array }[] = [];
    let at = 0;
    while (merged.byteLength - at >= 5) {
      const len = new DataView(merged.buffer, at + 1, 4).getUint32(0);
      if (len > this.maxPayload) throw new RangeError("terminal message too large");
      if (merged.byteLength - at - 5 < len) break;
      out.push({ type: merged[at]!, payload: merged.slice(at + 5, at + 5 + len) });
      at += 5 + len;
    }
    this.#buf = merged.slice(at);
    return out;
  }
}

/** `POST /api/runners/terminal`. */
export interface OpenTerminalRequest {
  runnerId: string;
  /** Inside the runner's workspace roots; default: its default folder. */
  cwd?: string;
  cols?: number;
  rows?: number;
}

/** Its answer. */
export interface OpenTerminalResponse extends TerminalInfo {
  ok: true;
  runnerId: string;
}
