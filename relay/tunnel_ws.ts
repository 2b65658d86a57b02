/**
 * A browser's WebSocket through the HTTP tunnel (a dev server's hot reload,
 * a preview's live data): the relay asks the runner to connect to
 * `ws://127.0.0.1:{port}{path}` first, over a new tunnel stream, and
 * completes the browser's handshake only once the service accepted (with
 * the subprotocol it chose), so a port nothing listens on answers 502.
 * Messages then pass both ways as shared/tunnel_ws_api.ts frames them.
 *
 * Memory stays bounded: a message is at most 1 MiB (larger closes with
 * 1009, by the transport's limit here and the runner's), the browser's
 * socket is paused while the stream has no credit for what it sent, and
 * the stream is read only while the browser's send buffer is under
 * {@linkcode SEND_BUFFER_BYTES} (the runner then pauses the service's
 * socket in turn). A close on either side closes the other with its code.
 *
 * @module
 */
import { CloseCode } from "../shared/protocol.ts";
import type { MuxStream } from "../shared/streams.ts";
import {
  encodeWsMessage,
  sendableCloseCode,
  type TunnelWsHead,
  type TunnelWsResponseHead,
  type WsMessage,
  WsMessageReader,
  WsOp,
} from "../shared/tunnel_ws_api.ts";
import type { PreviewSettings, StreamLink } from "./tunnel_link.ts";
import {
  askRunner,
  failure,
  forwardedHeaders,
  type ProxyTarget,
  serviceFailure,
  TunnelFailure,
} from "./tunnel_proxy.ts";
import type { ChannelSocket } from "./ws_transport.ts";

/** Output waiting in the browser's send buffer before the relay stops reading the stream. */
const SEND_BUFFER_BYTES = 256 * 1024;
/** Input written to the stream and not yet taken by the runner before the browser is paused. */
const PENDING_INPUT_BYTES = 256 * 1024;

/** How long a closed socket's stream waits for the runner's end before it is reset. */
const CLOSE_GRACE_MS = 5000;

/** Handshake headers the relay and the runner each make for themselves. */
const HANDSHAKE = /^sec-websocket-(key|version|extensions|protocol|accept)$/;

/** Whether `req` asks for a WebSocket. */
export function isUpgrade(req: Request): boolean {
  return req.headers.get("upgrade")?.toLowerCase() === "websocket";
}

/** What the relay uses of ws's socket beyond ChannelSocket: binary sends and pausing. */
interface WsSocket extends ChannelSocket {
  send(data: string | Uint8Array, options?: { binary: boolean }): void;
  pause(): void;
  resume(): void;
}

/** Passes the WebSocket of `req` through to the service of `target`. */
export async function proxyWebSocket(
  req: Request,
  link: StreamLink,
  target: ProxyTarget,
  upgrade: PreviewSettings["upgrade"],
): Promise<Response> {
  if (!upgrade || req.method !== "GET") {
    return failure(
      req,
      new TunnelFailure(400, "bad_upgrade", "Invalid WebSocket handshake"),
      target.sandbox,
    );
  }
  const protocols = (req.headers.get("sec-websocket-protocol") ?? "").split(",")
    .map((p) => p.trim()).filter((p) => p.length > 0).slice(0, 16);
  const head: TunnelWsHead = {
    kind: "ws",
    port: target.port,
    path: target.path,
    protocols,
    headers: forwardedHeaders(req, target).filter(([k]) => !HANDSHAKE.test(k)),
  };
  const answer = await askRunner<TunnelWsResponseHead>(req, link, target, head);
  if (answer instanceof Response) return answer;
  const { stream, reader } = answer;
  const h = answer.head;
  if ("error" in h || h.status !== 101) {
    stream.reset("refused");
    const f = "error" in h
      ? serviceFailure(h.error, target.port)
      : new TunnelFailure(502, "upgrade_refused", `The service refused the WebSocket: ${h.status}`);
    return failure(req, f, target.sandbox);
  }
  const protocol =
    "protocol" in h && typeof h.protocol === "string" && protocols.includes(h.protocol)
      ? h.protocol
      : undefined;
  let upgraded;
  try {
    upgraded = upgrade(req, {
      channel: "preview",
      address: "",
      authenticated: true,
      ...(protocol ? { protocol } : {}),
    });
  } catch (err) {
    stream.reset("handshake failed");
    throw err;
  }
  pipe(upgraded.socket as WsSocket, stream, reader, answer.rest);
  return upgraded.response;
}

/** Carries messages between the browser's socket and the stream until either closes. */
function pipe(
  socket: WsSocket,
  stream: MuxStream,
  reader: ReadableStreamDefaultReader<Uint8Array>,
  first: Uint8Array,
): void {
  const writer = stream.writable.getWriter();
  let pending = 0;
  let paused = false;
  let closed = false;
  /** Tells the runner, then waits for its end of the stream (or resets it after a while). */
  const closeStream = (code: number, reason: string) => {
    writer.write(encodeWsMessage({ op: WsOp.close, code, reason }))
      .then(() => writer.close())
      .catch(() => stream.reset("closed"));
    const timer = setTimeout(() => stream.reset("close timeout"), CLOSE_GRACE_MS);
    stream.closed.then(() => clearTimeout(timer));
  };
  const end = (code: number, reason: string) => {
    if (closed) return;
    closed = true;
    closeStream(code, reason);
    try {
      socket.close(sendableCloseCode(code), reason.slice(0, 120));
    } catch { /* gone */ }
  };
  const forward = (msg: WsMessage) => {
    const bytes = encodeWsMessage(msg);
    pending += bytes.byteLength;
    if (pending > PENDING_INPUT_BYTES && !paused) {
      paused = true;
      socket.pause();
    }
    writer.write(bytes).then(() => {
      pending -= bytes.byteLength;
      if (paused && pending <= PENDING_INPUT_BYTES / 2) {
        paused = false;
        socket.resume();
      }
    }, () => {});
  };
  socket.onmessage = (ev) => {
    if (closed) return;
    const data = ev.data;
    if (typeof data === "string") forward({ op: WsOp.text, data });
    else if (data instanceof Uint8Array) forward({ op: WsOp.binary, data: data.slice() });
  };
  socket.onclose = (ev) => {
    if (closed) return;
    closed = true;
    closeStream(ev.code || 1000, ev.reason ?? "");
  };
  socket.onerror = () => {};

  (async () => {
    const messages = new WsMessageReader();
    let chunk: Uint8Array | undefined = first;
    for (;;) {
      // Once closed, what still comes is read and dropped until the runner's end (or reset):
      // a stream left unread would never be freed.
      if (!closed && chunk && chunk.byteLength > 0) {
        for (const m of messages.push(chunk)) {
          if (m.op === WsOp.close) {
            end(m.code, m.reason);
            break;
          }
          if (m.op === WsOp.text) socket.send(m.data);
          else socket.send(m.data, { binary: true });
        }
      }
      while (!closed && socket.bufferedAmount > SEND_BUFFER_BYTES) {
        await new Promise((r) => setTimeout(r, 10));
      }
      const next = await reader.read();
      if (next.done) return end(CloseCode.normal, "");
      chunk = next.value;
    }
  })().catch((err) => {
    const tooBig = err?.name === "WsFramingError";
    end(tooBig ? 1009 : 1011, tooBig ? "Message too large" : "Tunnel stream closed");
    stream.reset(tooBig ? "message too large" : "closed");
  });
}
