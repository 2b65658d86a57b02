import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { openDatabase } from "./db.ts";
import type { EventCommit } from "./event_writer.ts";
import { Store } from "./mod.ts";
import { StoreThread, type StoreThreadOptions } from "./store_thread.ts";

function commitOf(sessionId: string, from: number, count: number, size = 10): EventCommit[] {
  const events = Array.from({ length: count }, (_, i) => ({
    seq: from + i,
    json: JSON.stringify({
      seq: from + i,
      ts: 0,
      e: { type: "text_delta", delta: "x".repeat(size) },
    }),
  }));
  const eventBytes = events.reduce((n, e) => n + e.json.length, 0);
  return [{ sessionId, events, lastSeq: from + count - 1, eventBytes, patch: null, at: "" }];
}

async function until(what: string, ok: () => boolean, ms = 5000): Promise<void> {
  const end = performance.now() + ms;
  while (!ok()) {
    if (performance.now() > end) throw new Error(`Not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const walSize = (path: string) => Deno.statSync(`${path}-wal`).size;

async function withThread(
  options: StoreThreadOptions,
  fn: (store: Store, thread: StoreThread, path: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "baton-store-thread-" });
  const path = join(dir, "relay.db");
  const db = openDatabase(path);
  const thread = new StoreThread(db, path, options);
  try {
    await fn(new Store(db), thread, path);
  } finally {
    await thread.close();
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const QUICK = { checkpointMs: 20, watchMs: 20, idleMs: 200, walBytes: 1024 * 1024 };

Deno.test("a small WAL is checkpointed without the store thread once nothing writes to it", async () => {
  await withThread({ ...QUICK, watchMs: 100 }, async (store, thread, path) => {
    // Writes every 20 ms: not quiet, so nothing is checkpointed meanwhile.
    for (let i = 0; i < 15; i++) {
      store.tx(() => store.events.appendMany("s1", commitOf("s1", i * 10 + 1, 10)[0]!.events));
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(walSize(path) > 0 && walSize(path) < QUICK.walBytes);
    await until("the quiet WAL is emptied", () => walSize(path) === 0);
    assert.equal(thread.running, false, "no thread was started for it");
    const other = new DatabaseSync(path, { readOnly: true });
    try {
      const row = other.prepare("SELECT MAX(last_seq) AS n FROM session_event_chunks").get();
      assert.equal(row?.n, 150);
    } finally {
      other.close();
    }
  });
});

Deno.test("a WAL past its limit starts the store thread, which empties it and ends once idle", async () => {
  await withThread(QUICK, async (store, thread, path) => {
    // Written on this thread, as inline commits are: ~1.2 MB of events.
    for (let i = 0; i < 40; i++) {
      store.tx(() =>
        store.events.appendMany("s1", commitOf("s1", i * 10 + 1, 10, 3000)[0]!.events)
      );
    }
    assert.ok(walSize(path) >= QUICK.walBytes);
    await until("the thread starts", () => thread.running);
    await until("the thread ends once idle", () => !thread.running);
    assert.equal(walSize(path), 0, "the WAL was checkpointed into the database and emptied");
    // Everything is in the database file itself now.
    const other = new DatabaseSync(path, { readOnly: true });
    try {
      const row = other.prepare("SELECT MAX(last_seq) AS n FROM session_event_chunks").get();
      assert.equal(row?.n, 400);
    } finally {
      other.close();
    }
  });
});

Deno.test("commits sent to an ended store thread start it again, and none is lost across the restarts", async () => {
  await withThread(QUICK, async (store, thread, path) => {
    assert.equal(thread.running, false);
    await thread.commit(commitOf("s1", 1, 5));
    assert.equal(thread.running, true, "the first commit started it");
    await until("the thread ends once idle", () => !thread.running);
    // Several at once right as it starts again, in order.
    await Promise.all([thread.commit(commitOf("s1", 6, 5)), thread.commit(commitOf("s1", 11, 5))]);
    assert.equal(store.events.maxSeq("s1"), 15);
    // Each was durable when it resolved: another connection (a restarted relay) reads them all.
    const other = new DatabaseSync(path, { readOnly: true });
    try {
      const row = other.prepare("SELECT MAX(last_seq) AS n FROM session_event_chunks").get();
      assert.equal(row?.n, 15);
    } finally {
      other.close();
    }
    const seqs = store.events.after("s1", 0, 100).map((e) => e.seq);
    assert.deepEqual(seqs, Array.from({ length: 15 }, (_, i) => i + 1));
  });
});

Deno.test("closing the store thread while it never ran still leaves an empty WAL", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-store-thread-" });
  const path = join(dir, "relay.db");
  const db = openDatabase(path);
  try {
    const thread = new StoreThread(db, path, QUICK);
    const store = new Store(db);
    store.tx(() => store.events.appendMany("s1", commitOf("s1", 1, 10)[0]!.events));
    assert.ok(walSize(path) > 0);
    await thread.close();
    assert.equal(thread.running, false);
    assert.equal(walSize(path), 0);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});
