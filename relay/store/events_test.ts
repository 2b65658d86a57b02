import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { migrate, openDatabase } from "./db.ts";
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

Deno.test("a session's log reads back whole across chunks, gaps and multi-line JSON", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-events-" });
  const db = openDatabase(join(dir, "relay.db"));
  try {
    const repo = new EventsRepo(db);
    const ev = (seq: number, text = "x") => ({ seq, json: JSON.stringify({ seq, e: { text } }) });
    // A commit with a gap in it (the runner lost 4 and 5), one whose JSON has
    // newlines of its own, then a commit of 300 small events.
    assert.equal(repo.appendMany("s1", [ev(1), ev(2), ev(3), ev(6), ev(7)]), 5);
    const pretty = { seq: 8, json: JSON.stringify({ seq: 8, e: { text: "a\nb" } }, null, 2) };
    assert.equal(repo.appendMany("s1", [pretty, ev(9)]), 2);
    const run = Array.from({ length: 300 }, (_, i) => ev(10 + i, "y".repeat(i)));
    assert.equal(repo.appendMany("s1", run), 300);
    assert.equal(repo.append("s1", 309, "{}"), false, "a seq already stored is not stored again");
    assert.equal(repo.maxSeq("s1"), 309);
    const all = [ev(1), ev(2), ev(3), ev(6), ev(7), pretty, ev(9), ...run];
    assert.deepEqual(repo.after("s1", 0, 1000), all);
    // Every starting point and page size gives the same events, in pages.
    for (const limit of [1, 2, 7, 64]) {
      for (const since of [0, 3, 4, 5, 6, 7, 8, 9, 10, 150, 308, 309]) {
        const want = all.filter((e) => e.seq > since);
        const got = [];
        for (let after = since;;) {
          const page = repo.after("s1", after, limit);
          if (page.length === 0) break;
          assert.ok(page.length <= limit, `at most ${limit}`);
          got.push(...page);
          after = page[page.length - 1]!.seq;
        }
        assert.deepEqual(got, want, `since ${since}, pages of ${limit}`);
      }
    }
    repo.deleteSession("s1");
    assert.equal(repo.maxSeq("s1"), 0);
    assert.deepEqual(repo.after("s1", 0, 10), []);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("events stored a row each before version 5 come across to chunks", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-events-" });
  const path = join(dir, "relay.db");
  try {
    // The schema as version 4 left it, with events in it. A new database
    // says nothing about its migrations.
    const fresh: string[] = [];
    const old = new DatabaseSync(path);
    migrate(old, { log: (line) => fresh.push(line), through: 4 });
    assert.deepEqual(fresh, []);
    const put = old.prepare("INSERT INTO session_events (session_id, seq, body) VALUES (?, ?, ?)");
    const stored: Record<string, StoredEvent[]> = { a: [], b: [] };
    for (const [sid, seqs] of [["a", [1, 2, 3, 5]], ["b", [1, 2]]] as const) {
      for (const seq of seqs) {
        const json = JSON.stringify({ seq, e: { type: "message_update", text: `${sid}${seq}\n` } });
        put.run(sid, seq, json);
        stored[sid]!.push({ seq, json });
      }
    }
    old.close();

    const logged: string[] = [];
    const db = openDatabase(path, (line) => logged.push(line));
    try {
      // Then version 6 and the one-time conversion to incremental vacuum.
      assert.equal(logged.length, 6, logged.join("\n"));
      assert.match(
        logged[0]!,
        /^Updating the database to version 5 \(session events stored in chunks\)/,
      );
      assert.match(logged[1]!, /^Database at version 5 \(\d+\.\d s\)$/);
      const repo = new EventsRepo(db);
      assert.deepEqual(repo.after("a", 0, 100), stored.a);
      assert.deepEqual(repo.after("a", 3, 100), stored.a!.slice(3));
      assert.deepEqual(repo.after("b", 1, 100), stored.b!.slice(1));
      assert.equal(repo.maxSeq("a"), 5);
      repo.appendMany("a", [{ seq: 6, json: '{"seq":6}' }, { seq: 7, json: '{"seq":7}' }]);
      assert.deepEqual(repo.after("a", 4, 100).map((e) => e.seq), [5, 6, 7]);
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE name = 'session_events'")
        .all();
      assert.deepEqual(tables, [], "the old table is gone");
    } finally {
      db.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
