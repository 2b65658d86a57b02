/**
 * Byte streams across relay nodes (relay/bus/_nats_streams.ts): node A holds
 * a runner's tunnel (here a pair of StreamMux in this process standing for
 * the relay's and the runner's ends of `/_tunnel`), node B opens streams to
 * it through the bus. Run against LocalBus (one node: the target itself) and
 * NatsBus (two nodes on a private nats-server), then what only NATS shows:
 * end-to-end credit, a node cut off, and a stalled stream reset after idling.
 */
import assert from "node:assert/strict";
import type { Bus, BusOptions, StreamTarget } from "../relay/bus/mod.ts";
import { connect } from "@nats-io/transport-node";
import { NatsBus } from "../relay/bus/nats_bus.ts";
import { DEAD_MS } from "../relay/bus/_nats_streams.ts";
import { DEFAULT_WINDOW, type MuxStream, StreamMux } from "../shared/streams.ts";
import { eachBus, natsNodes } from "./harness/buses.ts";
import { CutProxy, NATS_SERVER, NatsServer } from "./harness/nats.ts";
import { eventually, within } from "./harness/wait.ts";

const MB = 1024 * 1024;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** What the fake runner saw. */
interface RunnerSide {
  /** Bytes each flood stream wrote (it writes only as credit allows). */
  produced: Map<string, number>;
  /** Reset reasons of the runner's streams, by header. */
  resets: Map<string, string>;
  target: StreamTarget;
  /** The relay's end of the tunnel (node A's TunnelLink.mux). */
  relayMux: StreamMux;
}

/**
 * A runner's tunnel in this process: the relay's multiplexer and the
 * runner's, frames passed between them as the socket would. The runner
 * answers by header: `echo`, `flood:<mb>` (writes that many MiB), `reset:<why>`.
 */
function fakeRunner(userId = "user-1"): RunnerSide {
  const produced = new Map<string, number>();
  const resets = new Map<string, string>();
  const relayMux: StreamMux = new StreamMux({
    dialer: true,
    send: (f) => setTimeout(() => runnerMux.receive(f), 0),
  });
  const runnerMux: StreamMux = new StreamMux({
    dialer: false,
    send: (f) => setTimeout(() => relayMux.receive(f), 0),
    onStream: (stream, headerBytes) => {
      const header = decoder.decode(headerBytes);
      stream.closed.then(() => {
        if (stream.resetReason !== null) resets.set(header, stream.resetReason);
      });
      if (header === "echo") {
        stream.readable.pipeTo(stream.writable).catch(() => {});
      } else if (header.startsWith("flood:")) {
        produced.set(header, 0);
        const chunk = new Uint8Array(64 * 1024).fill(7);
        (async () => {
          const w = stream.writable.getWriter();
          for (let left = Number(header.slice(6)) * 16; left > 0; left--) {
            await w.write(chunk);
            produced.set(header, produced.get(header)! + chunk.byteLength);
          }
          await w.close();
        })().catch(() => {});
      } else if (header === "drip") {
        // Never reads what it is sent; writes 1,000 bytes every 250 ms for 3 s.
        (async () => {
          const w = stream.writable.getWriter();
          for (let i = 0; i < 12; i++) {
            await w.write(new Uint8Array(1000));
            await new Promise((r) => setTimeout(r, 250));
          }
          await w.close();
        })().catch(() => {});
      } else if (header.startsWith("reset:")) {
        stream.reset(header.slice(6));
      }
    },
  });
  return {
    produced,
    resets,
    relayMux,
    target: { userId, open: (h) => relayMux.open(h) },
  };
}

/** Node A serves a fake runner as r1, flushed so that node B finds it; `stop` ends that. */
async function servedByA(a: Bus): Promise<{ runner: RunnerSide; stop: () => void }> {
  const runner = fakeRunner();
  const stop = a.serveStreams("r1", runner.target);
  await a.flush();
  return { runner, stop };
}

/** A NatsBus-only test's world: runner r1 served by node A, streams opened from node B. */
interface NatsWorld {
  a: NatsBus;
  b: NatsBus;
  server: NatsServer;
  /** Node A's way to the server when the test asked for one it can cut. */
  proxy: CutProxy | null;
  runner: RunnerSide;
  /** Opens a stream to r1 from node B, its header `header`. */
  open(header: string): Promise<MuxStream>;
}

