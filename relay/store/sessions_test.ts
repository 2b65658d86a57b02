import assert from "node:assert/strict";
import { join } from "node:path";
import { type Database, openDatabase } from "./db.ts";
import { EventsRepo } from "./events.ts";
import { SessionsRepo } from "./sessions.ts";

/**
 * A new database whose sessions need no users or runners (foreign keys off):
 * `put(id, lastSeq)` adds a running one.
 */
async function withSessions(
  fn: (db: Database, put: (id: string, lastSeq: number) => void) => void,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "baton-sessions-" });
  const db = openDatabase(join(dir, "relay.db"));
  try {
    db.exec("PRAGMA foreign_keys = OFF");
    const st = db.prepare(
      `INSERT INTO sessions (id, user_id, runner_id, status, created_at, updated_at, last_seq)
       VALUES (?, 'u', 'r', 'running', 'x', 'x', ?)`,
    );
    fn(db, (id, lastSeq) => st.run(id, lastSeq));
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("after a crash, each session's last_seq catches up with its stored events", async () => {
  await withSessions((db, put) => {
    const events = new EventsRepo(db);
    const log = (sid: string, seqs: number[]) =>
      events.appendMany(sid, seqs.map((seq) => ({ seq, json: `{"seq":${seq}}` })));
    put("behind", 2);
    log("behind", [1, 2]);
    log("behind", [3, 4]);
    log("behind", [5, 9]); // the last chunk, with a gap: its last seq counts
    put("current", 7);
    log("current", [6, 7]);
    put("empty", 0);
    const last = () =>
      Object.fromEntries(
        (db.prepare("SELECT id, last_seq FROM sessions ORDER BY id").all() as {
          id: string;
          last_seq: number;
        }[]).map((r) => [r.id, r.last_seq]),
      );

    const sessions = new SessionsRepo(db);
    assert.equal(sessions.catchUpLastSeqs(), 1, "only the session that lagged changed");
    assert.deepEqual(last(), { behind: 9, current: 7, empty: 0 });
    // Its size grows by the chunks past its old last seq (two of 2 events: 19 characters each).
    assert.equal(sessions.get("behind")!.eventBytes, 38);
    assert.equal(sessions.get("current")!.eventBytes, 0, "a row that did not lag keeps its size");
    assert.equal(sessions.catchUpLastSeqs(), 0, "a second pass finds nothing to do");
  });
});

Deno.test("setLastSeqs moves several rows forward in one transaction, never back", async () => {
  await withSessions((db, put) => {
    put("a", 1);
    put("b", 9);
    const sessions = new SessionsRepo(db);
    sessions.setLastSeqs([]);
    sessions.setLastSeqs([{ id: "a", seq: 4, eventBytes: 40 }, {
      id: "b",
      seq: 5,
      eventBytes: 50,
    }]);
    assert.equal(sessions.get("a")!.lastSeq, 4);
    assert.equal(sessions.get("a")!.eventBytes, 40);
    assert.equal(sessions.get("b")!.lastSeq, 9, "a row ahead stays where it is");
    // A failure part way leaves no row changed.
    db.exec(
      `CREATE TRIGGER no_c BEFORE UPDATE ON sessions WHEN NEW.id = 'b'
       BEGIN SELECT RAISE(ABORT, 'refused'); END`,
    );
    assert.throws(
      () =>
        sessions.setLastSeqs([{ id: "a", seq: 6, eventBytes: 60 }, {
          id: "b",
          seq: 10,
          eventBytes: 1,
        }]),
      /refused/,
    );
    assert.equal(sessions.get("a")!.lastSeq, 4, "rolled back");
  });
});
