/**
 * HTTP/1.1 and WebSocket spoken by hand over TCP, for tests that need what
 * `fetch` and `WebSocket` will not do: paths sent without normalisation,
 * arbitrary bytes, a socket that never reads, or headers that never end.
 *
 * @module
 */
import { concatBytes } from "../../shared/bytes.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A raw HTTP request. */
export interface RawRequest {
  method: string;
  /** The request target, sent as is (no normalisation, no encoding). */
  target: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Give up (and fail) after this long. Default 10 s. */
  timeoutMs?: number;
}

/** A parsed raw HTTP response. */
export interface RawResponse {
  status: number;
  headers: Headers;
  body: Uint8Array;
  text: string;
}

/** The request timed out: the server did not finish answering. */
export class RawTimeoutError extends Error {
  constructor(readonly request: string) {
    super(`No complete answer in time: '${request}'`);
    this.name = "RawTimeoutError";
  }
}

/**
 * Sends one request on a fresh connection (`Connection: close` unless the
 * request names its own) and reads one whole answer.
 */
export async function rawRequest(port: number, req: RawRequest): Promise<RawResponse> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const timer = setTimeout(() => conn.close(), req.timeoutMs ?? 10_000);
  let timedOut = false;
  try {
    const body = typeof req.body === "string" ? encoder.encode(req.body) : req.body;
    const headers = req.headers ?? {};
    // A Host of the caller's replaces the default one (fetch cannot send one).
    const named = Object.keys(headers).some((k) => k.toLowerCase() === "host");
    let head = `${req.method} ${req.target} HTTP/1.1\r\n` +
      (named ? "" : `host: 127.0.0.1:${port}\r\n`);
    if (!Object.keys(headers).some((k) => k.toLowerCase() === "connection")) {
      head += "connection: close\r\n";
    }
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    if (body) head += `content-length: ${body.byteLength}\r\n`;
    head += "\r\n";
    let writeError: Error | null = null;
    try {
      await writeAll(conn, concatBytes(encoder.encode(head), body ?? new Uint8Array()));
    } catch (err) {
      // A server may answer before the body is all sent (431, 413) and close:
      // read its answer, as HTTP clients do.
      if (!(err instanceof Deno.errors.BrokenPipe || err instanceof Deno.errors.ConnectionReset)) {
        throw err;
      }
      writeError = err;
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    const buf = new Uint8Array(64 * 1024);
    let parsed: RawResponse | null = null;
    while (!parsed) {
      let n: number | null;
      try {
        n = await conn.read(buf);
      } catch (err) {
        if (err instanceof Deno.errors.BadResource || err instanceof Deno.errors.Interrupted) {
          timedOut = true;
          break;
        }
        if (err instanceof Deno.errors.ConnectionReset) break;
        throw err;
      }
      if (n === null) break;
      chunks.push(buf.slice(0, n));
      size += n;
      // Most answers are one read: only parse when the end may be there.
      if (size < 4 * 1024 * 1024 || n < buf.length) {
        parsed = parseResponse(concatBytes(...chunks), req.method === "HEAD", false);
      }
    }
    parsed ??= parseResponse(concatBytes(...chunks), req.method === "HEAD", true);
    if (!parsed) {
      if (writeError) throw writeError;
      if (timedOut) throw new RawTimeoutError(`${req.method} ${req.target}`);
      throw new Error(`Incomplete HTTP answer to '${req.method} ${req.target}': ${size} bytes`);
    }
    return parsed;
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch {
      // Closed by the timer.
    }
  }
}

function parseResponse(raw: Uint8Array, head: boolean, eof: boolean): RawResponse | null {
  const end = indexOf(raw, encoder.encode("\r\n\r\n"));
  if (end < 0) return null;
  const lines = decoder.decode(raw.subarray(0, end)).split("\r\n");
  const status = Number(lines[0]!.split(" ")[1]);
  const headers = new Headers();
  for (const line of lines.slice(1)) {
    const i = line.indexOf(":");
    if (i > 0) headers.append(line.slice(0, i).trim(), line.slice(i + 1).trim());
  }
  let body = raw.subarray(end + 4);
  if (head || status < 200 || status === 204 || status === 304) body = new Uint8Array();
  else if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) {
    const out = dechunk(body);
    if (!out) return null;
    body = out;
  } else if (headers.has("content-length")) {
    const len = Number(headers.get("content-length"));
    if (body.length < len) return null;
    body = body.subarray(0, len);
  } else if (!eof) return null; // The body ends with the connection.
  return { status, headers, body, text: decoder.decode(body) };
}

