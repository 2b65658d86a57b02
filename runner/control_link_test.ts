import assert from "node:assert/strict";
import { ControlLink } from "./control_link.ts";
import { eventually } from "../tests/harness/wait.ts";

Deno.test("a relay that accepts the connection but never answers the upgrade is dialled again", async () => {
  // A TCP server that takes connections and says nothing, like a hung proxy.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of listener) conns.push(c);
  })();
  const lines: string[] = [];
  const link = new ControlLink({
    url: `ws://127.0.0.1:${listener.addr.port}/_runner`,
    hello: () => ({
      apiKey: "brt_x",
      runnerId: "r",
      name: "r",
      roots: [],
      version: "t",
      platform: "linux",
      sessions: [],
    }),
    onWelcome: () => {},
    onRequest: () => Promise.resolve({}),
    onAck: () => {},
    onRelayError: () => {},
    log: (line) => lines.push(line),
    handshakeMs: 300,
  });
  const stop = new AbortController();
  const running = link.run(stop.signal);
  try {
    await eventually("a second dial", () => conns.length >= 2 || undefined, 10_000);
    assert.ok(lines.some((l) => l.startsWith("relay link lost")), lines.join("\n"));
    assert.equal(link.connected, false);
  } finally {
    stop.abort();
    await running;
    listener.close();
    for (const c of conns) c.close();
    await accepting.catch(() => {});
  }
});
