import assert from "node:assert/strict";
import { join } from "node:path";
import { openDatabase } from "../db.ts";
import { EventsRepo, type StoredEvent } from "./events.ts";

Deno.test("appendMany stores runs of mixed sizes whole, in order, once", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-events-" });
  const db = openDatabase(join(dir, "relay.db"));
  try {
    const repo = new EventsRepo(db);
    // Deltas, 4 KB and 32 KB outputs: statements split by rows and by bytes.
    const sizes = [20, 4096, 32 * 1024, 150, 33 * 1024, 64 * 1024 + 1, 10];
    const events: StoredEvent[] = Array.from({ length: 300 }, (_, i) => ({
      seq: i + 1,
      json: JSON.stringify({ seq: i + 1, e: { text: "é".repeat(sizes[i % sizes.length]!) } }),
    }));
    repo.appendMany("s1", events.slice(0, 200));
    // A re-send overlapping what is stored: the stored copies win, nothing doubles.
    repo.appendMany("s1", events.slice(150).map((e) => e.seq <= 200 ? { ...e, json: "{}" } : e));
    assert.equal(repo.maxSeq("s1"), 300);
    const back: StoredEvent[] = [];
    for (let after = 0; back.length < 300;) {
      const page = repo.after("s1", after, 64);
      assert.ok(page.length > 0, `events after ${after}`);
      back.push(...page);
      after = page[page.length - 1]!.seq;
    }
    assert.deepEqual(back, events);
    assert.deepEqual(repo.after("s2", 0, 10), [], "another session's log is its own");
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});
