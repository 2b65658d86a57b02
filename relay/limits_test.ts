import assert from "node:assert/strict";
import { join } from "node:path";
import { memoryLimits, storeLimits } from "./limits.ts";
import { openDatabase } from "./store/db.ts";
import { asyncStore, Store } from "./store/mod.ts";

/** Two relay "nodes" counting in one SQLite database (on PostgreSQL, one shared table). */
async function withStore(
  fn: (store: ReturnType<typeof asyncStore>, keys: () => string[]) => Promise<void>,
) {
  const dir = await Deno.makeTempDir({ prefix: "baton-limits-" });
  const db = openDatabase(join(dir, "relay.db"));
  try {
    const keys = () =>
      (db.prepare("SELECT key FROM rate_limits ORDER BY key").all() as { key: string }[])
        .map((r) => r.key);
    await fn(asyncStore(new Store(db)), keys);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("limits in the store hold across nodes: hits on either count against one window", async () => {
  await withStore(async (store) => {
    let now = 1_000_000;
    const clock = () => now;
    const a = storeLimits(store.rateLimits, { now: clock });
    const b = storeLimits(store.rateLimits, { now: clock });
    assert.equal(a.kind, "store");
    const onA = a.limiter("fire", { limit: 3, windowMs: 60_000 });
    const onB = b.limiter("fire", { limit: 3, windowMs: 60_000 });
    assert.deepEqual(await onA.hit("w1"), { ok: true });
    assert.deepEqual(await onB.hit("w1"), { ok: true });
    now += 10_000;
    assert.deepEqual(await onA.hit("w1"), { ok: true });
    assert.deepEqual(await onB.hit("w1"), { ok: false, retryAfterSeconds: 50 });
    assert.deepEqual(await onA.hit("w2"), { ok: true }, "another key has its own window");
    // Another limiter's name keeps its keys apart.
    assert.deepEqual(await b.limiter("other", { limit: 1, windowMs: 60_000 }).hit("w1"), {
      ok: true,
    });
    now += 50_000;
    assert.deepEqual(await onB.hit("w1"), { ok: true }, "the window ended");
  });
});

Deno.test("limits in the store count an IPv6 client by its /64, as in memory", async () => {
  await withStore(async (store) => {
    for (const limits of [memoryLimits(), storeLimits(store.rateLimits, { now: () => 0 })]) {
      const l = limits.limiter("register", { limit: 2, windowMs: 60_000, now: () => 0 });
      assert.equal((await l.hit("2001:db8:1:2::1")).ok, true, limits.kind);
      assert.equal((await l.hit("2001:db8:1:2::ffff")).ok, true, limits.kind);
      assert.equal((await l.hit("2001:db8:1:2:dead::1")).ok, false, limits.kind);
      assert.equal((await l.hit("2001:db8:1:3::1")).ok, true, limits.kind);
    }
  });
});

Deno.test("better-auth's storage in the store: allowed with no retry-after, then refused with one", async () => {
  await withStore(async (store, keys) => {
    let now = 5_000_000;
    const limits = storeLimits(store.rateLimits, { now: () => now });
    const a = limits.authStorage();
    const b = storeLimits(store.rateLimits, { now: () => now }).authStorage();
    const rule = { window: 60, max: 2 };
    assert.deepEqual(await a.consume("127.0.0.1/sign-in/email", rule), {
      allowed: true,
      retryAfter: null,
    });
    assert.deepEqual(await b.consume("127.0.0.1/sign-in/email", rule), {
      allowed: true,
      retryAfter: null,
    });
    now += 1_500;
    assert.deepEqual(await a.consume("127.0.0.1/sign-in/email", rule), {
      allowed: false,
      retryAfter: 59,
    });
    // A key as long as a request path may be is kept short.
    const long = `127.0.0.1/${"x".repeat(5000)}`;
    assert.equal((await a.consume(long, rule)).allowed, true);
    assert.equal((await a.consume(long, rule)).allowed, true);
    assert.equal((await a.consume(long, rule)).allowed, false, "its hash counts as one key");
    assert.ok(keys().every((k) => k.length <= 200), keys().join());
  });
});

Deno.test("each node sweeps ended windows at most once a minute", async () => {
  await withStore(async (store, keys) => {
    let now = 0;
    const limits = storeLimits(store.rateLimits, { now: () => now });
    const l = limits.limiter("k", { limit: 5, windowMs: 10_000 });
    for (let i = 0; i < 50; i++) await l.hit(`10.0.0.${i}`);
    assert.equal(keys().length, 50);
    now = 30_000;
    await l.hit("10.1.0.1");
    assert.equal(keys().length, 51, "not yet a minute since the last sweep");
    now = 60_000;
    await l.hit("10.1.0.2");
    await Promise.resolve(); // the sweep runs beside the hit, not before its answer
    assert.deepEqual(keys(), ["k:10.1.0.2"], "every ended window went");
  });
});

Deno.test("limits in memory are this process's own", async () => {
  const a = memoryLimits().limiter("fire", { limit: 1, windowMs: 60_000 });
  const b = memoryLimits().limiter("fire", { limit: 1, windowMs: 60_000 });
  assert.deepEqual(await a.hit("w"), { ok: true });
  assert.equal((await a.hit("w")).ok, false);
  assert.deepEqual(await b.hit("w"), { ok: true });
});
