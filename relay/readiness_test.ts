import assert from "node:assert/strict";
import { Readiness } from "./readiness.ts";

Deno.test("readiness passes when every check answers and names the checks that fail", async () => {
  const lines: string[] = [];
  const r = new Readiness({ log: (l) => lines.push(l) });
  let broken = false;
  r.add("store", () => {
    if (broken) throw new Error("Database is not open");
  });
  r.add("bus", async () => {});
  const ok = await r.run();
  assert.equal(ok.ok, true);
  assert.deepEqual(Object.keys(ok.checks), ["store", "bus"]);
  assert.equal(ok.checks.store!.ok, true);

  broken = true;
  const failed = await r.run();
  assert.equal(failed.ok, false);
  assert.deepEqual(failed.checks.store, {
    ok: false,
    ms: failed.checks.store!.ms,
    error: "Database is not open",
  });
  assert.equal(failed.checks.bus!.ok, true);
  await r.run();
  broken = false;
  assert.equal((await r.run()).ok, true);
  // One line when the check starts failing and one when it recovers, not one per probe.
  assert.deepEqual(lines, ["not ready: store: Database is not open", "ready again: store"]);
});

Deno.test("a check past its time limit fails with the limit while the others still answer", async () => {
  const r = new Readiness();
  let aborted = false;
  r.add("bus", (signal) =>
    new Promise<void>(() => {
      signal.addEventListener("abort", () => aborted = true);
    }), { timeoutMs: 50 });
  r.add("store", () => {});
  const started = performance.now();
  const report = await r.run();
  assert.ok(performance.now() - started < 1000, "the probe did not wait for the hung check");
  assert.equal(report.ok, false);
  assert.equal(report.checks.bus!.error, "No answer within 50 ms");
  assert.equal(report.checks.store!.ok, true);
  assert.equal(aborted, true, "the hung check was told to give up");
});

Deno.test("probes that arrive together share one run of the checks", async () => {
  const r = new Readiness();
  let runs = 0;
  r.add("store", async () => {
    runs++;
    await new Promise((resolve) => setTimeout(resolve, 10));
  });
  const reports = await Promise.all(Array.from({ length: 50 }, () => r.run()));
  assert.equal(runs, 1);
  assert.ok(reports.every((x) => x.ok));
  await r.run();
  assert.equal(runs, 2, "a later probe runs the checks again");
});

Deno.test("a check name is registered once", () => {
  const r = new Readiness();
  r.add("store", () => {});
  assert.throws(() => r.add("store", () => {}), /already registered: 'store'/);
});

Deno.test("a draining node fails every report with a check of its own, whatever the others say", async () => {
  const lines: string[] = [];
  const r = new Readiness({ log: (l) => lines.push(l) });
  r.add("store", () => {});
  assert.equal((await r.run()).ok, true);
  assert.equal(r.draining, false);
  r.drain();
  r.drain("said twice");
  assert.equal(r.draining, true);
  const report = await r.run();
  assert.equal(report.ok, false);
  assert.equal(report.checks.store!.ok, true, "the store still answers");
  assert.deepEqual(report.checks.draining, { ok: false, ms: 0, error: "Shutting down" });
  assert.deepEqual(lines, ["not ready: draining: Shutting down"]);
  // The name is the drain's own: a check cannot take it.
  assert.throws(() => r.add("draining", () => {}), /already registered/);
});
