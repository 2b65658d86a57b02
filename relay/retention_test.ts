import assert from "node:assert/strict";
import { join } from "node:path";
import { type Clock, systemClock } from "./_clock.ts";
import { Retention, RETENTION_SWEEP_MS, type RetentionPolicy } from "./retention.ts";
import { FakeClock } from "./testdata/fakes.ts";
import { openDatabase } from "./store/db.ts";
import { asyncStore, Store } from "./store/mod.ts";
import { reclaimSpace } from "./store/vacuum.ts";

const DAY = 86_400_000;
const NOW = Date.UTC(2030, 5, 1);

interface World {
  store: Store;
  retention: Retention;
  /** Sessions the viewers were told are gone, as `user/session`. */
  told: string[];
  add(
    id: string,
    o: { user?: string; status?: string; endedDaysAgo?: number; pinned?: boolean; kb?: number },
  ): void;
  ids(): string[];
}

async function withWorld(
  policy: RetentionPolicy,
  fn: (w: World) => Promise<void>,
  clockOf: (now: () => number) => Clock = (now) => ({ ...systemClock, now }),
) {
  const dir = await Deno.makeTempDir({ prefix: "baton-retention-" });
  const db = openDatabase(join(dir, "relay.db"));
  const store = new Store(db);
  const told: string[] = [];
  // Real timers (the steps yield to the loop) and a fixed "now", unless told otherwise.
  const clock = clockOf(() => NOW);
  const retention = new Retention({
    store: asyncStore(store),
    reclaimSpace: (pages) => reclaimSpace(db, pages),
    events: { drop() {}, inFlight: () => null, storeTails: () => Promise.resolve(true) },
    fanout: { sessionDeleted: (u, s) => told.push(`${u}/${s}`) },
    feed: { bump() {} },
    policy,
    clock,
  });
  const w: World = {
    store,
    retention,
    told,
    add(id, o) {
      const ended = o.endedDaysAgo === undefined
        ? null
        : new Date(NOW - o.endedDaysAgo * DAY).toISOString();
      store.sessions.insert({
        sessionId: id,
        userId: o.user ?? "u1",
        runnerId: "r",
        status: (o.status ?? "ended") as "ended",
        activity: "idle",
        cwd: "/",
        model: null,
        prompt: "",
        title: id,
        createdAt: new Date(NOW - 400 * DAY).toISOString(),
        updatedAt: ended ?? new Date(NOW).toISOString(),
        endedAt: ended,
        endReason: null,
        lastSeq: 0,
        isPinned: o.pinned ?? false,
      });
      const kb = o.kb ?? 1;
      const events = Array.from({ length: kb }, (_, i) => ({ seq: i + 1, json: "x".repeat(1024) }));
      store.events.appendMany(id, events);
      store.sessions.setLastSeq(id, kb, kb * 1024);
    },
    ids: () =>
      (db.prepare("SELECT id FROM sessions ORDER BY id").all() as { id: string }[]).map((r) =>
        r.id
      ),
  };
  try {
    await fn(w);
  } finally {
    await retention.close();
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("the sweep removes ended, unpinned sessions past the age limit and keeps pinned, running and recent ones", async () => {
  await withWorld({ maxAgeDays: 30, userMaxBytes: 0, maxBytes: 0 }, async (w) => {
    w.add("old", { endedDaysAgo: 31 });
    w.add("old-error", { status: "error", endedDaysAgo: 100 });
    w.add("old-pinned", { endedDaysAgo: 100, pinned: true });
    w.add("running", { status: "running" });
    w.add("starting", { status: "starting" });
    w.add("recent", { endedDaysAgo: 29 });
    const res = await w.retention.sweep();
    assert.deepEqual(res, { sessions: 2, eventBytes: 2048 });
    assert.deepEqual(w.ids(), ["old-pinned", "recent", "running", "starting"]);
    assert.deepEqual(w.told.sort(), ["u1/old", "u1/old-error"]);
    assert.equal(w.store.events.maxSeq("old"), 0, "its events are gone");
    assert.deepEqual(w.store.retention.pendingDeletions(), []);
    assert.deepEqual(await w.retention.sweep(), { sessions: 0, eventBytes: 0 }, "idempotent");
  });
});

Deno.test("a relay-wide size limit removes the oldest ended sessions of any user until the total fits", async () => {
  await withWorld({ maxAgeDays: 0, userMaxBytes: 0, maxBytes: 100 * 1024 }, async (w) => {
    w.add("a-oldest", { user: "a", endedDaysAgo: 50, kb: 30 });
    w.add("b-older", { user: "b", endedDaysAgo: 40, kb: 30 });
    w.add("a-pinned", { user: "a", endedDaysAgo: 60, kb: 30, pinned: true });
    w.add("b-running", { user: "b", status: "running", kb: 30 });
    w.add("a-newer", { user: "a", endedDaysAgo: 10, kb: 30 });
    // 150 KB against 100 KB: the two oldest deletable ones go, whoever owns them.
    const res = await w.retention.sweep();
    assert.equal(res.sessions, 2);
    assert.deepEqual(w.ids(), ["a-newer", "a-pinned", "b-running"]);
    assert.deepEqual(w.told.sort(), ["a/a-oldest", "b/b-older"]);
  });
});

Deno.test("a per-user size limit weighs each user alone; pinned and running sessions count but stay", async () => {
  await withWorld({ maxAgeDays: 0, userMaxBytes: 50 * 1024, maxBytes: 0 }, async (w) => {
    w.add("a-pinned", { user: "a", endedDaysAgo: 60, kb: 40, pinned: true });
    w.add("a-old", { user: "a", endedDaysAgo: 30, kb: 5 });
    w.add("a-new", { user: "a", endedDaysAgo: 1, kb: 5 });
    w.add("a-mid", { user: "a", endedDaysAgo: 20, kb: 5 });
    w.add("b-old", { user: "b", endedDaysAgo: 300, kb: 45 });
    await w.retention.sweep();
    // a: 55 KB, 5 over: only the oldest deletable one goes. b is under its limit.
    assert.deepEqual(w.ids(), ["a-mid", "a-new", "a-pinned", "b-old"]);
  });
});

Deno.test("with every limit off the sweep removes nothing", async () => {
  await withWorld({ maxAgeDays: 0, userMaxBytes: 0, maxBytes: 0 }, async (w) => {
    w.add("ancient", { endedDaysAgo: 10_000, kb: 500 });
    assert.deepEqual(await w.retention.sweep(), { sessions: 0, eventBytes: 0 });
    assert.deepEqual(w.ids(), ["ancient"]);
  });
});

Deno.test("a deletion cut short by a stop is finished at the next start", async () => {
  await withWorld({ maxAgeDays: 0, userMaxBytes: 0, maxBytes: 0 }, async (w) => {
    w.add("half", { endedDaysAgo: 1, kb: 200 });
    // As a stop between the row and the events leaves it.
    w.store.retention.beginDeletion("half", "u1", new Date(NOW).toISOString());
    assert.equal(w.store.events.maxSeq("half"), 200);
    w.retention.start();
    await w.retention.idle();
    await w.retention.idle();
    assert.equal(w.store.events.maxSeq("half"), 0);
    assert.deepEqual(w.store.retention.pendingDeletions(), []);
  });
});

Deno.test("the sweep runs again every hour on the injected clock, and removes what aged meanwhile", async () => {
  const clock = new FakeClock(NOW);
  await withWorld({ maxAgeDays: 30, userMaxBytes: 0, maxBytes: 0 }, async (w) => {
    w.add("ages", { endedDaysAgo: 29 });
    w.add("pinned", { endedDaysAgo: 29, pinned: true });
    /** Lets the sweep's steps (which yield on the clock) run to the end. */
    const settle = async () => {
      for (let i = 0; i < 20; i++) {
        clock.advance(0);
        await new Promise((r) => setTimeout(r, 0));
      }
    };
    w.retention.start();
    await settle();
    assert.deepEqual(w.ids(), ["ages", "pinned"], "29 days: kept at start");
    clock.advance(RETENTION_SWEEP_MS - 1);
    await settle();
    assert.deepEqual(w.ids(), ["ages", "pinned"]);
    // A day later by the clock (hour by hour), an hourly sweep finds it 30 days old.
    for (let h = 0; h < 25; h++) {
      clock.advance(RETENTION_SWEEP_MS);
      await settle();
    }
    assert.deepEqual(w.ids(), ["pinned"]);
    assert.equal(w.store.events.maxSeq("ages"), 0);
  }, () => clock);
});
