import assert from "node:assert/strict";
import { Backoff } from "./backoff.ts";

Deno.test("backoff doubles up to its ceiling and stays within the jitter band", () => {
  const low = new Backoff({ initialMs: 100, maxMs: 1000, random: () => 0 });
  assert.deepEqual([1, 2, 3, 4, 5].map(() => low.next()), [50, 100, 200, 400, 500]);
  const high = new Backoff({ initialMs: 100, maxMs: 1000, random: () => 0.999999 });
  assert.deepEqual([1, 2, 3, 4, 5].map(() => high.next()), [100, 200, 400, 800, 1000]);
});

Deno.test("backoff starts over after reset", () => {
  const b = new Backoff({ initialMs: 100, random: () => 0 });
  b.next();
  b.next();
  b.reset();
  assert.equal(b.next(), 50);
});
