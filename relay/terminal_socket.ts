/**
 * The browser's end of a web terminal (`/_terminal?runnerId=…&terminalId=…`):
 * one stream over the runner's tunnel link per socket. Binary messages are
 * bytes both ways (output from the runner, keystrokes from the browser); a
 * text message `{"t":"resize","cols":N,"rows":N}` resizes the PTY. Output is
 * read from the stream only while the socket's send buffer is small, so a
 * browser that stops reading holds the stream's credit and the runner pauses
 * that terminal's PTY: memory here stays at the buffer cap plus the window.
 *
 * @module
 */
import { CloseCode } from "../shared/protocol.ts";
import type { MuxStream } from "../shared/streams.ts";
import {
  encodeTerminalMsg,
  MAX_TERMINAL_DIMENSION,
  TERMINAL_NOT_FOUND_CLOSE,
  TerminalMsg,
  type TerminalStreamHead,
} from "../shared/terminal_api.ts";
import type { StreamLink } from "./tunnel_link.ts";
import type { ChannelSocket } from "./ws_transport.ts";

/** Output waiting in the socket's send buffer before the relay stops reading the stream. */
const SEND_BUFFER_BYTES = 256 * 1024;
/** Keystrokes waiting for the runner's credit before the socket is closed (a flood). */
const MAX_PENDING_INPUT_BYTES = 1024 * 1024;

interface BinarySocket {
  send(data: Uint8Array | string): void;
}

/** Attaches `socket` to terminal `terminalId` over `link`. */
export function acceptTerminalSocket(
  socket: ChannelSocket,
  link: StreamLink,
  terminalId: string,
): void {
  let stream: MuxStream;
  try {
    const head: TerminalStreamHead = { kind: "terminal", terminalId };
    stream = link.mux.open(new TextEncoder().encode(JSON.stringify(head)));
  } catch {
    socket.close(CloseCode.internalError, "Runner tunnel unavailable");
    return;
  }
  const writer = stream.writable.getWriter();
  let pendingInput = 0;
  let closed = false;
  const end = (code: number, reason: string) => {
    if (closed) return;
    closed = true;
    stream.reset("viewer left");
    try {
      socket.close(code, reason);
    } catch { /* gone */ }
  };

  const forward = (msg: Uint8Array) => {
    pendingInput += msg.byteLength;
    if (pendingInput > MAX_PENDING_INPUT_BYTES) {
      return end(CloseCode.tooBig, "Input faster than the terminal takes it");
    }
    writer.write(msg).then(() => pendingInput -= msg.byteLength, () => {});
  };

  socket.onmessage = (ev) => {
    const data = ev.data;
    if (data instanceof Uint8Array) {
      if (data.byteLength > 0) forward(encodeTerminalMsg(TerminalMsg.input, data.slice()));
      return;
    }
    if (typeof data !== "string") return;
    let msg: { t?: unknown; cols?: unknown; rows?: unknown };
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    if (msg?.t !== "resize" || !valid(msg.cols) || !valid(msg.rows)) return;
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint16(0, msg.cols);
    new DataView(b.buffer).setUint16(2, msg.rows);
    forward(encodeTerminalMsg(TerminalMsg.resize, b));
  };
  socket.onclose = () => {
    closed = true;
    stream.reset("viewer left");
  };
  socket.onerror = () => {};

  (async () => {
    for await (const chunk of stream.readable) {
      if (closed) return;
      (socket as unknown as BinarySocket).send(chunk);
      while (!closed && socket.bufferedAmount > SEND_BUFFER_BYTES) {
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    end(CloseCode.normal, "Terminal ended");
  })().catch((err) => {
    const reason = String(err?.reason ?? err);
    end(
      /terminal_not_found/.test(reason) ? TERMINAL_NOT_FOUND_CLOSE : CloseCode.normal,
      /terminal_not_found/.test(reason) ? "Terminal not found" : "Terminal stream closed",
    );
  });
}

function valid(n: unknown): n is number {
  return Number.isInteger(n) && (n as number) >= 1 && (n as number) <= MAX_TERMINAL_DIMENSION;
}
