/**
 * Viewer clients for the three servers the fan-out compares: baton's
 * `/_viewer` channel (subscribe, wait for `caught_up`), the bare
 * broadcaster and socket.io. Each hands every frame's text to one callback.
 *
 * @module
 */
import WsClient from "ws";
import { io } from "socket.io-client";
import { VIEWER_WS_PATH } from "../../../shared/protocol.ts";

/** Which server a load generator talks to. */
export type ServerKind = "baton" | "bare" | "socketio";
/** Which WebSocket client the baton and bare viewers use. */
export type ClientImpl = "native" | "ws" | "c";

/** Where a viewer connects and, for baton, as whom and to which session. */
export interface ViewerTarget {
  kind: ServerKind;
  url: string;
  apiKey?: string;
  sessionId?: string;
  since?: number;
  /** On the baselines: the room to join (only its frames arrive), else every frame. */
  room?: string;
}

/** An open viewer. */
export interface ViewerConn {
  close(): void;
}

const EVENTS_PREFIX = '{"t":"events"';

/** A minimal socket over either client implementation. */
interface RawSocket {
  send(text: string): void;
  close(): void;
}

function openRaw(
  impl: ClientImpl,
  url: string,
  headers: Record<string, string>,
  on: { open: () => void; message: (text: string) => void; fail: (err: Error) => void },
): RawSocket {
  if (impl === "ws") {
    const ws = new WsClient(url, { headers, perMessageDeflate: false });
    ws.on("open", on.open);
    ws.on("message", (data: Buffer) => on.message(data.toString()));
    ws.on("error", (err: Error) => on.fail(err));
    ws.on("close", (code: number) => on.fail(new Error(`Viewer closed: ${code}`)));
    return { send: (t) => ws.send(t), close: () => ws.terminate() };
  }
  // deno-lint-ignore no-explicit-any
  const ws: WebSocket = new (WebSocket as any)(url, { headers });
  ws.onopen = on.open;
  ws.onmessage = (ev) => on.message(ev.data as string);
  ws.onerror = () => on.fail(new Error("Viewer socket failed"));
  ws.onclose = (ev) => on.fail(new Error(`Viewer closed: ${ev.code}`));
  return { send: (t) => ws.send(t), close: () => ws.close() };
}

/**
 * Opens one viewer and resolves once it is ready for live frames (for baton:
 * subscribed and caught up). `onFrame` gets each events frame's text.
 */
export function openViewer(
  target: ViewerTarget,
  impl: ClientImpl,
  onFrame: (text: string) => void,
): Promise<ViewerConn> {
  return new Promise((resolve, reject) => {
    if (target.kind === "socketio") {
      const s = io(target.url, {
        transports: ["websocket"],
        forceNew: true,
        reconnection: false,
        ...(target.room ? { query: { room: target.room } } : {}),
      });
      s.on("events", onFrame);
      s.on("connect", () => resolve({ close: () => s.close() }));
      s.on("connect_error", (err: Error) => reject(err));
      return;
    }
    let ready = false;
    const fail = (err: Error) => {
      if (!ready) reject(err);
    };
    if (target.kind === "bare") {
      const path = target.room ? `/?room=${encodeURIComponent(target.room)}` : "/";
      const sock = openRaw(impl, target.url.replace(/^http/, "ws") + path, {}, {
        open: () => {
          ready = true;
          resolve(sock);
        },
        message: onFrame,
        fail,
      });
      return;
    }
    const headers = { "x-api-key": target.apiKey ?? "" };
    const sock: RawSocket = openRaw(
      impl,
      target.url.replace(/^http/, "ws") + VIEWER_WS_PATH,
      headers,
      {
        open: () => {},
        message: (text) => {
          if (text.startsWith(EVENTS_PREFIX)) return onFrame(text);
          if (ready) return;
          const msg = JSON.parse(text);
          if (msg.t === "hello") {
            sock.send(JSON.stringify({
              t: "subscribe",
              sessionId: target.sessionId,
              since: target.since ?? 0,
            }));
          } else if (msg.t === "caught_up") {
            ready = true;
            resolve(sock);
          } else if (msg.t === "error") fail(new Error(`Viewer refused: ${msg.message}`));
        },
        fail,
      },
    );
  });
}

/** Opens `n` viewers, `parallel` at a time. */
export async function openViewers(
  n: number,
  target: ViewerTarget,
  impl: ClientImpl,
  onFrame: (index: number, text: string) => void,
  parallel = 50,
): Promise<ViewerConn[]> {
  const out: ViewerConn[] = [];
  for (let i = 0; i < n; i += parallel) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + parallel); j++) {
      batch.push(openViewer(target, impl, (text) => onFrame(j, text)));
    }
    out.push(...await Promise.all(batch));
  }
  return out;
}
