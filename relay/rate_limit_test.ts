import assert from "node:assert/strict";
import { clientKey, countingStore, RateLimiter } from "./rate_limit.ts";

Deno.test("rate limiter allows the limit, refuses the next, and frees up after the window", () => {
  let now = 1_000_000;
  const rl = new RateLimiter({ limit: 5, windowMs: 15 * 60_000, now: () => now });
  for (let i = 0; i < 5; i++) assert.deepEqual(rl.hit("1.2.3.4"), { ok: true });
  assert.deepEqual(rl.hit("1.2.3.4"), { ok: false, retryAfterSeconds: 900 });
  assert.deepEqual(rl.hit("5.6.7.8"), { ok: true }, "other clients are not affected");
  now += 15 * 60_000;
  assert.deepEqual(rl.hit("1.2.3.4"), { ok: true });
});

Deno.test("an IPv6 client counts by its /64, whichever address of it it uses", () => {
  assert.equal(clientKey("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  assert.equal(clientKey("2001:0DB8:0001:0002:ffff:0:0:9"), "2001:db8:1:2::/64");
  assert.equal(clientKey("[2001:db8:1:2::7]"), "2001:db8:1:2::/64");
  assert.equal(clientKey("fe80::1%eth0"), "fe80:0:0:0::/64");
  assert.equal(clientKey("::1"), "0:0:0:0::/64");
  assert.equal(clientKey("::ffff:192.0.2.7"), "192.0.2.7");
  assert.equal(clientKey("192.0.2.7"), "192.0.2.7");
  assert.equal(clientKey("unknown"), "unknown");
  assert.equal(clientKey("1:2:3"), "1:2:3", "not an address: kept as it is");

  const rl = new RateLimiter({ limit: 5, windowMs: 60_000, now: () => 0 });
  for (let i = 1; i <= 5; i++) assert.deepEqual(rl.hit(`2001:db8:1:2::${i}`), { ok: true });
  assert.equal(rl.hit("2001:db8:1:2:dead:beef:0:1").ok, false, "same /64, new address");
  assert.deepEqual(rl.hit("2001:db8:1:3::1"), { ok: true }, "the next /64 is another client");
});

Deno.test("each relay's sign-in counts are its own, per window", async () => {
  let t = 1_000_000;
  const a = countingStore(() => t);
  const b = countingStore(() => t);
  const rule = { window: 60, max: 2 };
  assert.equal((await a.consume("ip|/sign-in", rule)).allowed, true);
  assert.equal((await a.consume("ip|/sign-in", rule)).allowed, true);
  assert.deepEqual(await a.consume("ip|/sign-in", rule), { allowed: false, retryAfter: 60 });
  assert.equal((await b.consume("ip|/sign-in", rule)).allowed, true, "another relay's count");
  assert.equal((await a.consume("other|/sign-in", rule)).allowed, true, "another client");
  t += 30_000;
  assert.deepEqual(await a.consume("ip|/sign-in", rule), { allowed: false, retryAfter: 30 });
  t += 30_000;
  assert.equal((await a.consume("ip|/sign-in", rule)).allowed, true, "a new window");
});
