import assert from "node:assert/strict";
import type { SessionInfo } from "../shared/protocol.ts";
import { CloseCode } from "../shared/protocol.ts";
import {
  CATCH_UP_BYTES,
  Fanout,
  LIVE_FRAME_BYTES,
  LOG_READ_BYTES,
  MAX_LOG_READS,
  VIEWER_HIGH_WATER,
  VIEWER_QUEUE_BUDGET,
  viewerHighWater,
} from "./fanout.ts";
import { EventRing } from "./session_log.ts";
import type { ChannelSocket } from "./ws_transport.ts";
import type { StoredEvent } from "./store/mod.ts";
import { FakeClock, FakeViewer, storedEvents } from "./testdata/fakes.ts";
import { Viewer, VIEWER_MAX_UNREAD } from "./viewer.ts";

/**
 * One session ("s1") and a fan-out over it. `commit` does what the event
 * pipeline does once a commit is durable: the events go to the log and the
 * ring, the tail's last seq moves, then the fan-out broadcasts them.
 */
function world(
  options: {
    ringSize?: number;
    /** Answers the log's reads (default: at once, from what is stored then). */
    readLog?: (read: () => StoredEvent[]) => Promise<StoredEvent[]>;
  } = {},
) {
  const clock = new FakeClock();
  const log: StoredEvent[] = [];
  const tail = { lastSeq: 0, ring: new EventRing(options.ringSize ?? 1000) };
  let logReads = 0;
  const logged: string[] = [];
  const fanout = new Fanout<FakeViewer>({
    tail: (id) => id === "s1" ? tail : undefined,
    readLog: (_id, seq, limit, maxBytes) => {
      logReads++;
      const read = () => {
        const out: StoredEvent[] = [];
        let bytes = 0;
        for (const e of log) {
          if (e.seq <= seq) continue;
          if (out.length === limit || (out.length > 0 && bytes + e.json.length > maxBytes)) break;
          out.push(e);
          bytes += e.json.length;
        }
        return out;
      };
      return options.readLog ? options.readLog(read) : Promise.resolve(read());
    },
    log: (line) => logged.push(line),
    clock,
  });
  const store = (events: StoredEvent[]) => {
    log.push(...events);
    for (const e of events) tail.ring.push(e);
    tail.lastSeq = events[events.length - 1]!.seq;
  };
  const commit = (events: StoredEvent[]) => {
    store(events);
    fanout.broadcast("s1", events);
  };
  const info = (): SessionInfo => ({
    sessionId: "s1",
    runnerId: "r1",
    status: "running",
    activity: "idle",
    cwd: "/w",
    model: null,
    title: "",
    createdAt: "",
    updatedAt: "",
    endedAt: null,
    endReason: null,
    lastSeq: tail.lastSeq,
    isPinned: false,
  });
  const join = (v: FakeViewer, since = 0) => {
    fanout.addViewer(v);
    return fanout.subscribe(v, info(), since);
  };
  return { clock, fanout, tail, commit, store, join, logged, logReads: () => logReads };
}

/**
 * Lets catch-up run its course: the log's answers (promises) and the polls
 * of lagging viewers, turn after turn.
 */
async function drained(w: { clock: FakeClock }, turns = 50): Promise<void> {
  for (let i = 0; i < turns; i++) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    w.clock.advance(1);
  }
}

const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

Deno.test("a viewer subscribing from 0 gets the log in order, caught_up, then each commit in one frame", () => {
  const w = world();
  w.commit(storedEvents(1, 30));
  const v = new FakeViewer();
  w.join(v, 0);
  const types = v.messages().map((m) => m.t);
  assert.equal(types[0], "subscribed");
  assert.equal(types.at(-1), "caught_up");
  assert.deepEqual(v.seqs(), range(1, 30));
  assert.deepEqual(v.of("caught_up"), [{ t: "caught_up", sessionId: "s1", seq: 30 }]);

  const before = v.frames.length;
  w.commit(storedEvents(31, 33));
  assert.equal(v.frames.length, before + 1, "one frame per commit");
  assert.deepEqual(v.seqs(), range(1, 33));
  assert.equal(w.fanout.watched("s1"), true);
});

Deno.test("catch-up reads the ring while it reaches back and the log before that", async () => {
  const w = world({ ringSize: 20 });
  w.commit(storedEvents(1, 100)); // the ring keeps 81..100

  const recent = new FakeViewer();
  w.join(recent, 85);
  assert.deepEqual(recent.seqs(), range(86, 100));
  assert.equal(w.logReads(), 0, "a short reconnect never touches the log");

  const old = new FakeViewer();
  w.join(old, 10);
  await drained(w);
  assert.deepEqual(old.seqs(), range(11, 100));
  assert.ok(w.logReads() > 0, "what the ring no longer holds comes from the log");
});

