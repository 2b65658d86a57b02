import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { openDatabase } from "./db.ts";
import { adaptiveCommit, CpuGauge, type EventCommit, INLINE_EVENTS } from "./event_writer.ts";
import { StoreThread } from "./store_thread.ts";
import { Store } from "./mod.ts";

/** A gauge that reads as told, one answer per commit (then idle). */
class ToldGauge extends CpuGauge {
  constructor(private readonly answers: boolean[]) {
    super();
  }
  override busy(): boolean {
    return this.answers.shift() ?? false;
  }
}

function commitOf(sessionId: string, from: number, count: number): EventCommit[] {
  const events = Array.from({ length: count }, (_, i) => ({
    seq: from + i,
    json: JSON.stringify({ seq: from + i, ts: 0, e: { type: "text_delta", delta: "x" } }),
  }));
  return [{ sessionId, events, lastSeq: from + count - 1, eventBytes: 0, patch: null, at: "" }];
}

async function withRelayDb(
  fn: (store: Store, writer: StoreThread, path: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "baton-writer-" });
  const path = join(dir, "relay.db");
  const db = openDatabase(path);
  const writer = new StoreThread(db, path);
  try {
    await fn(new Store(db), writer, path);
  } finally {
    await writer.close();
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("adaptive commits: inline while idle, on the thread while busy, never out of order", async () => {
  await withRelayDb(async (store, writer) => {
    const commit = adaptiveCommit(store, writer, new ToldGauge([true, false]));
    const done: string[] = [];
    // Busy: the thread takes it. Idle right after, but the first is not durable yet:
    // the second must not overtake it (it would, inline).
    const a = commit(commitOf("s1", 1, 3)).then(() => done.push("a"));
    const b = commit(commitOf("s1", 4, 3)).then(() => done.push("b"));
    await Promise.all([a, b]);
    assert.deepEqual(done, ["a", "b"]);
    assert.equal(store.events.maxSeq("s1"), 6);

    // Idle with nothing on the thread: stored before the call returns.
    const c = commit(commitOf("s1", 7, 2));
    assert.equal(store.events.maxSeq("s1"), 8);
    await c;

    const seqs = store.events.after("s1", 0, 100).map((e) => e.seq);
    assert.deepEqual(seqs, [1, 2, 3, 4, 5, 6, 7, 8]);
  });
});

Deno.test("adaptive commits: a large commit goes to the thread even when idle", async () => {
  await withRelayDb(async (store, writer, path) => {
    const commit = adaptiveCommit(store, writer, new ToldGauge([]));
    // Another connection holds the write lock. Inline, the commit would block
    // the event loop on it; on the thread it waits there.
    const other = new DatabaseSync(path);
    other.exec("BEGIN IMMEDIATE");
    const big = commit(commitOf("s1", 1, INLINE_EVENTS + 1));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(store.events.maxSeq("s1"), 0, "not stored while the lock is held");
    other.exec("COMMIT");
    other.close();
    await big;
    assert.equal(store.events.maxSeq("s1"), INLINE_EVENTS + 1);
  });
});

Deno.test("the CPU gauge reads busy while this process works and idle once it stops", async () => {
  const gauge = new CpuGauge(0.5, 0.2, 100);
  const t0 = performance.now();
  assert.equal(gauge.busy(t0), false, "nothing measured yet");
  // Work: 120 ms of CPU, however long a loaded machine takes to give them; the
  // gauge is told 150 ms passed, so its reading does not depend on the load.
  const start = process.cpuUsage();
  const cpuMs = () => {
    const used = process.cpuUsage(start);
    return (used.user + used.system) / 1000;
  };
  while (cpuMs() < 120) {
    // Spin.
  }
  assert.equal(gauge.busy(t0 + 150), true);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(gauge.busy(t0 + 450), false);
});
