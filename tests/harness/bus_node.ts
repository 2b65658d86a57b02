/**
 * A relay node's bus in a process of its own, for tests that kill it or
 * watch its memory: `deno run -A tests/harness/bus_node.ts <nats-url> <mode> <id>`.
 *
 * - `serve <runnerId>`: serves requests for the runner (answers `{pong: op}`).
 * - `stall <sessionId> <ms>`: subscribes to the session's events; the first
 *   time events arrive it blocks its event loop for `ms` (a node stuck in a
 *   long task), and it prints `gap <reason>` for each gap and `mark <seq>` for
 *   each event whose JSON has `"mark"`.
 * - `flood <sessionId>`: on SIGUSR1 publishes 3,000 events of 64 KB (seq 2 to
 *   3001) as a relay commits them, never waiting for the bus, then prints
 *   `held <bytes>`: its heap and buffers after a garbage collection (run it
 *   with `--v8-flags=--expose-gc`), as `base <bytes>` was before.
 *
 * It prints `ready` once subscribed, and stops on SIGTERM.
 *
 * @module
 */
import { NatsBus } from "../../relay/bus/nats_bus.ts";

const [url, mode, id, arg] = Deno.args;
if (!url || !id || !["serve", "stall", "flood"].includes(mode ?? "")) {
  console.error("usage: bus_node.ts <nats-url> serve <runnerId> | stall <sessionId> <ms> | flood");
  Deno.exit(2);
}
const bus = await NatsBus.connect(url, {
  announceMs: 200,
  log: (line) => console.log(line),
});
if (mode === "serve") {
  bus.serveRunner(id, (op) => Promise.resolve({ pong: op, node: bus.nodeId }));
} else if (mode === "flood") {
  const gc = (globalThis as { gc?: () => void }).gc;
  const held = () => {
    gc?.();
    const m = Deno.memoryUsage();
    return m.heapUsed + m.external;
  };
  const json = JSON.stringify({ seq: 0, ts: 1, e: { type: "t", body: "y".repeat(64 * 1024) } });
  console.log(`base ${held()}`);
  Deno.addSignalListener("SIGUSR1", async () => {
    for (let seq = 2; seq <= 3_001; seq += 100) {
      const events = Array.from({ length: 100 }, (_, i) => ({ seq: seq + i, json }));
      bus.publishEvents("u1", id, events);
      await new Promise((r) => setTimeout(r, 0));
    }
    console.log(`held ${held()}`);
    const m = Deno.memoryUsage();
    console.log(`memory heap ${m.heapUsed} external ${m.external} rss ${m.rss}`);
  });
} else {
  let stalled = false;
  bus.subscribeEvents(id, {
    onEvents(events) {
      if (!stalled) {
        stalled = true;
        console.log("stalling");
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(arg ?? 5000));
        console.log("resumed");
      }
      for (const e of events) if (e.json.includes('"mark"')) console.log(`mark ${e.seq}`);
    },
    onGap(gap) {
      console.log(`gap ${gap.reason} after ${gap.after}`);
    },
  });
}
// Subscriptions reach the server before `ready` is printed: a test may publish at once.
await bus.flush();
console.log(`ready ${bus.nodeId}`);
Deno.addSignalListener("SIGTERM", async () => {
  await bus.close();
  Deno.exit(0);
});
