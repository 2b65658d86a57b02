import assert from "node:assert/strict";
import { RateLimiter } from "./rate_limit.ts";

Deno.test("rate limiter allows the limit, refuses the next, and frees up after the window", () => {
  let now = 1_000_000;
  const rl = new RateLimiter({ limit: 5, windowMs: 15 * 60_000, now: () => now });
  for (let i = 0; i < 5; i++) assert.deepEqual(rl.hit("1.2.3.4"), { ok: true });
  assert.deepEqual(rl.hit("1.2.3.4"), { ok: false, retryAfterSeconds: 900 });
  assert.deepEqual(rl.hit("5.6.7.8"), { ok: true }, "other clients are not affected");
  now += 15 * 60_000;
  assert.deepEqual(rl.hit("1.2.3.4"), { ok: true });
});