Deno.test("a viewer ahead of the log is told to reset and gets the log from seq 0", () => {
  const w = world();
  w.commit(storedEvents(1, 5));
  const v = new FakeViewer();
  w.join(v, 9);
  assert.deepEqual(v.messages().map((m) => m.t), ["subscribed", "reset", "events", "caught_up"]);
  assert.match(v.of("reset")[0]!.reason, /seq 9, the log ends at 5/);
  assert.deepEqual(v.seqs(), range(1, 5));
});

Deno.test("a stalled viewer stops at its high water without slowing others, then resyncs from the log", async () => {
  const w = world({ ringSize: 50 });
  const fast = new FakeViewer();
  const slow = new FakeViewer({ reading: false });
  w.join(fast);
  w.join(slow);
  const size = 10 * 1024;
  for (let seq = 1; seq <= 200; seq++) {
    w.commit(storedEvents(seq, seq, size));
    w.clock.endTurn();
  }
  assert.deepEqual(fast.seqs(), range(1, 200), "the reading viewer got every commit live");
  const got = slow.seqs();
  assert.ok(got.length > 0 && got.length < 200, `the stalled one stopped early (${got.length})`);
  assert.deepEqual(got, range(1, got.length));
  assert.ok(
    slow.bufferedAmount <= w.fanout.highWater,
    `its queue stays under the high water: ${slow.bufferedAmount}`,
  );

  // Still stalled: polling sends it nothing more, however long it waits.
  const frames = slow.frames.length;
  w.clock.advance(5_000);
  assert.equal(slow.frames.length, frames);

  // It drains: the rest comes from the log (the ring no longer reaches back), in order, once.
  slow.drain(true);
  w.clock.advance(50);
  await drained(w);
  assert.deepEqual(slow.seqs(), range(1, 200));
  assert.deepEqual(slow.of("caught_up").at(-1), { t: "caught_up", sessionId: "s1", seq: 200 });
  assert.ok(w.logReads() > 0);

  // And it is live again.
  w.commit(storedEvents(201, 201));
  assert.deepEqual(slow.seqs().at(-1), 201);
  assert.deepEqual(fast.seqs().at(-1), 201);
});

Deno.test("a live viewer that missed events is caught up from the log before the new ones", async () => {
  const w = world();
  w.commit(storedEvents(1, 5));
  const v = new FakeViewer();
  w.join(v, 5);
  w.store(storedEvents(6, 7)); // committed, never broadcast
  w.commit(storedEvents(8, 10));
  assert.deepEqual(v.seqs(), [], "8..10 alone would leave a hole");
  w.clock.advance(1);
  await drained(w);
  assert.deepEqual(v.seqs(), range(6, 10));
  assert.deepEqual(v.of("caught_up").at(-1), { t: "caught_up", sessionId: "s1", seq: 10 });
});

Deno.test("commits that land while a viewer is behind reach it coalesced in one catch-up frame", () => {
  const w = world();
  const v = new FakeViewer();
  w.join(v);
  v.bufferedAmount = VIEWER_HIGH_WATER; // its socket is full
  for (let seq = 1; seq <= 50; seq++) w.commit(storedEvents(seq, seq));
  assert.deepEqual(v.seqs(), [], "nothing is queued on a full socket");
  const before = v.frames.length;
  v.drain();
  w.clock.advance(1);
  const after = v.messages().slice(before);
  assert.deepEqual(after.map((m) => m.t), ["events", "caught_up"], "50 commits, one frame");
  assert.deepEqual(v.seqs(), range(1, 50));
});

Deno.test("a big commit goes out in frames of at most 128 KB; a bigger event goes alone", () => {
  const w = world();
  const v = new FakeViewer();
  w.join(v);
  w.commit(storedEvents(1, 40, 10 * 1024)); // 400 KB
  const frames = v.frames.filter((f) => f.startsWith('{"t":"events"'));
  assert.equal(frames.length, 4);
  for (const f of frames) assert.ok(f.length <= LIVE_FRAME_BYTES + 200, `${f.length} bytes`);
  w.commit([...storedEvents(41, 41, 300 * 1024), ...storedEvents(42, 43)]);
  const last = v.messages().slice(-2);
  assert.deepEqual(last.map((m) => m.events!.map((e) => e.seq)), [[41], [42, 43]]);
  assert.deepEqual(v.seqs(), range(1, 43));
});

