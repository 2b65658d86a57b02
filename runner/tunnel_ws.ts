/**
 * The runner's end of a WebSocket through the HTTP tunnel: connects to
 * `ws://127.0.0.1:{port}{path}` (loopback only, as HTTP streams), answers
 * the relay with 101 and the chosen subprotocol (or the refusal), then
 * carries messages both ways (shared/tunnel_ws_api.ts). The service's
 * socket is paused while the stream has no credit for what it sent, and the
 * stream is read only while the service's send buffer is small, so neither
 * side's memory grows with a fast producer or a stalled reader.
 *
 * @module
 */
import WebSocket from "ws";
import type { MuxStream } from "../shared/streams.ts";
import { encodeResponseHead, TUNNEL_STRIPPED_REQUEST_HEADERS } from "../shared/tunnel_api.ts";
import {
  encodeWsMessage,
  MAX_TUNNEL_WS_MESSAGE_BYTES,
  sendableCloseCode,
  type TunnelWsHead,
  type TunnelWsResponseHead,
  type WsMessage,
  WsMessageReader,
  WsOp,
} from "../shared/tunnel_ws_api.ts";

/** Bytes written to the stream and not yet credited before the service's socket is paused. */
const PENDING_BYTES = 256 * 1024;
/** Bytes waiting to reach the service before the stream is no longer read. */
const SEND_BUFFER_BYTES = 256 * 1024;

/**
 * Answers one WebSocket stream the relay opened; `url` is the head's
 * loopback address (runner/tunnel.ts's `loopbackUrl`), null when it has none.
 */
export async function serveWebSocket(
  stream: MuxStream,
  head: TunnelWsHead,
  url: URL | null,
): Promise<void> {
  const writer = stream.writable.getWriter();
  const answer = (h: TunnelWsResponseHead) => writer.write(encodeResponseHead(h as never));
  if (!url) {
    await answer({
      error: { code: "bad_target", message: "The runner forwards to 127.0.0.1:{port} only" },
    });
    return await writer.close();
  }
  url.protocol = "ws:";
  const headers: Record<string, string> = {};
  for (const [k, v] of Array.isArray(head.headers) ? head.headers : []) {
    if (typeof k !== "string" || typeof v !== "string") continue;
    const name = k.toLowerCase();
    if (name !== "cookie" && TUNNEL_STRIPPED_REQUEST_HEADERS.has(name)) continue;
    if (name.startsWith("sec-websocket-")) continue;
    headers[name] = v;
  }
  // The service sees its own origin, as when opened on this machine (dev servers check it).
  headers["origin"] = `http://127.0.0.1:${head.port}`;
  const protocols = Array.isArray(head.protocols)
    ? head.protocols.filter((p) => typeof p === "string" && /^[!#-'*+.0-9A-Z^-z|~-]+$/.test(p))
    : [];
  const upstream = new WebSocket(url, protocols, {
    headers,
    perMessageDeflate: false,
    maxPayload: MAX_TUNNEL_WS_MESSAGE_BYTES,
    handshakeTimeout: 15_000,
    followRedirects: false,
  });
  const opened = await new Promise<TunnelWsResponseHead>((resolve) => {
    upstream.once("open", () => resolve({ status: 101, protocol: upstream.protocol }));
    upstream.once("unexpected-response", (_req, res) => {
      resolve({ status: res.statusCode ?? 502, headers: [] });
      res.resume();
    });
    upstream.once("error", (err: Error & { code?: string }) => {
      resolve({
        error: err.code === "ECONNREFUSED"
          ? { code: "port_closed", message: `Nothing is listening on port ${head.port}` }
          : { code: "upstream_error", message: `The service failed: ${String(err).slice(0, 300)}` },
      });
    });
  });
  await answer(opened);
  if (!("status" in opened) || opened.status !== 101) {
    upstream.terminate();
    return await writer.close().catch(() => {});
  }
  upstream.on("error", () => {});

  let pending = 0;
  let paused = false;
  let closed = false;
  const send = (msg: WsMessage) => {
    const bytes = encodeWsMessage(msg);
    pending += bytes.byteLength;
    if (pending > PENDING_BYTES && !paused) {
      paused = true;
      upstream.pause();
    }
    return writer.write(bytes).then(() => {
      pending -= bytes.byteLength;
      if (paused && pending <= PENDING_BYTES / 2) {
        paused = false;
        upstream.resume();
      }
    }, () => {});
  };
  upstream.on("message", (data: Uint8Array, isBinary: boolean) => {
    if (closed) return;
    if (isBinary) send({ op: WsOp.binary, data: new Uint8Array(data) });
    else send({ op: WsOp.text, data: new TextDecoder().decode(data) });
  });
  upstream.on("close", (code: number, reason: Uint8Array) => {
    if (closed) return;
    closed = true;
    send({ op: WsOp.close, code, reason: new TextDecoder().decode(reason) })
      .then(() => writer.close())
      .catch(() => stream.reset("closed"));
  });

  const messages = new WsMessageReader();
  try {
    for await (const chunk of stream.readable) {
      for (const m of messages.push(chunk)) {
        if (m.op === WsOp.close) {
          closed = true;
          upstream.close(sendableCloseCode(m.code), m.reason);
          await writer.close().catch(() => {});
          return;
        }
        upstream.send(m.op === WsOp.text ? m.data : m.data, { binary: m.op === WsOp.binary });
      }
      while (!closed && upstream.bufferedAmount > SEND_BUFFER_BYTES) {
        await new Promise((r) => setTimeout(r, 10));
      }
    }
    // The relay ended the stream without a close message: a normal close.
    if (!closed) upstream.close(1000);
  } catch (err) {
    const tooBig = (err as Error)?.name === "WsFramingError";
    closed = true;
    if (upstream.readyState === WebSocket.OPEN) {
      upstream.close(tooBig ? 1009 : 1001, tooBig ? "Message too large" : "Tunnel closed");
    } else upstream.terminate();
    stream.reset(tooBig ? "message too large" : "closed");
  }
}