/**
 * Registers a NatsBus-only test: a private server, nodes A and B (A through
 * a CutProxy when `cuttable`), the fake runner served by A; all closed after.
 */
function natsTest(
  name: string,
  fn: (w: NatsWorld) => Promise<void>,
  options: BusOptions & { cuttable?: boolean } = {},
): void {
  const { cuttable, ...busOptions } = options;
  Deno.test({
    name: `NatsBus: ${name}`,
    ignore: !NATS_SERVER,
    async fn() {
      await using server = await NatsServer.start();
      await using proxy = cuttable ? CutProxy.start(server.port) : null;
      await using nodes = await natsNodes(server, { ...busOptions, aUrl: proxy?.url });
      const { a, b } = nodes;
      const { runner } = await servedByA(a);
      const open = async (header: string) =>
        (await b.streamsTo("r1"))!.open(encoder.encode(header));
      try {
        await fn({ a, b, server, proxy, runner, open });
      } finally {
        proxy?.heal();
      }
    },
  });
}

async function readAll(stream: MuxStream): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of stream.readable) parts.push(c);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.byteLength) - p.byteLength);
  return out;
}

eachBus(
  "a stream opened on another node carries bytes both ways and ends",
  async ({ a, b }) => {
    const { runner, stop } = await servedByA(a);
    try {
      assert.equal(await b.streamsTo("unknown-runner"), null, "no node serves it");
      const target = await b.streamsTo("r1");
      assert.ok(target);
      assert.equal(target.userId, "user-1", "the runner's owner, for the 404 check");
      const stream = target.open(encoder.encode("echo"));
      const w = stream.writable.getWriter();
      const body = new Uint8Array(3 * MB).map((_, i) => i % 251);
      const reading = readAll(stream);
      await w.write(body);
      await w.close();
      const back = await within(reading, 20_000, "the echo");
      assert.equal(back.byteLength, body.byteLength);
      assert.deepEqual(back, body);
      await within(stream.closed, 5_000, "the stream done");
      assert.equal(stream.resetReason, null);
      await eventually("the runner's stream freed", () => runner.relayMux.size === 0 || undefined);
    } finally {
      stop();
    }
  },
);

eachBus("a reset on the runner's side reaches the opener with its reason", async ({ a, b }) => {
  const { runner, stop } = await servedByA(a);
  try {
    const stream = (await b.streamsTo("r1"))!.open(encoder.encode("reset:terminal_not_found"));
    await assert.rejects(readAll(stream), (err: Error & { reason?: string }) => {
      assert.match(String(err.reason), /terminal_not_found/);
      return true;
    });
    // And the opener's reset reaches the runner.
    const echo = (await b.streamsTo("r1"))!.open(encoder.encode("echo"));
    echo.reset("viewer left");
    await eventually("the runner heard the reset", () => runner.resets.get("echo"));
    assert.equal(runner.resets.get("echo"), "viewer left");
  } finally {
    stop();
  }
});

eachBus(
  "a runner whose tunnel left is no longer served: its streams reset, none open",
  async ({ a, b }) => {
    const { runner, stop } = await servedByA(a);
    const stream = (await b.streamsTo("r1"))!.open(encoder.encode("echo"));
    const reading = readAll(stream);
    stop();
    // LocalBus: the stream is the runner's own, which the tunnel's loss resets (TunnelLink.close).
    runner.relayMux.close("runner tunnel lost");
    await assert.rejects(within(reading, 10_000, "the reset"));
    assert.equal(await b.streamsTo("r1"), null);
  },
);

natsTest(
  "a reader that stops on node B stalls the runner's stream: nothing piles up anywhere",
  async ({ runner, open }) => {
    const stream = await open("flood:64");
    const reader = stream.readable.getReader();
    const first = await reader.read();
    assert.ok(!first.done);
    // Let the flood run into the credit: one window per hop (B's, A's, the runner's).
    await new Promise((r) => setTimeout(r, 1500));
    const stalled = runner.produced.get("flood:64")!;
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(runner.produced.get("flood:64"), stalled, "the runner is stalled");
    assert.ok(stalled <= 4 * DEFAULT_WINDOW, `the runner wrote ${stalled} bytes ahead`);
    assert.ok(stream.queuedBytes <= DEFAULT_WINDOW, "B holds at most a window");
    // Reading again resumes the stream to its end.
    let total = first.value!.byteLength;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
    }
    assert.equal(total, 64 * MB);
  },
);