Deno.test("catch-up frames hold at most 64 KB of events", () => {
  const w = world();
  w.commit(storedEvents(1, 100, 4 * 1024)); // 400 KB
  const v = new FakeViewer();
  w.join(v);
  const frames = v.frames.filter((f) => f.startsWith('{"t":"events"'));
  assert.ok(frames.length >= 6);
  for (const f of frames) assert.ok(f.length <= CATCH_UP_BYTES + 4 * 1024 + 200, `${f.length}`);
  assert.deepEqual(v.seqs(), range(1, 100));
});

Deno.test("each viewer's high water shrinks as viewers connect, within one total budget", () => {
  assert.equal(viewerHighWater(1), VIEWER_HIGH_WATER);
  assert.equal(viewerHighWater(VIEWER_QUEUE_BUDGET / VIEWER_HIGH_WATER), VIEWER_HIGH_WATER);
  assert.equal(viewerHighWater(64), VIEWER_QUEUE_BUDGET / 64);
  assert.equal(viewerHighWater(100_000), 16 * 1024, "never below 16 KB");

  const w = world();
  const viewers = Array.from({ length: 64 }, () => new FakeViewer());
  for (const v of viewers) w.fanout.addViewer(v);
  assert.equal(w.fanout.highWater, VIEWER_QUEUE_BUDGET / 64);
  for (const v of viewers.slice(1)) w.fanout.removeViewer(v);
  assert.equal(w.fanout.highWater, VIEWER_HIGH_WATER);
});

Deno.test("past the budget of one turn, the other viewers get the commit from the log next turn", () => {
  const w = world();
  const viewers = Array.from({ length: 40 }, () => new FakeViewer());
  for (const v of viewers) w.join(v);
  w.commit(storedEvents(1, 1, 1100 * 1024));
  const now = viewers.filter((v) => v.seqs().length === 1).length;
  assert.ok(now > 0 && now < 40, `${now} of 40 got it this turn`);
  w.clock.advance(1);
  for (const v of viewers) assert.deepEqual(v.seqs(), [1]);
});

Deno.test("unsubscribing or leaving stops delivery and forgets a lagging subscription", () => {
  const w = world();
  const a = new FakeViewer();
  const sub = w.join(a);
  w.fanout.unsubscribe(sub);
  assert.equal(a.subs.size, 0);
  assert.equal(w.fanout.watched("s1"), false);
  w.commit(storedEvents(1, 3));
  assert.deepEqual(a.seqs(), []);

  const b = new FakeViewer();
  w.join(b, 3);
  b.bufferedAmount = VIEWER_HIGH_WATER;
  w.commit(storedEvents(4, 4));
  w.fanout.removeViewer(b);
  b.drain();
  w.clock.advance(100);
  assert.deepEqual(b.seqs(), [], "a viewer that left is not fed");
  assert.equal(w.clock.pendingTimers, 0, "and nothing polls for it");
});

Deno.test("close stops polling lagging viewers", () => {
  const w = world();
  const v = new FakeViewer({ reading: false });
  w.join(v);
  v.bufferedAmount = VIEWER_HIGH_WATER;
  w.commit(storedEvents(1, 1));
  assert.equal(w.clock.pendingTimers, 1);
  w.fanout.close();
  assert.equal(w.clock.pendingTimers, 0);
});

Deno.test("a viewer with more than 8 MB unread is closed with 4429 instead of sent more", () => {
  const closed: { code: number; reason: string }[] = [];
  const sent: string[] = [];
  const socket = {
    readyState: WebSocket.OPEN,
    bufferedAmount: 0,
    send: (f: string) => sent.push(f),
    close: (code: number, reason: string) => closed.push({ code, reason }),
  };
  const w = world();
  const dropped: Viewer[] = [];
  const principal = {
    userId: "u1",
    email: "a@b.c",
    name: "a",
    via: "key" as const,
    keyId: "k",
    authSessionId: null,
    scope: "full" as const,
    runnerId: null,
  };
  const v = new Viewer(socket as unknown as ChannelSocket, principal, (d) => dropped.push(d));
  const fanout = w.fanout as unknown as Fanout<Viewer>;
  fanout.addViewer(v);
  v.send({ t: "pong" });
  assert.equal(sent.length, 1);

  socket.bufferedAmount = VIEWER_MAX_UNREAD + 1;
  v.send({ t: "pong" });
  assert.deepEqual(closed, [{
    code: CloseCode.tooSlow,
    reason: "Too slow: more than 8 MB unread",
  }]);
  assert.deepEqual(dropped, [v]);
  assert.equal(v.closed, true);
  v.sendRaw("x");
  assert.equal(sent.length, 1, "nothing more is queued once closed");
});

