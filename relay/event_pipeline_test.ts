import assert from "node:assert/strict";
import { join } from "node:path";
import type { SessionEvent, SessionEventBody } from "../shared/protocol.ts";
import { CloseCode } from "../shared/protocol.ts";
import { openDatabase } from "./store/db.ts";
import { type Committed, EventPipeline, MAX_EVENT_BYTES } from "./event_pipeline.ts";
import { type EventCommit, inlineCommit } from "./store/event_writer.ts";
import { type AsyncStore, asyncStore, type SessionRecord, Store } from "./store/mod.ts";
import { FakeClock, FakeLink } from "./testdata/fakes.ts";

/**
 * A pipeline over a real store in a temporary folder, with sessions "s1" and
 * "s2" of runner r1 (user u1). Commits go through the store unless `hold`
 * keeps the next ones waiting, or `fail` makes the next one fail.
 */
async function world(repos?: (store: Store) => AsyncStore) {
  const dir = await Deno.makeTempDir({ prefix: "baton-pipeline-" });
  const db = openDatabase(join(dir, "relay.db"));
  // Sessions only: their users and runners do not matter here.
  db.exec("PRAGMA foreign_keys = OFF");
  const store = new Store(db);
  const clock = new FakeClock();
  for (const id of ["s1", "s2"]) store.sessions.insert(record(id));
  const links = new Map<string, FakeLink>([["r1", new FakeLink("r1", "u1")]]);
  const batches: EventCommit[][] = [];
  const committed: Committed[] = [];
  const logs: string[] = [];
  let held: { release: () => void }[] | null = null;
  let failNext = false;
  const write = inlineCommit(store);
  const watched = new Set<string>();
  const pipeline = new EventPipeline({
    store: repos?.(store) ?? asyncStore(store),
    eventBufferSize: 100,
    runners: { link: (id) => links.get(id) },
    commit: (batch) => {
      batches.push(batch);
      if (failNext) {
        failNext = false;
        return Promise.reject(new Error("disk full"));
      }
      if (!held) return write(batch);
      const queue = held;
      return new Promise<void>((resolve, reject) => {
        queue.push({ release: () => write(batch).then(resolve, reject) });
      });
    },
    onCommitted: (c) => committed.push(c),
    watched: (id) => watched.has(id),
    log: (line) => logs.push(line),
    clock,
  });
  const link = links.get("r1")!;
  return {
    store,
    clock,
    pipeline,
    link,
    batches,
    committed,
    logs,
    watched,
    /** Keeps the commits that start from now on waiting until `release`. */
    hold() {
      held = [];
    },
    /** Lets the waiting commits through, in order, and stops holding. */
    release() {
      const queue = held ?? [];
      held = null;
      for (const h of queue) h.release();
    },
    failNext() {
      failNext = true;
    },
    /**
     * Takes events from the runner as its socket would (a session not in
     * memory is loaded first: the socket's next message waits for that).
     */
    async send(sessionId: string, events: SessionEvent[], from = link) {
      await pipeline.ingest(from, { t: "events", sessionId, events });
    },
    stored(sessionId: string) {
      return store.events.after(sessionId, 0, 10_000).map((e) => e.seq);
    },
    async [Symbol.asyncDispose]() {
      await pipeline.close();
      db.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

function record(id: string): SessionRecord {
  return {
    sessionId: id,
    userId: "u1",
    runnerId: "r1",
    status: "starting",
    activity: "idle",
    cwd: "/w",
    model: null,
    prompt: "",
    title: "",
    createdAt: "x",
    updatedAt: "x",
    endedAt: null,
    endReason: null,
    lastSeq: 0,
    isPinned: false,
  };
}

function events(from: number, to: number, e: SessionEventBody = { type: "message_update" }) {
  const out: SessionEvent[] = [];
  for (let seq = from; seq <= to; seq++) out.push({ seq, ts: seq, e });
  return out;
}

/** Lets every promise that is already settled run its reactions (the store's answers). */
function ticks(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/** Lets the commit in flight and its follow-ups finish. */
async function settled(w: Awaited<ReturnType<typeof world>>): Promise<void> {
  w.clock.endTurn();
  await w.pipeline.settle();
}

Deno.test("what arrives in one turn is committed together, then acked and handed on per session", async () => {
  await using w = await world();
  await w.send("s1", events(1, 2));
  await w.send("s2", events(1, 1));
  await w.send("s1", events(3, 4));
  assert.equal(w.batches.length, 0, "nothing is written before the turn ends");
  assert.deepEqual(w.link.acks(), []);
  await settled(w);
  assert.equal(w.batches.length, 1, "one transaction for the whole turn");
  assert.deepEqual(
    w.batches[0]!.map((c) => [c.sessionId, c.events.map((e) => e.seq), c.lastSeq]),
    [["s1", [1, 2, 3, 4], 4], ["s2", [1], 1]],
  );
  assert.deepEqual(w.link.acks(), ["s1:4", "s2:1"], "one ack per session, after the commit");
  assert.deepEqual(w.committed.map((c) => [c.sessionId, c.events.map((e) => e.seq)]), [
    ["s1", [1, 2, 3, 4]],
    ["s2", [1]],
  ]);
  assert.deepEqual(w.stored("s1"), [1, 2, 3, 4]);
  assert.equal(w.pipeline.get("s1")!.lastSeq, 4);
  assert.deepEqual(w.pipeline.get("s1")!.ring.after(2, 10)!.map((e) => e.seq), [3, 4]);
});

Deno.test("re-sent events are skipped and answered with the last committed seq", async () => {
  await using w = await world();
  await w.send("s1", events(1, 3));
  await settled(w);
  await w.send("s1", events(2, 3));
  assert.deepEqual(w.link.acks(), ["s1:3", "s1:3"], "a pure re-send is acked at once");
  await w.send("s1", events(2, 5));
  await settled(w);
  assert.deepEqual(w.batches.map((b) => b[0]!.events.map((e) => e.seq)), [[1, 2, 3], [4, 5]]);
  assert.deepEqual(w.stored("s1"), [1, 2, 3, 4, 5], "nothing stored twice");
});

Deno.test("a gap from the runner is logged and the events are still taken in order", async () => {
  await using w = await world();
  await w.send("s1", events(1, 2));
  await w.send("s1", events(5, 6));
  await settled(w);
  assert.deepEqual(w.stored("s1"), [1, 2, 5, 6]);
  assert.match(w.logs.join("\n"), /session s1: gap in events from runner \(2 → 5\)/);
});

Deno.test("commits run one at a time: what arrives meanwhile goes in the next, acks stay in order", async () => {
  await using w = await world();
  w.hold();
  await w.send("s1", events(1, 2));
  w.clock.endTurn();
  assert.equal(w.batches.length, 1);
  await w.send("s1", events(3, 4));
  w.clock.endTurn();
  assert.equal(w.batches.length, 1, "no second commit while one is in flight");
  assert.deepEqual(w.link.acks(), [], "nothing acked before it is durable");
  w.release();
  await settled(w);
  assert.deepEqual(w.batches.map((b) => b[0]!.events.map((e) => e.seq)), [[1, 2], [3, 4]]);
  assert.deepEqual(w.link.acks(), ["s1:2", "s1:4"]);
  assert.deepEqual(w.committed.flatMap((c) => c.events.map((e) => e.seq)), [1, 2, 3, 4]);
});

Deno.test("a failed commit acks nothing, closes the runner's link, and takes the re-sent events", async () => {
  await using w = await world();
  await w.send("s1", events(1, 2));
  await settled(w);
  w.failNext();
  await w.send("s1", events(3, 4, { type: "session_start" }));
  await settled(w);
  assert.deepEqual(w.link.acks(), ["s1:2"]);
  assert.deepEqual(w.link.closedWith, {
    code: CloseCode.internalError,
    reason: "Relay failed to store events",
  });
  assert.match(w.logs.join("\n"), /storing events failed: Error: disk full/);
  assert.equal(w.pipeline.statusOf("s1"), "starting", "the view goes back to the stored state");
  assert.equal(w.committed.length, 1);

  // The runner reconnects and sends what was not acked.
  await w.send("s1", events(3, 4, { type: "session_start" }));
  await settled(w);
  assert.deepEqual(w.stored("s1"), [1, 2, 3, 4]);
  assert.deepEqual(w.link.acks(), ["s1:2", "s1:4"]);
  assert.equal(w.store.sessions.get("s1")!.status, "running");
});

Deno.test("events of an unknown or foreign session are refused with unknown_session", async () => {
  await using w = await world();
  await w.send("nope", events(1, 1));
  const foreign = new FakeLink("r2", "u2");
  await w.send("s1", events(1, 1), foreign);
  await settled(w);
  assert.equal(w.batches.length, 0);
  assert.deepEqual(w.link.sent, [{
    t: "error",
    code: "unknown_session",
    message: "Unknown session: 'nope'",
    sessionId: "nope",
  }]);
  assert.deepEqual(foreign.sent.map((m) => m.code), ["unknown_session"]);
});

Deno.test("an event too large to store is replaced by a marker", async () => {
  await using w = await world();
  const big = { type: "tool_output", text: "x".repeat(MAX_EVENT_BYTES) };
  await w.send("s1", [{ seq: 1, ts: 1, e: big }]);
  await settled(w);
  const [stored] = w.store.events.after("s1", 0, 1);
  assert.deepEqual(JSON.parse(stored!.json).e, {
    type: "event_too_large",
    originalType: "tool_output",
    bytes: JSON.stringify({ seq: 1, ts: 1, e: big }).length,
  });
  assert.ok(stored!.json.length < 200);
});

Deno.test("events move the session's listed state once committed", async () => {
  await using w = await world();
  await w.send("s1", [
    { seq: 1, ts: 1, e: { type: "session_start", cwd: "/w/a", model: { provider: "p", id: "m" } } },
    {
      seq: 2,
      ts: 2,
      e: { type: "message_start", message: { role: "user", content: "Fix  the\nbug" } },
    },
    { seq: 3, ts: 3, e: { type: "agent_start" } },
  ]);
  assert.equal(w.pipeline.statusOf("s1"), "running", "the view moves at once");
  assert.equal(w.store.sessions.get("s1")!.status, "starting", "the row once committed");
  await settled(w);
  const s = w.store.sessions.get("s1")!;
  assert.deepEqual([s.status, s.activity, s.cwd, s.title], [
    "running",
    "working",
    "/w/a",
    "Fix the bug",
  ]);
  assert.deepEqual(w.committed[0]!.patch, {
    status: "running",
    activity: "working",
    cwd: "/w/a",
    model: { provider: "p", id: "m" },
    title: "Fix the bug",
  });

  await w.send("s1", [{
    seq: 4,
    ts: 4,
    e: { type: "session_end", reason: "crashed", message: "boom" },
  }]);
  await settled(w);
  const ended = w.store.sessions.get("s1")!;
  assert.deepEqual([ended.status, ended.endReason, ended.endedAt], [
    "error",
    "boom",
    new Date(w.clock.now()).toISOString(),
  ]);
  await w.send("s1", [{ seq: 5, ts: 5, e: { type: "session_start" } }]);
  await settled(w);
  assert.equal(w.store.sessions.get("s1")!.status, "error", "an ended session stays ended");
});

Deno.test("an event the relay writes itself goes after the runner's, with its state change", async () => {
  await using w = await world();
  await w.send("s1", events(1, 3));
  await w.pipeline.inject(w.store.sessions.get("s1")!, { type: "session_end", reason: "lost" }, {
    status: "error",
    endReason: "gone",
  });
  await settled(w);
  assert.deepEqual(w.stored("s1"), [1, 2, 3, 4]);
  assert.equal(JSON.parse(w.store.events.after("s1", 3, 1)[0]!.json).e.type, "session_end");
  assert.deepEqual(w.committed.at(-1)!.patch, { status: "error", endReason: "gone" });
  assert.equal(w.store.sessions.get("s1")!.status, "error");
});

Deno.test("a title set before the first prompt is committed keeps the prompt from titling it", async () => {
  await using w = await world();
  const prompt = (seq: number, content: string): SessionEvent => ({
    seq,
    ts: seq,
    e: { type: "message_start", message: { role: "user", content } },
  });
  await w.send("s1", [prompt(1, "first prompt")]);
  assert.equal(w.pipeline.retitle("s1", "Mine"), true);
  assert.equal(w.pipeline.retitle("s9", "Mine"), false, "not in memory");
  await w.send("s1", [prompt(2, "second prompt")]);
  await settled(w);
  assert.equal(w.committed.at(-1)!.patch?.title, undefined, "no title from either prompt");
  assert.equal(w.store.sessions.get("s1")!.title, "", "the service writes the new title itself");
});

Deno.test("a dropped session's pending events are never written", async () => {
  await using w = await world();
  await w.send("s1", events(1, 2));
  w.pipeline.drop("s1");
  await settled(w);
  assert.equal(w.batches.length, 0);
  assert.equal(w.pipeline.get("s1"), undefined);
});

Deno.test("idle sessions without viewers leave memory with their last seq written", async () => {
  await using w = await world();
  await w.pipeline.start();
  await w.send("s1", events(1, 3));
  await w.send("s2", events(1, 1));
  await settled(w);
  w.watched.add("s2");
  assert.equal(w.store.sessions.get("s1")!.lastSeq, 0, "not written with every commit");
  w.clock.advance(5 * 60_000);
  await ticks();
  assert.ok(w.pipeline.get("s1"), "recent: still in memory");
  w.clock.advance(6 * 60_000);
  await ticks();
  assert.equal(w.pipeline.get("s1"), undefined);
  assert.ok(w.pipeline.get("s2"), "a watched session stays");
  assert.equal(w.store.sessions.get("s1")!.lastSeq, 3);
  const reloaded = await w.pipeline.open(w.store.sessions.get("s1")!);
  assert.equal(reloaded!.lastSeq, 3, "reloaded from its row");
});

Deno.test("start catches stored last seqs up with the log; close writes them and stops", async () => {
  await using w = await world();
  w.store.events.appendMany("s1", [{ seq: 1, json: "{}" }, { seq: 2, json: "{}" }]);
  await w.pipeline.start();
  assert.equal(w.store.sessions.get("s1")!.lastSeq, 2);
  assert.match(w.logs.join("\n"), /brought 1 sessions' last seq up/);
  await w.send("s1", events(3, 5));
  assert.equal(w.clock.pendingTimers, 1, "the eviction interval");
  await w.pipeline.close();
  assert.equal(w.store.sessions.get("s1")!.lastSeq, 5, "what was pending was committed first");
  assert.equal(w.clock.pendingTimers, 0);
  await w.send("s1", events(6, 6));
  w.clock.endTurn();
  assert.equal(w.batches.length, 1, "a closed pipeline commits nothing more");
});

Deno.test("a session's log size follows its committed events: in memory at once, in its row with a state change or storeTails", async () => {
  await using w = await world();
  const size = (from: number, to: number, e?: SessionEventBody) =>
    events(from, to, e).reduce((n, ev) => n + JSON.stringify(ev).length, 0);
  const row = () => w.store.sessions.get("s1")!.eventBytes;
  await w.send("s1", events(1, 3));
  await settled(w);
  const three = size(1, 3);
  assert.equal(w.pipeline.get("s1")!.eventBytes, three);
  assert.equal(row(), 0, "no row write for events alone (see applyCommits)");
  // A state change writes the row, with the size at that seq.
  const end: SessionEventBody = { type: "session_end", reason: "ended" };
  await w.send("s1", events(4, 4, end));
  await settled(w);
  assert.equal(row(), three + size(4, 4, end));
  // Re-sent events add nothing.
  await w.send("s1", events(2, 4, end));
  await settled(w);
  assert.equal(w.pipeline.get("s1")!.eventBytes, three + size(4, 4, end));
  await w.send("s2", events(1, 2));
  await settled(w);
  assert.equal(w.store.sessions.get("s2")!.eventBytes, 0);
  assert.equal(await w.pipeline.storeTails(), true);
  assert.equal(w.store.sessions.get("s2")!.eventBytes, size(1, 2));
});

/** An AsyncStore over `store` whose reads of a log's last seq wait until `open` is called. */
function gatedStore(store: Store) {
  const waiting: (() => void)[] = [];
  let gated = true;
  const repos = asyncStore(store);
  const maxSeq = repos.events.maxSeq;
  const gate = {
    repos: {
      ...repos,
      events: {
        ...repos.events,
        maxSeq: (id: string) =>
          gated
            ? new Promise<void>((resolve) => waiting.push(resolve)).then(() => maxSeq(id))
            : maxSeq(id),
      },
    } as AsyncStore,
    /** How many loads wait at the gate. */
    get waiting() {
      return waiting.length;
    },
    open() {
      gated = false;
      for (const w of waiting.splice(0)) w();
    },
  };
  return gate;
}

Deno.test("a session is loaded once while batches for it keep coming, and takes them in order", async () => {
  let gate!: ReturnType<typeof gatedStore>;
  await using w = await world((store) => (gate = gatedStore(store)).repos);
  w.store.events.appendMany("s1", [{ seq: 1, json: "{}" }, { seq: 2, json: "{}" }]);
  // As a busy socket would: three batches in flight while the session loads.
  const sent = [
    w.pipeline.ingest(w.link, { t: "events", sessionId: "s1", events: events(2, 3) }),
    w.pipeline.ingest(w.link, { t: "events", sessionId: "s1", events: events(4, 4) }),
    w.pipeline.ingest(w.link, { t: "events", sessionId: "s1", events: events(3, 5) }),
  ];
  await ticks();
  assert.equal(gate.waiting, 1, "one read of the log's end, not one per batch");
  assert.equal(w.pipeline.get("s1"), undefined, "not in memory before it is loaded");
  gate.open();
  await Promise.all(sent);
  await settled(w);
  assert.deepEqual(w.batches.map((b) => b[0]!.events.map((e) => e.seq)), [[3, 4, 5]]);
  assert.deepEqual(w.stored("s1"), [1, 2, 3, 4, 5], "seq 2 was stored already: skipped");
  assert.deepEqual(w.link.acks(), ["s1:5"]);
});

Deno.test("a session dropped while it loads takes none of the events that waited for it", async () => {
  let gate!: ReturnType<typeof gatedStore>;
  await using w = await world((store) => (gate = gatedStore(store)).repos);
  const sent = w.send("s1", events(1, 2));
  await ticks();
  assert.equal(gate.waiting, 1);
  // Its spawn failed (session_service.ts): the row goes, then the pipeline forgets it.
  w.store.sessions.delete("s1");
  w.pipeline.drop("s1");
  gate.open();
  await sent;
  await settled(w);
  assert.equal(w.batches.length, 0, "nothing written");
  assert.equal(w.pipeline.get("s1"), undefined, "not in memory");
  assert.deepEqual(w.link.sent.map((m) => m.code), ["unknown_session"]);
});

Deno.test("a session that takes events while its row is written on eviction stays in memory", async () => {
  const held: (() => void)[] = [];
  let released = false;
  await using w = await world((store) => {
    const repos = asyncStore(store);
    const setLastSeqs = repos.sessions.setLastSeqs;
    return {
      ...repos,
      sessions: {
        ...repos.sessions,
        // The first write (the eviction's) waits for the test; the one at close does not.
        setLastSeqs: (list: { id: string; seq: number; eventBytes: number }[]) =>
          held.length === 0 && !released
            ? new Promise<void>((resolve) => held.push(resolve)).then(() => setLastSeqs(list))
            : setLastSeqs(list),
      },
    } as AsyncStore;
  });
  await w.send("s1", events(1, 2));
  await w.send("s2", events(1, 1));
  await settled(w);
  w.clock.advance(11 * 60_000);
  const evicting = w.pipeline.evictIdle();
  await ticks();
  assert.equal(held.length, 1, "the rows are being written");
  // Meanwhile s1 gets events (committed: it is recent again); s2 stays idle.
  await w.send("s1", events(3, 3));
  await settled(w);
  released = true;
  held.shift()!();
  await evicting;
  assert.ok(w.pipeline.get("s1"), "s1 stays: it is no longer idle");
  assert.equal(w.pipeline.get("s1")!.lastSeq, 3);
  assert.equal(w.pipeline.get("s2"), undefined, "s2 leaves");
  assert.equal(w.store.sessions.get("s2")!.lastSeq, 1, "its row written first");
});

/** Events as another relay node committed and published them. */
function stored(from: number, to: number) {
  return events(from, to).map((e) => ({ seq: e.seq, json: JSON.stringify(e) }));
}

Deno.test("events another node committed move the tail; a jump empties the ring so viewers read the log", async () => {
  await using w = await world();
  const live = (await w.pipeline.open(record("s1")))!;
  assert.deepEqual(w.pipeline.mirror("s1", stored(1, 3)).map((e) => e.seq), [1, 2, 3]);
  assert.equal(live.lastSeq, 3);
  assert.deepEqual(live.ring.after(0, 10)?.map((e) => e.seq), [1, 2, 3]);
  // Seen already (or this node's own, back over the bus): nothing new.
  assert.deepEqual(w.pipeline.mirror("s1", stored(2, 3)), []);
  // 4..6 never arrived: the ring no longer answers from before 7.
  assert.deepEqual(w.pipeline.mirror("s1", stored(7, 8)).map((e) => e.seq), [7, 8]);
  assert.equal(live.lastSeq, 8);
  assert.equal(live.ring.after(3, 10), null, "what is missing comes from the log");
  // A session not in memory takes nothing.
  assert.deepEqual(w.pipeline.mirror("s2", stored(1, 1)), []);
});

Deno.test("a session this node ingests ignores mirrored events, and its tail catches up with the log only when idle", async () => {
  await using w = await world();
  await w.send("s1", events(1, 2));
  // Received, not committed yet: this node is the one writing the session.
  assert.deepEqual(w.pipeline.mirror("s1", stored(1, 5)), []);
  assert.equal(await w.pipeline.catchUp("s1"), false);
  await settled(w);
  assert.equal(w.pipeline.get("s1")!.lastSeq, 2);
  // Another node wrote 3..5 to the log (the runner moved there): the tail follows.
  w.store.events.appendMany("s1", stored(3, 5));
  assert.equal(await w.pipeline.catchUp("s1"), true);
  assert.equal(w.pipeline.get("s1")!.lastSeq, 5);
  // The runner comes back and resends 4..6: only 6 is new.
  await w.send("s1", events(4, 6));
  await settled(w);
  assert.deepEqual(w.stored("s1"), [1, 2, 3, 4, 5, 6], "nothing stored twice");
});