function dechunk(data: Uint8Array): Uint8Array | null {
  const parts: Uint8Array[] = [];
  let i = 0;
  while (true) {
    const eol = indexOf(data, encoder.encode("\r\n"), i);
    if (eol < 0) return null;
    const size = parseInt(decoder.decode(data.subarray(i, eol)), 16);
    if (Number.isNaN(size)) return null;
    if (size === 0) return concatBytes(...parts);
    if (eol + 2 + size > data.length) return null;
    parts.push(data.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
}

function indexOf(hay: Uint8Array, needle: Uint8Array, from = 0): number {
  outer: for (let i = from; i <= hay.length - needle.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/** Writes all of `data` (a `write` may take only part of it). */
export async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

/** A WebSocket client frame (masked, as RFC 6455 requires of clients). */
export function clientFrame(payload: Uint8Array, opcode = 0x1): Uint8Array {
  const len = payload.length;
  const head = len < 126 ? 2 : len < 65536 ? 4 : 10;
  const frame = new Uint8Array(head + 4 + len);
  frame[0] = 0x80 | opcode;
  if (len < 126) frame[1] = 0x80 | len;
  else if (len < 65536) {
    frame[1] = 0x80 | 126;
    new DataView(frame.buffer).setUint16(2, len);
  } else {
    frame[1] = 0x80 | 127;
    new DataView(frame.buffer).setBigUint64(2, BigInt(len));
  }
  const mask = crypto.getRandomValues(new Uint8Array(4));
  frame.set(mask, head);
  for (let i = 0; i < len; i++) frame[head + 4 + i] = payload[i]! ^ mask[i & 3]!;
  return frame;
}

/** A WebSocket opened by hand; after the handshake it reads nothing unless asked. */
export interface RawWebSocket {
  conn: Deno.TcpConn;
  /** The handshake answer's status line and headers. */
  status: number;
  /** Sends a masked text frame. */
  sendText(text: string): Promise<void>;
  /** Closes the TCP connection (no closing handshake). */
  close(): void;
}

/**
 * Does the WebSocket handshake on `path` with extra `headers` and returns
 * once the server answered 101. The caller decides whether to ever read.
 */
export async function openRawWebSocket(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<RawWebSocket> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
    const named = Object.keys(headers).some((k) => k.toLowerCase() === "host");
    let head = `GET ${path} HTTP/1.1\r\n${named ? "" : `host: 127.0.0.1:${port}\r\n`}` +
      `upgrade: websocket\r\n` +
      `connection: Upgrade\r\nsec-websocket-key: ${key}\r\nsec-websocket-version: 13\r\n`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    await writeAll(conn, encoder.encode(head + "\r\n"));
    // Read byte by byte up to the end of the headers, so no frame is consumed.
    const got: number[] = [];
    const one = new Uint8Array(1);
    while (
      got.length < 4 || got[got.length - 4] !== 13 || got[got.length - 3] !== 10 ||
      got[got.length - 2] !== 13 || got[got.length - 1] !== 10
    ) {
      const n = await conn.read(one);
      if (n === null) throw new Error(`Handshake on ${path}: connection closed`);
      got.push(one[0]!);
      if (got.length > 16 * 1024) throw new Error(`Handshake on ${path}: headers too long`);
    }
    const status = Number(decoder.decode(new Uint8Array(got)).split(" ")[1]);
    if (status !== 101) throw new Error(`Handshake on ${path}: status ${status}`);
    return {
      conn,
      status,
      sendText: (text) => writeAll(conn, clientFrame(encoder.encode(text))),
      close: () => {
        try {
          conn.close();
        } catch {
          // Already closed.
        }
      },
    };
  } catch (err) {
    conn.close();
    throw err;
  }
}
