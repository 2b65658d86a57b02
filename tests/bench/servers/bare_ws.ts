/**
 * Baseline (a): the barest Deno WebSocket broadcaster. A publisher socket on
 * `/publish` sends frames; each is sent as is to every socket on `/`, and to
 * the sockets on `/?room=<id>` when its sessionId is `<id>` (read off the
 * frame's start, not parsed: the many-sessions scenario's routing). No
 * auth, no storage, no parsing, no backpressure: the ceiling of Deno's own
 * WebSocket stack on this machine. `/replay?total=N&since=S` sends the
 * events after S of an N-event log held in memory, as the replay baseline.
 *
 * @module
 */
import { emit, untilStopped } from "../_proc.ts";
import { EventSource } from "../_workload.ts";

/** Viewers that get every frame. */
const viewers = new Set<WebSocket>();
/** Viewers that joined a room (`/?room=<sessionId>`): only that session's frames. */
const rooms = new Map<string, Set<WebSocket>>();
const SESSION_AT = '{"t":"events","sessionId":"'.length;
const events = new EventSource();
let log: string[] = [];

/** Replays `log` after `since` in frames of up to 500 events, then says caught up. */
function replay(socket: WebSocket, since: number): void {
  for (let i = since; i < log.length; i += 500) {
    const part = log.slice(i, i + 500);
    socket.send(`{"t":"events","sessionId":"bench","events":[${part.join(",")}]}`);
  }
  socket.send(JSON.stringify({ t: "caught_up", sessionId: "bench", seq: log.length }));
}

const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
  if (req.headers.get("upgrade")?.toLowerCase() !== "websocket") {
    return new Response("bare broadcaster", { status: 200 });
  }
  const { socket, response } = Deno.upgradeWebSocket(req);
  const url = new URL(req.url);
  if (url.pathname === "/replay") {
    // The replay baseline: the same events held in memory, sent at once.
    const total = Number(url.searchParams.get("total") ?? "0");
    if (log.length !== total) {
      log = Array.from({ length: total }, (_, i) => events.event(i + 1, Date.now()));
    }
    socket.onopen = () => replay(socket, Number(url.searchParams.get("since") ?? "0"));
  } else if (url.pathname === "/publish") {
    socket.onmessage = (ev) => {
      const frame = ev.data as string;
      for (const v of viewers) v.send(frame);
      if (rooms.size === 0) return;
      // Frames are `{"t":"events","sessionId":"<id>",...`: the id is read, not parsed.
      const room = rooms.get(frame.slice(SESSION_AT, frame.indexOf('"', SESSION_AT)));
      if (room) { for (const v of room) v.send(frame); }
    };
  } else {
    const name = url.searchParams.get("room");
    if (name === null) {
      socket.onopen = () => viewers.add(socket);
      socket.onclose = () => viewers.delete(socket);
    } else {
      socket.onopen = () => {
        let room = rooms.get(name);
        if (!room) rooms.set(name, room = new Set());
        room.add(socket);
      };
      socket.onclose = () => rooms.get(name)?.delete(socket);
    }
  }
  socket.onerror = () => {};
  return response;
});

// Listening for the stop signal before saying so: a signal sent on that line
// would otherwise kill the process before its listener is in place.
const stopped = untilStopped();
emit("listening", { url: `http://127.0.0.1:${server.addr.port}` });
await stopped;
await Promise.race([server.shutdown(), new Promise((r) => setTimeout(r, 1000))]);
Deno.exit(0);