natsTest(
  "a stream nobody reads is reset after the idle time, on both nodes",
  async ({ runner, open }) => {
    const stream = await open("flood:16");
    const started = Date.now();
    await within(stream.closed, 10_000, "the idle reset");
    assert.match(stream.resetReason ?? "", /idle/);
    assert.ok(Date.now() - started >= 1500);
    await eventually("the runner's stream reset", () => runner.resets.get("flood:16"), 10_000);
    // A stream that moves is not idle: a slow echo for longer than the idle time.
    const echo = await open("echo");
    const w = echo.writable.getWriter();
    const reading = readAll(echo);
    for (let i = 0; i < 12; i++) {
      await w.write(new Uint8Array(1000));
      await new Promise((r) => setTimeout(r, 250));
    }
    await w.close();
    assert.equal((await reading).byteLength, 12_000);
    // Nor is one whose upload waits for credit while its answer keeps coming.
    const drip = await open("drip");
    drip.writable.getWriter().write(new Uint8Array(3 * DEFAULT_WINDOW)).catch(() => {});
    const dripped = [];
    for await (const c of drip.readable) dripped.push(c.byteLength);
    assert.equal(dripped.reduce((n, x) => n + x, 0), 12_000, "the answer came whole");
  },
  { streamIdleMs: 1500 },
);

natsTest(
  "a node cut off from the bus resets the streams through it on both sides, promptly",
  async ({ b, proxy, runner, open }) => {
    const stream = await open("echo");
    const reader = stream.readable.getReader();
    await stream.writable.getWriter().write(new Uint8Array(10));
    assert.equal((await reader.read()).value?.byteLength, 10, "the echo is flowing");
    const reading = reader.read();
    const cutAt = Date.now();
    proxy!.cut();
    await assert.rejects(within(reading, DEAD_MS + 4_000, "B's stream reset"));
    assert.match(stream.resetReason ?? "", /relay node lost/);
    console.log(`B reset its stream ${Date.now() - cutAt} ms after A was cut off`);
    await eventually("A reset the runner's stream", () => runner.resets.get("echo"), 5_000);
    assert.match(runner.resets.get("echo")!, /bus lost/);
    // B asks again: nobody serves r1 while A is cut off.
    assert.equal(await b.streamsTo("r1"), null);
  },
  { cuttable: true },
);

natsTest(
  "a node that shuts down tells the other, whose streams reset at once",
  async ({ a, open }) => {
    const stream = await open("echo");
    const reset = assert.rejects(within(readAll(stream), 1_000, "B's stream reset"));
    await a.close();
    await reset;
    assert.match(stream.resetReason ?? "", /shutting down/);
  },
);

natsTest(
  "a message missing on a channel ends its streams instead of passing a hole on",
  async ({ b, server, runner, open }) => {
    // A third client sees the channel's subjects and forges what a lost message leaves:
    // the next number after a gap.
    const spy = await connect({ servers: server.url });
    try {
      const subjects: string[] = [];
      spy.subscribe(`baton.chan.${b.nodeId}.*`, {
        callback: (_e, m) => void subjects.push(m.subject),
      });
      await spy.flush();
      const stream = await open("echo");
      const reader = stream.readable.getReader();
      await stream.writable.getWriter().write(new Uint8Array(10));
      assert.equal((await reader.read()).value?.byteLength, 10);
      const forged = new Uint8Array(4 + 1 + 5 + 3);
      new DataView(forged.buffer).setUint32(0, 1_000_000);
      forged.set([2, 0, 0, 0, 1, 7, 7, 7], 4); // data on stream 1: "after a hole"
      // The spy's copy of the channel's messages comes on its own connection, maybe later.
      const subject = await eventually("the spy to see the channel", () => subjects[0], 5_000);
      spy.publish(subject, forged);
      await assert.rejects(within(reader.read(), 5_000, "the reset"));
      assert.match(stream.resetReason ?? "", /lost messages/);
      // The serving node heard of it too: the runner's stream is reset.
      await eventually("the runner's stream reset", () => runner.resets.get("echo"), 5_000);
    } finally {
      await spy.close();
    }
  },
);
