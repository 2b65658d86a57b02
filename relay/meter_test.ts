import assert from "node:assert/strict";
import { PlainHistogram, RelayMeter, WRITE_FAILURE_WINDOW_MS } from "./meter.ts";
import type { EventCommit } from "./store/event_writer.ts";

function commitOf(sessionId: string, events: number): EventCommit {
  return {
    sessionId,
    events: Array.from({ length: events }, (_, i) => ({ seq: i + 1, json: "{}" })),
    lastSeq: events,
    eventBytes: events * 2,
    patch: null,
    at: new Date(0).toISOString(),
  };
}

Deno.test("a metered commit counts its events and its time, and a failure until a success", async () => {
  let now = 1_000_000;
  const meter = new RelayMeter({ now: () => now });
  let fail: Error | null = null;
  let seenInFlight = -1;
  const commit = meter.metered((batch) => {
    seenInFlight = meter.inFlightEvents;
    return fail ? Promise.reject(fail) : Promise.resolve(void batch);
  });
  await commit([commitOf("a", 3), commitOf("b", 2)]);
  assert.equal(seenInFlight, 5, "the events in flight are counted while the commit runs");
  assert.equal(meter.inFlightEvents, 0);
  assert.equal(meter.eventsStored, 5);
  assert.equal(meter.commits.count, 1);
  assert.equal(meter.writeTrouble(), null);

  fail = new Error("database or disk is full");
  await assert.rejects(commit([commitOf("a", 4)]), /disk is full/);
  assert.equal(meter.eventsStored, 5, "failed events are not counted as stored");
  assert.equal(meter.commitFailures, 1);
  assert.equal(meter.commits.count, 2);
  now += 2000;
  assert.equal(meter.writeTrouble(), "Storing events failed 2 s ago: database or disk is full");
  now += WRITE_FAILURE_WINDOW_MS;
  assert.equal(meter.writeTrouble(), null, "an old failure with nothing written since is let go");

  now -= WRITE_FAILURE_WINDOW_MS;
  fail = null;
  await commit([commitOf("a", 1)]);
  assert.equal(meter.writeTrouble(), null, "a commit that went through clears it");
  assert.equal(meter.eventsStored, 6);
});

Deno.test("a plain histogram puts each value in the first bucket that holds it", () => {
  const h = new PlainHistogram([0.01, 0.1, 1]);
  for (const v of [0.001, 0.01, 0.05, 0.5, 3, 100]) h.observe(v);
  assert.deepEqual(h.counts, [2, 1, 1, 2]);
  assert.equal(h.count, 6);
  assert.ok(Math.abs(h.sum - 103.561) < 1e-9);
});
