import assert from "node:assert/strict";
import { LocalBus } from "./bus/mod.ts";
import { ChunkQueue } from "./chunked_reply.ts";
import { RemoteRunner, RunnerServer } from "./remote_runner.ts";
import { RunnerLink } from "./runner_link.ts";
import type { ChannelSocket } from "./ws_transport.ts";
import { READ_WINDOW_CHUNKS } from "../shared/workspace_files_api.ts";

/** A runner link over a fake socket, the node serving it on a bus, and another node's view of it. */
function nodes() {
  const sent: Record<string, unknown>[] = [];
  let onSend = (_m: Record<string, unknown>) => {};
  const socket = {
    readyState: WebSocket.OPEN,
    send: (f: string) => {
      const m = JSON.parse(f);
      sent.push(m);
      onSend(m);
    },
    close: () => {},
  };
  const link = new RunnerLink(socket as unknown as ChannelSocket, "r1", "u1", null);
  const server = new RunnerServer((id) => id === "r1" ? link : undefined);
  const bus = new LocalBus();
  bus.serveRunner("r1", (op, data, ms) => server.serve("r1", op, data, ms));
  const remote = new RemoteRunner(bus, "r1", "u1", () => {});
  return { link, server, remote, sent, on: (f: typeof onSend) => onSend = f };
}

Deno.test("a request through another node reaches the runner and brings its answer back", async () => {
  const n = nodes();
  n.on((m) => {
    if (m.t === "req") n.link.resolve({ t: "res", id: m.id as number, ok: true, data: { m } });
  });
  const answer = await n.remote.request("models", { x: 1 }, 5_000) as { m: { op: string } };
  assert.equal(answer.m.op, "models");
  // A message (send) crosses as it is.
  n.remote.send({ t: "hello-there" });
  await new Promise((r) => setTimeout(r, 10));
  assert.ok(n.sent.some((m) => m.t === "hello-there"));
});

Deno.test("a chunked answer through another node arrives whole, never more than the window ahead of its reader", async () => {
  const n = nodes();
  const pieces = Array.from({ length: 30 }, (_, i) => `piece-${i}`);
  let next = 0;
  let acked = 0;
  let reqId = 0;
  let maxAhead = 0;
  const sendPiece = () => {
    if (next < pieces.length) n.link.chunk(reqId, pieces[next++]);
    else if (next++ === pieces.length) {
      n.link.resolve({ t: "res", id: reqId, ok: true, data: { size: 30 } });
    }
    maxAhead = Math.max(maxAhead, Math.min(next, pieces.length) - acked);
  };
  n.on((m) => {
    if (m.t === "req") {
      reqId = m.id as number;
      for (let i = 0; i < READ_WINDOW_CHUNKS; i++) sendPiece();
    } else if (m.t === "chunk_ack") {
      acked++;
      sendPiece();
    }
  });
  const queue = new ChunkQueue();
  queue.settle(n.remote.request("read_file", { path: "/x" }, 5_000, queue));
  const got: string[] = [];
  for (;;) {
    const item = await queue.next();
    if ("result" in item) {
      assert.deepEqual(item.result, { size: 30 });
      break;
    }
    got.push(item.piece);
    // A slow reader: the runner must wait for it.
    await new Promise((r) => setTimeout(r, 2));
  }
  assert.deepEqual(got, pieces);
  assert.ok(maxAhead <= READ_WINDOW_CHUNKS + 1, `runner ran ${maxAhead} pieces ahead`);
});

Deno.test("a chunked answer the reader abandons is cancelled on the runner's node", async () => {
  const n = nodes();
  n.on((m) => {
    if (m.t === "req") n.link.chunk(m.id as number, "first");
  });
  const queue = new ChunkQueue();
  const done = n.remote.request("read_file", { path: "/x" }, 5_000, queue);
  queue.settle(done);
  await queue.ready();
  queue.cancel();
  await assert.rejects(done, /closed the request/);
  await new Promise((r) => setTimeout(r, 10));
  assert.ok(n.sent.some((m) => m.t === "cancel"), "the runner was told to stop");
  // Nothing stays open on the runner's node.
  await assert.rejects(n.server.serve("r1", "_chunked_next", { handle: "nope" }, 1000), /ended/);
});

Deno.test("a runner this node does not hold answers offline", async () => {
  const n = nodes();
  await assert.rejects(n.server.serve("r2", "models", {}, 1000), /not connected/);
});
