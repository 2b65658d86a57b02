import assert from "node:assert/strict";
import { ControlLink } from "./control_link.ts";

Deno.test("a relay that accepts the connection but never answers the upgrade is dialled again", async () => {
  // A TCP server that takes connections and says nothing, like a hung proxy.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const secondDial = Promise.withResolvers<void>();
  const accepting = (async () => {
    for await (const c of listener) {
      conns.push(c);
      if (conns.length === 2) secondDial.resolve();
    }
  })();
  const timer = setTimeout(() => secondDial.reject(new Error("No second dial in 10 s")), 10_000);
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
    await secondDial.promise;
    assert.ok(lines.some((l) => l.startsWith("relay link lost")), lines.join("\n"));
    assert.equal(link.connected, false);
  } finally {
    clearTimeout(timer);
    stop.abort();
    await running;
    listener.close();
    for (const c of conns) c.close();
    await accepting.catch(() => {});
  }
});