Deno.test("a slow read of the log racing live commits: every event once, in order, then live", async (t) => {
  for (
    const [name, snapshot] of [
      ["the read answers what was stored when it started", "start"],
      ["the read answers what was stored when it came back", "end"],
    ] as const
  ) {
    await t.step(name, async () => {
      const slow: { answer: (() => void) | null } = { answer: null };
      const w = world({
        ringSize: 20,
        readLog: (read) => {
          // The first read is slow; later ones (the rest of the catch-up) answer at once.
          if (slow.answer) return Promise.resolve(read());
          const early = read();
          return new Promise((resolve) => {
            slow.answer = () => resolve(snapshot === "start" ? early : read());
          });
        },
      });
      w.commit(storedEvents(1, 100)); // the ring keeps 81..100
      const v = new FakeViewer();
      w.join(v, 0);
      assert.equal(w.logReads(), 1, "the first step reads the log");
      // Commits land while the read is out: they are not sent ahead of the catch-up.
      for (let seq = 101; seq < 130; seq += 3) { // 101..130, in ten commits
        w.commit(storedEvents(seq, seq + 2));
        w.clock.endTurn();
      }
      assert.deepEqual(v.seqs(), [], "nothing before the read is back");
      // The lagging poll does not start a second read of the same range.
      w.clock.advance(100);
      assert.equal(w.logReads(), 1);
      slow.answer!();
      await drained(w);
      assert.deepEqual(v.seqs(), range(1, 130), "no gap, no duplicate");
      assert.deepEqual(v.of("caught_up"), [{ t: "caught_up", sessionId: "s1", seq: 130 }]);
      w.commit(storedEvents(131, 131));
      assert.deepEqual(v.seqs(), range(1, 131), "live again");
    });
  }
});

Deno.test("a read of the log that comes back after the viewer left or resubscribed sends nothing", async () => {
  const answers: (() => void)[] = [];
  const w = world({
    ringSize: 10,
    readLog: (read) => new Promise((resolve) => answers.push(() => resolve(read()))),
  });
  w.commit(storedEvents(1, 50));
  const gone = new FakeViewer();
  const sub = w.join(gone, 0);
  w.fanout.unsubscribe(sub);
  const again = new FakeViewer();
  w.join(again, 0);
  w.join(again, 45); // resubscribed from further on: the first read is stale
  for (const a of answers.splice(0)) a();
  await drained(w);
  assert.deepEqual(gone.seqs(), [], "unsubscribed: nothing");
  assert.deepEqual(again.seqs(), range(46, 50), "only the current subscription's events");
});

Deno.test("a failed read of the log ends the subscription with an error the client resubscribes on", async () => {
  const w = world({ ringSize: 10, readLog: () => Promise.reject(new Error("connection reset")) });
  w.commit(storedEvents(1, 50));
  const v = new FakeViewer();
  w.join(v, 0);
  await drained(w, 3);
  assert.deepEqual(v.of("error"), [{
    t: "error",
    code: "internal",
    message: "Reading the session's events failed: subscribe again",
    sessionId: "s1",
  }]);
  assert.equal(w.fanout.watched("s1"), false);
  assert.match(w.logged.join("\n"), /reading the log of s1 failed: Error: connection reset/);
});

Deno.test("viewers catching up from the log read it a few at a time, each read capped in bytes", async () => {
  let inFlight = 0;
  let most = 0;
  const w = world({
    ringSize: 10,
    readLog: (read) => {
      inFlight++;
      most = Math.max(most, inFlight);
      // Each read comes back a turn later, as a remote store's would.
      return new Promise((resolve) =>
        setTimeout(() => {
          inFlight--;
          resolve(read());
        }, 0)
      );
    },
  });
  w.commit(storedEvents(1, 200, 8 * 1024)); // 1.6 MB, the ring keeps the last 10
  const viewers = Array.from({ length: 3 * MAX_LOG_READS }, () => new FakeViewer());
  for (const v of viewers) w.join(v, 0);
  assert.equal(inFlight, MAX_LOG_READS, "the others wait for a read to come back");
  await drained(w, 400);
  assert.ok(most <= MAX_LOG_READS, `${most} reads at once`);
  for (const v of viewers) assert.deepEqual(v.seqs(), range(1, 200));
  // Each read took at most LOG_READ_BYTES of events: more reads than events/500.
  assert.ok(
    w.logReads() >= viewers.length * Math.ceil(200 * 8 * 1024 / LOG_READ_BYTES) - viewers.length,
  );
});
