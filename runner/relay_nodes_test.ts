import assert from "node:assert/strict";
import type { WebSocket as WsSocket, WebSocketServer } from "ws";
import { ControlLink } from "./control_link.ts";
import { RelayNodes } from "./relay_nodes.ts";
import { linkOptions } from "./testdata/fakes.ts";
import { TunnelClient } from "./tunnel.ts";

Deno.test("relay nodes: a failure moves on round robin, a welcome settles, listeners hear changes", () => {
  const nodes = new RelayNodes(["http://a", "http://b", "http://c"]);
  const heard: (string | null)[] = [];
  const off = nodes.onChange((url) => heard.push(url));
  assert.equal(nodes.current, "http://a");
  assert.equal(nodes.connected, null);
  nodes.failed("http://a");
  assert.equal(nodes.current, "http://b");
  nodes.welcomed("http://b");
  assert.equal(nodes.connected, "http://b");
  // A late report about a node the channel already left changes nothing.
  nodes.failed("http://a");
  assert.equal(nodes.current, "http://b");
  nodes.failed("http://b");
  assert.equal(nodes.current, "http://c");
  assert.equal(nodes.connected, null);
  nodes.failed("http://c");
  assert.equal(nodes.current, "http://a", "round robin wraps");
  off();
  nodes.welcomed("http://a");
  assert.deepEqual(heard, ["http://b", null]);
  assert.throws(() => new RelayNodes([]), RangeError);
});

/** A fake relay node: welcomes every hello on `/_runner`, registers every tunnel on `/_tunnel`. */
interface FakeNode {
  url: string;
  hellos: number;
  tunnels: number;
  /** Sockets open now, by path. */
  open: { control: number; tunnel: number };
  /** Dies like a SIGKILLed process: every socket cut, the port closed. */
  kill(): Promise<void>;
}

async function fakeNode(): Promise<FakeNode> {
  const { WebSocketServer } = await import("ws");
  const server: WebSocketServer = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((resolve) => server.once("listening", resolve));
  const sockets = new Set<WsSocket>();
  const node: FakeNode = {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    hellos: 0,
    tunnels: 0,
    open: { control: 0, tunnel: 0 },
    async kill() {
      for (const ws of sockets) ws.terminate();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  server.on("connection", (ws, req) => {
    const path = req.url === "/_tunnel" ? "tunnel" : "control";
    sockets.add(ws);
    node.open[path]++;
    ws.on("close", () => {
      sockets.delete(ws);
      node.open[path]--;
    });
    ws.on("message", (data) => {
      const msg = JSON.parse(String(data));
      if (msg.t === "hello") {
        node.hellos++;
        ws.send(JSON.stringify({ t: "welcome", v: msg.v, runnerId: "r", acked: {}, ended: [] }));
      } else if (msg.t === "register") {
        node.tunnels++;
        ws.send(JSON.stringify({ t: "registered" }));
      }
    });
  });
  return node;
}

/** A port nothing listens on. */
function closedPortUrl(): string {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return `http://127.0.0.1:${port}`;
}

async function until(test: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1500 && !test(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(test(), `${what} within 15 s`);
}

function linkAndTunnel(relay: RelayNodes, lines: string[]) {
  const link = new ControlLink(linkOptions(relay, { log: (l) => lines.push(l) }));
  const tunnel = new TunnelClient({
    relay,
    apiKey: "brt_x",
    runnerId: "r",
    log: (l) => lines.push(l),
    ready: () => link.connected,
  });
  const stop = new AbortController();
  const running = Promise.all([link.run(stop.signal), tunnel.run(stop.signal)]);
  return {
    link,
    async stop() {
      stop.abort();
      await running.catch(() => {});
    },
  };
}

Deno.test("a first relay node that is down: the control channel and the tunnel both use the second", async () => {
  const b = await fakeNode();
  const relay = new RelayNodes([closedPortUrl(), b.url]);
  const lines: string[] = [];
  const { link, stop } = linkAndTunnel(relay, lines);
  try {
    await until(() => link.connected && b.open.tunnel === 1, "connected to the second node");
    assert.equal(relay.connected, b.url);
    assert.equal(relay.current, b.url);
    assert.equal(b.hellos, 1);
    assert.ok(lines.some((l) => l.includes(`reconnecting to ${b.url}`)), lines.join("\n"));
  } finally {
    await stop();
    await b.kill();
  }
});

/**
 * Two fake nodes, A and B, and a runner's control channel and tunnel both
 * connected to A, the first in its list; all stopped after `fn`.
 */
async function onFirstOfTwo(
  fn: (w: { a: FakeNode; b: FakeNode; relay: RelayNodes; link: ControlLink }) => Promise<void>,
): Promise<void> {
  const a = await fakeNode();
  const b = await fakeNode();
  const relay = new RelayNodes([a.url, b.url]);
  const { link, stop } = linkAndTunnel(relay, []);
  try {
    await until(() => link.connected && a.open.tunnel === 1, "both channels on the first node");
    await fn({ a, b, relay, link });
  } finally {
    await stop();
    await a.kill();
    await b.kill();
  }
}

Deno.test("when the control channel's node dies, both channels move to the next node together", async () => {
  await onFirstOfTwo(async ({ a, b, relay, link }) => {
    assert.equal(b.hellos + b.tunnels, 0, "nothing dialled the second node while the first was up");
    await a.kill();
    await until(
      () => link.connected && relay.connected === b.url && b.open.tunnel === 1,
      "both channels on the second node",
    );
    assert.equal(b.open.control, 1);
    assert.equal(b.hellos, 1);
  });
});

Deno.test("a tunnel left on another node follows the control channel to its node", async () => {
  await onFirstOfTwo(async ({ a, b, relay, link }) => {
    // Only the control channel drops (a proxy cut it, say): it redials the
    // next node, and the tunnel, still up on the first, moves after it.
    link.drop();
    await until(
      () => relay.connected === b.url && b.open.tunnel === 1 && a.open.tunnel === 0,
      "the tunnel followed the control channel",
    );
    assert.equal(a.open.control, 0);
  });
});
