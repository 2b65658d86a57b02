import assert from "node:assert/strict";
import { ControlLink } from "./control_link.ts";
import { RelayNodes } from "./relay_nodes.ts";
import { linkOptions } from "./testdata/fakes.ts";

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
  const link = new ControlLink(
    linkOptions(new RelayNodes([`http://127.0.0.1:${listener.addr.port}`]), {
      log: (line) => lines.push(line),
      handshakeMs: 300,
    }),
  );
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

/** What a test sees of a fake relay: the frames it got, and how many sockets closed. */
interface FakeRelay {
  received: { t: string; [k: string]: unknown }[];
  closes: number;
  welcomed: Promise<void>;
}

/**
 * A relay on npm:ws that welcomes every hello (then sends `afterWelcome`)
 * and answers every call with `{}`, and a ControlLink dialled to it; both
 * are torn down after `fn`.
 */
async function withFakeRelay(
  options: { afterWelcome?: unknown[]; onRequest?: (op: string) => Promise<unknown> },
  fn: (link: ControlLink, relay: FakeRelay) => Promise<void>,
): Promise<void> {
  const { WebSocketServer } = await import("ws");
  const server = new WebSocketServer({ port: 0, host: "127.0.0.1", maxPayload: 8 * 1024 * 1024 });
  await new Promise((resolve) => server.once("listening", resolve));
  const welcomed = Promise.withResolvers<void>();
  const relay: FakeRelay = { received: [], closes: 0, welcomed: welcomed.promise };
  server.on("connection", (ws) => {
    ws.on("close", () => relay.closes++);
    ws.on("message", (data) => {
      const msg = JSON.parse(String(data));
      relay.received.push(msg);
      if (msg.t === "hello") {
        ws.send(
          JSON.stringify({ t: "welcome", v: msg.v, runnerId: msg.runnerId, acked: {}, ended: [] }),
        );
        for (const m of options.afterWelcome ?? []) ws.send(JSON.stringify(m));
      }
      if (msg.t === "call") {
        ws.send(JSON.stringify({ t: "result", id: msg.id, ok: true, data: {} }));
      }
    });
  });
  const link = new ControlLink(
    linkOptions(
      new RelayNodes([`http://127.0.0.1:${(server.address() as { port: number }).port}`]),
      {
        onWelcome: () => welcomed.resolve(),
        ...(options.onRequest ? { onRequest: options.onRequest } : {}),
      },
    ),
  );
  const stop = new AbortController();
  const running = link.run(stop.signal);
  try {
    await fn(link, relay);
  } finally {
    stop.abort();
    await running.catch(() => {});
    server.close();
  }
}

/** Waits until `test` holds, checking every 10 ms (at most 10 s). */
async function until(test: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !test(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(test(), "the condition held within 10 s");
}

Deno.test("a call the relay would refuse whole fails at once and the link stays up", async () => {
  await withFakeRelay({}, async (link, relay) => {
    await relay.welcomed;
    let deep: unknown = "leaf";
    for (let i = 0; i < 200; i++) deep = [deep];
    await assert.rejects(
      link.call("triggers.respond", { payload: deep }),
      (err: Error & { code?: string }) => err.code === "too_deep" && /too deep/.test(err.message),
    );
    await assert.rejects(
      link.call("triggers.respond", { payload: "x".repeat(9 * 1024 * 1024) }),
      (err: Error & { code?: string }) => err.code === "too_big" && /MiB/.test(err.message),
    );
    // Neither reached the relay; the link is up and a normal call is answered.
    assert.deepEqual(relay.received.map((m) => m.t), ["hello"]);
    assert.deepEqual(await link.call("triggers.list", {}), {});
    assert.equal(link.connected, true);
    assert.equal(relay.closes, 0);
  });
});

Deno.test("an answer over the channel's limit becomes an error answer, and the link stays up", async () => {
  const requests = [
    { t: "req", id: 1, op: "big", data: {} },
    { t: "req", id: 2, op: "small", data: {} },
  ];
  // Multi-byte characters: under 8 Mi characters, over 8 MiB.
  const onRequest = (op: string) =>
    Promise.resolve(op === "big" ? { text: "é".repeat(5 * 1024 * 1024) } : {});
  await withFakeRelay({ afterWelcome: requests, onRequest }, async (link, relay) => {
    const answers = () => relay.received.filter((m) => m.t === "res");
    await until(() => answers().length === 2);
    assert.deepEqual(answers(), [
      {
        t: "res",
        id: 1,
        ok: false,
        error: { code: "answer_too_big", message: "The runner's answer is over 8 MiB" },
      },
      { t: "res", id: 2, ok: true, data: {} },
    ]);
    assert.equal(link.connected, true);
    assert.equal(relay.closes, 0);
  });
});
