/**
 * Baseline (a): the barest Deno WebSocket broadcaster. A publisher socket on
 * `/publish` sends frames; each is sent as is to every socket on `/`. No
 * auth, no storage, no routing, no backpressure: the ceiling of Deno's own
 * WebSocket stack on this machine. `/replay?total=N&since=S` sends the
 * events after S of an N-event log held in memory, as the replay baseline.
 *
 * @module
 */
import { emit, untilStopped } from "../_proc.ts";
import { EventSource } from "../_workload.ts";

const viewers = new Set<WebSocket>();
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
      for (const v of viewers) v.send(ev.data);
    };
  } else {
    socket.onopen = () => viewers.add(socket);
    socket.onclose = () => viewers.delete(socket);
  }
  socket.onerror = () => {};
  return response;
});

emit("listening", { url: `http://127.0.0.1:${server.addr.port}` });
await untilStopped();
await Promise.race([server.shutdown(), new Promise((r) => setTimeout(r, 1000))]);
Deno.exit(0);
