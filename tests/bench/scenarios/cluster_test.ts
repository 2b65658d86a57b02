import assert from "node:assert/strict";
import { mostCarried, P99_BOUND_MS, skipLine } from "./cluster.ts";

Deno.test("the cluster scenario skips in one line naming what is missing, and runs when both are there", () => {
  assert.equal(skipLine({ postgres: true, nats: true }), null);
  const noNats = skipLine({ postgres: true, nats: false })!;
  assert.match(noNats, /^cluster: skipped: nats-server not installed/);
  assert.ok(!noNats.includes("\n"));
  assert.match(
    skipLine({ postgres: false, nats: false })!,
    /^cluster: skipped: PostgreSQL \(initdb, postgres\) and nats-server not installed/,
  );
});

Deno.test("a setup carries the most viewers whose p99 stayed under the bound with the rate held", () => {
  const runs = [
    { viewers: 200, p99: 12, held: true },
    { viewers: 400, p99: 30, held: true },
    { viewers: 800, p99: 90, held: true },
  ];
  assert.equal(mostCarried(runs), 400);
  // A count whose rate was not held (or whose events were lost) does not count, however fast.
  assert.equal(mostCarried([...runs.slice(0, 1), { viewers: 400, p99: 30, held: false }]), 200);
  // The bound is strict; nothing under it carries none (the ratio then shows no figure).
  assert.equal(mostCarried([{ viewers: 200, p99: P99_BOUND_MS, held: true }]), 0);
  assert.equal(mostCarried(runs, 100), 800);
});
