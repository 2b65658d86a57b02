import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { migrate, openDatabase } from "./db.ts";
import { Store } from "./mod.ts";

Deno.test("a database from before the log-size migration learns its sessions' log sizes and turns to incremental vacuum", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-retention-" });
  const path = join(dir, "relay.db");
  try {
    const old = new DatabaseSync(path);
    migrate(old, { through: 5 });
    old.prepare(
      `INSERT INTO sessions (id, user_id, runner_id, status, created_at, updated_at, last_seq)
       VALUES ('s', 'u', 'r', 'ended', 'x', 'x', 3)`,
    ).run();
    const chunk = old.prepare(
      "INSERT INTO session_event_chunks (session_id, first_seq, last_seq, body) VALUES (?, ?, ?, ?)",
    );
    chunk.run("s", 1, 2, "a".repeat(1000));
    chunk.run("s", 3, 3, "b".repeat(500));
    assert.equal(
      (old.prepare("PRAGMA auto_vacuum").get() as { auto_vacuum: number }).auto_vacuum,
      0,
    );
    old.close();

    const logged: string[] = [];
    const db = openDatabase(path, (line) => logged.push(line));
    try {
      assert.match(logged.join("\n"), /Converting the database to incremental vacuum/);
      assert.equal(
        (db.prepare("PRAGMA auto_vacuum").get() as { auto_vacuum: number }).auto_vacuum,
        2,
      );
      assert.equal(new Store(db).sessions.get("s")!.eventBytes, 1500);
    } finally {
      db.close();
    }
    // Once converted, a later start does nothing more.
    const again: string[] = [];
    openDatabase(path, (line) => again.push(line)).close();
    assert.deepEqual(again, []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a deletion takes the session's row and triggers at once and is remembered until its events are gone", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-retention-" });
  const db = openDatabase(join(dir, "relay.db"));
  try {
    const store = new Store(db);
    for (const id of ["gone", "kept"]) {
      store.sessions.insert({
        sessionId: id,
        userId: "u",
        runnerId: "r",
        status: "ended",
        activity: "idle",
        cwd: "/",
        model: null,
        prompt: "",
        title: id,
        createdAt: "2030-01-01T00:00:00.000Z",
        updatedAt: "2030-01-01T00:00:00.000Z",
        endedAt: "2030-01-01T00:00:00.000Z",
        endReason: null,
        lastSeq: 0,
        isPinned: false,
      });
      store.events.appendMany(
        id,
        Array.from({ length: 300 }, (_, i) => ({ seq: i + 1, json: "x".repeat(1000) })),
      );
      store.triggers.saveSubscription({
        subscriptionId: `sub-${id}`,
        sessionId: id,
        userId: "u",
        runnerId: "r",
        triggerType: "tick",
        params: {},
        filters: [],
        filterMode: "and",
        createdAt: "x",
      });
    }
    store.retention.beginDeletion("gone", "u", "2030-01-02T00:00:00.000Z");
    assert.equal(store.sessions.get("gone"), undefined);
    assert.deepEqual(store.triggers.subscriptionsOf("gone"), []);
    assert.equal(store.triggers.subscriptionsOf("kept").length, 1);
    assert.deepEqual(store.retention.pendingDeletions(), ["gone"]);
    // Chunks of 64 KB: 300 KB of events go in steps of two chunks.
    let steps = 0;
    while (store.events.deleteSome("gone", 2) > 0) steps++;
    assert.equal(steps, 3);
    assert.equal(store.events.maxSeq("gone"), 0);
    assert.equal(store.events.maxSeq("kept"), 300);
    store.retention.finishDeletion("gone");
    assert.deepEqual(store.retention.pendingDeletions(), []);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});
