/**
 * Fault tests: a relay killed mid-stream, links cut under load, viewers that
 * never read (one, and 200), a daemon killed mid-turn and a slowloris crowd. Each one
 * checks that no event was lost, duplicated or reordered, as viewers saw it
 * and as the relay stored it.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { RelayToViewer, SessionEvent, SessionEventBody } from "../shared/protocol.ts";
import { type ServedRelay, serveRelay } from "../relay/serve.ts";
import { HELLO_TIMEOUT_MS } from "../relay/runner_socket.ts";
import {
  assertContiguous,
  json,
  signIn,
  signUp,
  storedEvents,
  type User,
  Viewer,
} from "./harness/client.ts";
import {
  FakeRunner,
  runnerToken,
  spawnSession,
  textDelta,
  toolOutput,
} from "./harness/fake_runner.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import { RelayProcess, type RunnerProcess, startRunner, tempDir } from "./harness/procs.ts";
import { clientFrame, openRawWebSocket, type RawWebSocket } from "./harness/raw_http.ts";
import { eventually, within } from "./harness/wait.ts";
import { webClient } from "../web/mod.ts";

// ---------------------------------------------------------------------------
// Helpers

/** An in-process relay whose log lines the test can read. */
interface LoggedRelay extends ServedRelay {
  logs: string[];
  dispose(): Promise<void>;
}

async function startLoggedRelay(): Promise<LoggedRelay> {
  const dataDir = await tempDir("baton-faults-relay-");
  const logs: string[] = [];
  const served = await serveRelay({
    web: await webClient(),
    hostname: "127.0.0.1",
    port: 0,
    dataDir,
    log: (line) => logs.push(line),
  });
  return {
    ...served,
    logs,
    async dispose() {
      await served.shutdown();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    },
  };
}

/** The whole stored log of a session, read through the API page by page. */
function storedLog(user: User, sessionId: string): Promise<SessionEvent[]> {
  return storedEvents(user, sessionId);
}

/** Seqs that occur more than once. */
function duplicates(events: SessionEvent[]): number[] {
  const seen = new Set<number>();
  const dup = new Set<number>();
  for (const e of events) (seen.has(e.seq) ? dup : seen).add(e.seq);
  return [...dup];
}

/** Asserts what one viewer saw of a session, over all its connections, is the stored log. */
function assertSawExactly(seen: SessionEvent[], stored: SessionEvent[], who: string): void {
  assert.deepEqual(duplicates(seen), [], `${who}: duplicated seqs`);
  assertContiguous(seen);
  assert.equal(seen.length, stored.length, `${who}: saw ${seen.length} of ${stored.length}`);
  assert.deepEqual(seen, stored, `${who}: what the viewer saw differs from the stored log`);
}

/** The assistant text of a session's streamed deltas, in order. */
function streamedText(events: SessionEvent[]): string {
  return events
    .filter((e) => e.e.type === "message_update")
    .map((e) => {
      const ame = e.e.assistantMessageEvent as { type?: string; delta?: string };
      return ame.type === "text_delta" ? ame.delta ?? "" : "";
    })
    .join("");
}

function count(events: SessionEvent[], type: string): number {
  return events.filter((e) => e.e.type === type).length;
}

/** A body whose content is a pure function of its seq, so a re-send is recognisable. */
function fakeBody(seq: number): SessionEventBody {
  return textDelta(`<${seq}>`);
}

/** The largest send buffer plus the default receive buffer of a TCP socket here, in bytes. */
function kernelSocketBuffers(): number {
  const field = (path: string, i: number) =>
    Number(Deno.readTextFileSync(path).trim().split(/\s+/)[i] ?? 0);
  return field("/proc/sys/net/ipv4/tcp_wmem", 2) + field("/proc/sys/net/ipv4/tcp_rmem", 1);
}

/** The resident set size of a process, in bytes. */
function rssOf(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^VmRSS:\s+(\d+)\s+kB/m);
  if (!m) throw new Error(`No VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

/** The soft limit on open files of a process. */
function openFileLimit(pid: number | "self" = "self"): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/limits`).match(/^Max open files\s+(\d+)/m);
  return m ? Number(m[1]) : 1024;
}

async function spawnReal(user: User, runnerId: string, home: string, prompt: string) {
  const res = await user.api(
    "/api/runners/spawn",
    json("POST", { runnerId, cwd: home, model: MODEL, prompt }),
  );
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return body.sessionId as string;
}

/** Folders made by the tests of this file, removed by {@linkcode cleanup}. */
const scratchDirs: string[] = [];

async function scratch(dir: Promise<string>): Promise<string> {
  scratchDirs.push(await dir);
  return scratchDirs[scratchDirs.length - 1]!;
}

/** Removes `extra` and every scratch folder (call once the processes using them are gone). */
async function cleanup(...extra: string[]): Promise<void> {
  for (const dir of [...extra, ...scratchDirs.splice(0)]) {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** The id of the real runner started with `home`. */
async function runnerIdOf(home: string): Promise<string> {
  return JSON.parse(await Deno.readTextFile(join(home, ".baton/runner.json"))).runnerId;
}

// ---------------------------------------------------------------------------
// 1. Relay SIGKILL

Deno.test("a relay killed with SIGKILL mid-stream and restarted on its data loses, duplicates and reorders nothing", async () => {
  const llm = MockLlm.start();
  const relay = await RelayProcess.start();
  let runner: RunnerProcess | undefined;
  const closers: (() => Promise<unknown>)[] = [];
  let ok = false;
  try {
    const user = await signUp(relay.url);
    const token = await runnerToken(user);
    const home = await scratch(tempDir("baton-faults-home-"));
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    const realId = await runnerIdOf(home);

    // A real session streaming many small pieces, and a fake runner pushing
    // events as fast as the relay acknowledges them.
    const pieces = Array.from({ length: 1500 }, (_, i) => `p${i} `);
    llm.enqueue({ text: pieces, chunkDelayMs: 1 });
    const real = await spawnReal(user, realId, home, "stream a lot");
    const fake = await FakeRunner.connect(relay.url, { apiKey: token });
    closers.push(() => fake.close());
    const fakeSession = await spawnSession(user, fake.runnerId);
    // Endless until the kill interrupts it.
    const pushing = fake.stream(fakeSession, 10_000_000, fakeBody, {
      frameEvents: 50,
      windowEvents: 400,
    }).catch((err) => err as Error);

    const live = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    closers.push(() => live.close());
    live.subscribe(real);
    live.subscribe(fakeSession);
    await live.until(() => count(live.eventsOf(real), "message_update") >= 50, "live deltas");
    await live.until(() => live.eventsOf(fakeSession).length >= 1000, "live fake events");

    // The late viewer starts from seq 0 while everything streams.
    const late = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    closers.push(() => late.close());
    late.subscribe(real);
    late.subscribe(fakeSession);
    await late.until(
      () => late.eventsOf(real).length >= 20 && late.eventsOf(fakeSession).length >= 500,
      "late viewer under way",
    );
    await fake.waitForAck(fakeSession, 1000);
    const storedBefore = await storedLog(user, real);
    assert.equal(live.eventsOf(real).some((e) => e.e.type === "agent_end"), false, "mid-stream");

    await relay.kill("SIGKILL");
    const pushed = await pushing;
    assert.ok(pushed instanceof Error, "the fake runner's stream was cut by the kill");
    await Promise.all([live.closed, late.closed, fake.closed]);
    const ackedBeforeKill = fake.acked(fakeSession);
    assert.ok(ackedBeforeKill >= 1000, `acked ${ackedBeforeKill}`);

    await relay.restart();
    // Before the fake runner is back, the session already knows where its log ends.
    const afterRestart = (await (await user.api(`/api/sessions/${fakeSession}`)).json()).session;
    const storedAtRestart = await storedLog(user, fakeSession);
    assert.equal(afterRestart.lastSeq, storedAtRestart.at(-1)!.seq, "last seq after the kill");
    await runner.connected(2);
    const fake2 = await FakeRunner.connect(relay.url, {
      apiKey: token,
      runnerId: fake.runnerId,
      sessions: [fakeSession],
    });
    closers.push(() => fake2.close());
    const resumeAt = fake2.welcome.acked[fakeSession];
    assert.ok(
      resumeAt !== undefined && resumeAt >= ackedBeforeKill,
      `the relay remembers at least every acked seq (${resumeAt} ≥ ${ackedBeforeKill})`,
    );
    assert.deepEqual(fake2.welcome.ended, []);
    const fakeTotal = resumeAt! + 2000;

    // Both viewers come back and resume from the last seq each one saw.
    const resumed: [Viewer, Viewer][] = [];
    for (const before of [live, late]) {
      const again = await Viewer.connect(relay.url, { apiKey: user.apiKey });
      closers.push(() => again.close());
      for (const id of [real, fakeSession]) {
        const seen = before.eventsOf(id);
        again.subscribe(id, seen.length ? seen[seen.length - 1]!.seq : 0);
      }
      resumed.push([before, again]);
    }
    await fake2.stream(fakeSession, fakeTotal - resumeAt!, fakeBody, {
      frameEvents: 50,
      windowEvents: 400,
    });
    for (const [, again] of resumed) {
      await again.waitForEvent(real, "agent_end", 30_000);
      await again.until(
        () => again.eventsOf(fakeSession).some((e) => e.seq === fakeTotal),
        "the fake session's last event",
      );
    }

    const storedReal = await storedLog(user, real);
    const storedFake = await storedLog(user, fakeSession);
    assert.deepEqual(storedReal.slice(0, storedBefore.length), storedBefore, "stored before kill");
    assertContiguous(storedFake);
    assert.equal(storedFake.length, fakeTotal);
    for (const ev of storedFake) {
      assert.deepEqual(ev.e, fakeBody(ev.seq), `fake event ${ev.seq} is the one sent`);
    }
    for (const [i, [before, again]] of resumed.entries()) {
      const who = i === 0 ? "live viewer" : "late viewer";
      assertSawExactly(
        [...before.eventsOf(real), ...again.eventsOf(real)],
        storedReal,
        `${who}, real session`,
      );
      assertSawExactly(
        [...before.eventsOf(fakeSession), ...again.eventsOf(fakeSession)],
        storedFake,
        `${who}, fake session`,
      );
    }
    assert.equal(streamedText(storedReal), pieces.join(""), "every piece exactly once, in order");
    ok = true;
  } finally {
    for (const close of closers) await close().catch(() => {});
    if (!ok && runner) console.error(runner.proc.output());
    if (!ok) console.error(relay.proc.output());
    await runner?.stop();
    await relay.stop();
    await llm.close();
    await cleanup(relay.home);
  }
});

// ---------------------------------------------------------------------------
// 2. Network cuts

Deno.test("cutting a runner's link several times mid-stream loses and duplicates nothing", async () => {
  const llm = MockLlm.start();
  const relay = await startLoggedRelay();
  let runner: RunnerProcess | undefined;
  let viewer: Viewer | undefined;
  let ok = false;
  try {
    const user = await signUp(relay.url);
    const home = await scratch(tempDir("baton-faults-home-"));
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    const runnerId = await runnerIdOf(home);
    const pieces = Array.from({ length: 2500 }, (_, i) => `c${i} `);
    llm.enqueue({ text: pieces, chunkDelayMs: 2 });
    viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    const id = await spawnReal(user, runnerId, home, "stream through cuts");
    viewer.subscribe(id);
    const v = viewer;

    const cuts = 3;
    for (let i = 1; i <= cuts; i++) {
      const seen = count(v.eventsOf(id), "message_update");
      await v.until(
        () => count(v.eventsOf(id), "message_update") >= seen + 30,
        `deltas before cut ${i}`,
      );
      assert.equal(count(v.eventsOf(id), "agent_end"), 0, `cut ${i} happens mid-stream`);
      const link = relay.relay.hub.link(runnerId);
      assert.ok(link, "the runner is connected");
      link.close(1011, "cut");
      await runner.connected(i + 1);
    }
    await v.waitForEvent(id, "agent_end", 30_000);

    const stored = await storedLog(user, id);
    assertSawExactly(v.eventsOf(id), stored, "viewer");
    assert.equal(streamedText(stored), pieces.join(""), "the streamed text arrived exactly once");
    assert.equal(runner.proc.count(/relay link lost/), cuts);
    assert.deepEqual(relay.logs.filter((l) => /gap/.test(l)), [], "the runner sent no gap");
    ok = true;
  } finally {
    await viewer?.close();
    if (!ok && runner) console.error(runner.proc.output());
    await runner?.stop();
    await relay.dispose();
    await llm.close();
    await cleanup();
  }
});

Deno.test("the relay stores re-sent events once and keeps events after a gap", async (t) => {
  const relay = await startLoggedRelay();
  const closers: (() => Promise<unknown>)[] = [];
  try {
    const user = await signUp(relay.url);
    const token = await runnerToken(user);
    const fake = await FakeRunner.connect(relay.url, { apiKey: token });
    closers.push(() => fake.close());
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    closers.push(() => viewer.close());
    const events = (from: number, to: number) =>
      Array.from({ length: to - from + 1 }, (_, i) => ({
        seq: from + i,
        ts: Date.now(),
        e: fakeBody(from + i),
      }));
    const seqs = (list: SessionEvent[]) => list.map((e) => e.seq);
    const range = (from: number, to: number) =>
      Array.from({ length: to - from + 1 }, (_, i) => from + i);

    await t.step("re-sent seqs are acknowledged and not stored or delivered twice", async () => {
      const id = await spawnSession(user, fake.runnerId);
      viewer.subscribe(id);
      await viewer.waitFor((m) => m.t === "caught_up" && m.sessionId === id);
      fake.sendEvents(id, events(1, 10));
      await fake.waitForAck(id, 10);
      fake.sendEvents(id, events(5, 12));
      await fake.waitForAck(id, 12);
      fake.sendEvents(id, events(1, 12));
      fake.sendEvents(id, events(12, 12));
      await fake.barrier();
      const acks = fake.ackLog.filter((a) => a.sessionId === id).map((a) => a.seq);
      assert.deepEqual(acks, [10, 12, 12, 12], "every frame is acknowledged");
      await viewer.until(() => viewer.eventsOf(id).length >= 12, "12 events");
      const stored = await storedLog(user, id);
      assert.deepEqual(seqs(stored), range(1, 12));
      for (const ev of stored) assert.deepEqual(ev.e, fakeBody(ev.seq));
      // The viewer got 1..12 once; a later event proves nothing else was queued.
      fake.sendEvents(id, events(13, 13));
      await viewer.until(() => viewer.eventsOf(id).some((e) => e.seq === 13), "seq 13");
      assertSawExactly(viewer.eventsOf(id), await storedLog(user, id), "viewer");
    });

    await t.step("events after a gap are stored and delivered in order", async () => {
      const id = await spawnSession(user, fake.runnerId);
      viewer.subscribe(id);
      await viewer.waitFor((m) => m.t === "caught_up" && m.sessionId === id);
      fake.sendEvents(id, events(1, 12));
      fake.sendEvents(id, events(15, 16));
      await fake.waitForAck(id, 16);
      // A late fill of the hole cannot go behind what viewers already have.
      fake.sendEvents(id, events(13, 14));
      fake.sendEvents(id, events(17, 17));
      await fake.waitForAck(id, 17);
      const stored = await storedLog(user, id);
      assert.deepEqual(seqs(stored), [...range(1, 12), 15, 16, 17]);
      await viewer.until(() => viewer.eventsOf(id).some((e) => e.seq === 17), "seq 17");
      assert.deepEqual(viewer.eventsOf(id), stored, "the viewer saw the stored log");
      assert.ok(relay.logs.some((l) => l.includes(`session ${id}: gap in events from runner`)));
      const info = (await (await user.api(`/api/sessions/${id}`)).json()).session;
      assert.equal(info.lastSeq, 17);
    });

    await t.step("a link cut mid-stream is resumed from the welcome without loss", async () => {
      const id = await spawnSession(user, fake.runnerId);
      viewer.subscribe(id);
      await viewer.waitFor((m) => m.t === "caught_up" && m.sessionId === id);
      const total = 6000;
      const pushing = fake.stream(id, total, fakeBody, { frameEvents: 100, windowEvents: 1000 })
        .catch((err) => err as Error);
      await fake.waitForAck(id, 1500);
      relay.relay.hub.link(fake.runnerId)!.close(1011, "cut");
      assert.ok(await pushing instanceof Error, "the cut interrupted the stream");
      const ackedBeforeCut = fake.acked(id);
      const again = await FakeRunner.connect(relay.url, {
        apiKey: token,
        runnerId: fake.runnerId,
        sessions: [id],
      });
      closers.push(() => again.close());
      const resumeAt = again.welcome.acked[id]!;
      assert.ok(resumeAt >= ackedBeforeCut, `${resumeAt} ≥ ${ackedBeforeCut}`);
      // Re-send from the last ack this socket heard (possibly older than the
      // welcome), as a runner that lost acks in flight would.
      await again.stream(id, total - ackedBeforeCut, fakeBody, {
        from: ackedBeforeCut + 1,
        frameEvents: 100,
        windowEvents: 1000,
      });
      await viewer.until(() => viewer.eventsOf(id).some((e) => e.seq === total), "last event");
      const stored = await storedLog(user, id);
      assert.deepEqual(seqs(stored), range(1, total));
      for (const ev of stored) assert.deepEqual(ev.e, fakeBody(ev.seq));
      assertSawExactly(viewer.eventsOf(id), stored, "viewer");
    });
  } finally {
    for (const close of closers) await close().catch(() => {});
    await relay.dispose();
  }
});

// ---------------------------------------------------------------------------
// 3. A viewer that never reads

Deno.test("a viewer that never reads neither slows a normal viewer nor grows the relay's memory", async () => {
  const relay = await RelayProcess.start({
    // A heap limit well below the data pushed through: a relay that queued
    // it for the stalled viewer would run out of heap and die. Without a
    // limit V8 lets garbage from the ingest pile up to ~250 MB before
    // collecting, stalled viewer or not, which says nothing about queues.
    env: { DENO_V8_FLAGS: "--max-old-space-size=80" },
  });
  const closers: (() => unknown)[] = [];
  let ok = false;
  try {
    const user = await signUp(relay.url);
    const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
    closers.push(() => fake.close());
    const id = await spawnSession(user, fake.runnerId);

    const stalled = await openRawWebSocket(relay.port, "/_viewer", { "x-api-key": user.apiKey });
    closers.push(() => stalled.close());
    await stalled.sendText(JSON.stringify({ t: "subscribe", sessionId: id, since: 0 }));
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    closers.push(() => viewer.close());
    viewer.subscribe(id);
    await viewer.waitFor((m) => m.t === "caught_up" && m.sessionId === id);

    const pid = relay.proc.pid;
    const idle = rssOf(pid);
    let peak = idle;
    const sampler = setInterval(() => peak = Math.max(peak, rssOf(pid)), 50);
    closers.push(() => clearInterval(sampler));
    const output = "o".repeat(4096);
    const total = 25_600; // 4 KB each: 100 MB
    const started = Date.now();
    await fake.stream(id, total, (seq) => toolOutput(`call-${seq % 7}`, output), {
      frameEvents: 100,
      windowEvents: 1000,
    });
    const storedMs = Date.now() - started;
    await viewer.until(
      () => viewer.eventsOf(id).length >= total,
      "every event at the normal viewer",
      90_000,
    );
    const viewerMs = Date.now() - started;
    clearInterval(sampler);
    peak = Math.max(peak, rssOf(pid));
    console.log(
      `100 MB: stored in ${storedMs} ms, normal viewer done in ${viewerMs} ms; relay RSS idle ${
        (idle / 2 ** 20).toFixed(0)
      } MB, peak ${(peak / 2 ** 20).toFixed(0)} MB`,
    );
    assert.ok(
      peak - idle < 150 * 2 ** 20,
      `relay RSS grew by ${((peak - idle) / 2 ** 20).toFixed(0)} MB`,
    );

    const seen = viewer.eventsOf(id);
    assert.deepEqual(duplicates(seen), []);
    assertContiguous(seen);
    assert.equal(seen.length, total);
    const tail = await user.api(`/api/sessions/${id}/events?since=${total - 5}&limit=10`);
    assert.deepEqual((await tail.json()).events, seen.slice(-5));

    // Dropping the stalled socket is harmless and the relay keeps serving.
    stalled.close();
    assert.equal((await fetch(`${relay.url}/health`)).status, 200);
    const after = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    closers.push(() => after.close());
    after.subscribe(id, total - 3);
    await after.waitFor((m) => m.t === "caught_up" && m.sessionId === id);
    assert.deepEqual(after.eventsOf(id), seen.slice(-3));
    await fake.stream(id, 3, (seq) => toolOutput(`call-${seq}`, "tail"));
    await after.until(() => after.eventsOf(id).length === 6, "live events after the stall");
    assertContiguous(after.eventsOf(id), total - 2);
    assert.equal(relay.proc.lines.some((l) => /internal error|Uncaught/.test(l)), false);
    ok = true;
  } finally {
    for (const close of closers) await close();
    if (!ok) console.error(relay.proc.output());
    await relay.stop();
    await cleanup(relay.home);
  }
});

/** Server frames (never masked) read off a raw socket, in order, until the connection ends. */
async function* serverFrames(
  conn: Deno.Conn,
): AsyncGenerator<{ opcode: number; payload: Uint8Array }> {
  let buf = new Uint8Array(0);
  const chunk = new Uint8Array(256 * 1024);
  while (true) {
    while (buf.length >= 2) {
      const len7 = buf[1]! & 0x7f;
      const head = len7 < 126 ? 2 : len7 === 126 ? 4 : 10;
      if (buf.length < head) break;
      const view = new DataView(buf.buffer, buf.byteOffset);
      const len = len7 < 126
        ? len7
        : len7 === 126
        ? view.getUint16(2)
        : Number(view.getBigUint64(2));
      if (buf.length < head + len) break;
      yield { opcode: buf[0]! & 0x0f, payload: buf.subarray(head, head + len) };
      buf = buf.subarray(head + len);
    }
    const n = await conn.read(chunk);
    if (n === null) {
      assert.equal(buf.length, 0, "the connection ended inside a frame");
      return;
    }
    const next = new Uint8Array(buf.length + n);
    next.set(buf);
    next.set(chunk.subarray(0, n), buf.length);
    buf = next;
  }
}

/**
 * Reads server frames off a raw socket until a close frame or the end of the
 * connection (code 1006); returns the text frames' count and the close code.
 */
async function readUntilClose(conn: Deno.Conn): Promise<{ texts: number; code: number }> {
  let texts = 0;
  for await (const { opcode, payload } of serverFrames(conn)) {
    if (opcode === 0x8) {
      const code = payload.length >= 2
        ? new DataView(payload.buffer, payload.byteOffset).getUint16(0)
        : 1005;
      return { texts, code };
    }
    if (opcode === 0x1) texts++;
  }
  return { texts, code: 1006 };
}

Deno.test("a viewer that keeps asking and never reads the answers is closed at 8 MB unread", async () => {
  const relay = await startLoggedRelay();
  const closers: (() => unknown)[] = [];
  try {
    const user = await signUp(relay.url);
    // 50 roots of 4 KB: every runner list the relay sends is ~200 KB.
    const roots = Array.from({ length: 50 }, (_, i) => `/work/${i}/${"r".repeat(4000)}`);
    const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user), roots });
    closers.push(() => fake.close());
    const normal = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    closers.push(() => normal.close());

    const greedy = await openRawWebSocket(relay.port, "/_viewer", { "x-api-key": user.apiKey });
    closers.push(() => greedy.close());
    // 150 watches ask for ~30 MB of lists; the client reads none of it yet.
    const one = clientFrame(new TextEncoder().encode(JSON.stringify({ t: "watch" })));
    const burst = new Uint8Array(one.length * 150);
    for (let i = 0; i < 150; i++) burst.set(one, i * one.length);
    await greedy.conn.write(burst);
    // A normal viewer is served meanwhile.
    normal.send({ t: "watch" });
    const listed = await normal.waitFor<Extract<RelayToViewer, { t: "runners" }>>(
      (m) => m.t === "runners",
    );
    assert.equal(listed.runners[0]!.roots.length, 50);

    // Reading now: what was queued, then the end well before 150 answers. It
    // is a close frame with 4429, or the bare end of the connection when the
    // client sent more after the relay gave up (Deno then drops the close frame).
    const { texts, code } = await readUntilClose(greedy.conn);
    assert.ok(code === 4429 || code === 1006, `closed with ${code}`);
    assert.ok(texts < 2 * 150, `got ${texts} frames before the close`);
    // hello + at most 8 MB of answers (2 frames per watch, ~200 KB each) + the one over the line,
    // plus what the kernel's socket buffers took before the relay's queue began (the relay's
    // node:net socket hands up to the largest send buffer to the kernel, which holds it, not the
    // relay's memory).
    const held = 8 * 1024 * 1024 + kernelSocketBuffers();
    assert.ok(texts <= 1 + 2 * Math.ceil(held / (200 * 1024)) + 2, `${texts} frames`);

    // The relay carries on: the normal viewer still gets answers, a new one connects.
    normal.send({ t: "ping" });
    await normal.waitFor((m) => m.t === "pong");
    const again = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    closers.push(() => again.close());
    assert.equal((await fetch(`${relay.url}/health`)).status, 200);
    assert.deepEqual(relay.logs.filter((l) => /internal|failed/i.test(l)), []);
  } finally {
    for (const close of closers) await close();
    await relay.dispose();
  }
});

Deno.test("200 viewers that never read cost a bounded amount, and a normal one gets frames of at most 128 KB", async () => {
  const relay = await RelayProcess.start();
  const closers: (() => unknown)[] = [];
  let ok = false;
  try {
    const user = await signUp(relay.url);
    const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
    closers.push(() => fake.close());
    const id = await spawnSession(user, fake.runnerId);
    const subscribe = JSON.stringify({ t: "subscribe", sessionId: id, since: 0 });

    const stalled: RawWebSocket[] = [];
    for (let i = 0; i < 200; i++) {
      const s = await openRawWebSocket(relay.port, "/_viewer", { "x-api-key": user.apiKey });
      stalled.push(s);
      closers.push(() => s.close());
      await s.sendText(subscribe);
    }
    // The normal viewer reads every frame as it comes, by hand, to see their sizes.
    const normal = await openRawWebSocket(relay.port, "/_viewer", { "x-api-key": user.apiKey });
    closers.push(() => normal.close());
    await normal.sendText(subscribe);
    const seen: SessionEvent[] = [];
    let largest = 0;
    const caughtUp = Promise.withResolvers<void>();
    const total = 192; // 32 KB each, 64 to a runner frame: 6 MB, 2 MB at a time
    const reading = (async () => {
      for await (const { opcode, payload } of serverFrames(normal.conn)) {
        if (opcode !== 0x1) continue;
        const msg = JSON.parse(new TextDecoder().decode(payload)) as RelayToViewer;
        if (msg.t === "caught_up") caughtUp.resolve();
        if (msg.t !== "events") continue;
        largest = Math.max(largest, payload.length);
        seen.push(...msg.events);
        if (seen.length >= total) return;
      }
    })();
    await within(caughtUp.promise, 30_000, "the normal viewer caught up");

    const pid = relay.proc.pid;
    await new Promise((r) => setTimeout(r, 500));
    const idle = rssOf(pid);
    let peak = idle;
    const sampler = setInterval(() => peak = Math.max(peak, rssOf(pid)), 50);
    closers.push(() => clearInterval(sampler));
    const output = "o".repeat(32 * 1024);
    await fake.stream(id, total, (seq) => toolOutput(`call-${seq}`, output), {
      frameEvents: 64,
      windowEvents: 64,
    });
    await within(reading, 60_000, "every event at the normal viewer");
    await new Promise((r) => setTimeout(r, 500));
    clearInterval(sampler);
    peak = Math.max(peak, rssOf(pid));
    console.log(
      `200 stalled viewers, 6 MB: relay RSS idle ${(idle / 2 ** 20).toFixed(0)} MB, peak ${
        (peak / 2 ** 20).toFixed(0)
      } MB; largest frame ${(largest / 1024).toFixed(0)} KB`,
    );

    assertContiguous(seen);
    assert.equal(seen.length, total);
    // A 2 MB batch from the runner reaches viewers in frames of at most 128 KB of events.
    assert.ok(largest <= 129 * 1024, `largest events frame ${largest} bytes`);
    // Each stalled viewer holds at most its share of a 32 MB budget on top of
    // what the kernel takes (~120 MB at the peak here); with a 1 MB high water
    // each and 2 MB frames the same run peaked at +450 MB (+1 GB without
    // DENO_USE_WRITEV).
    assert.ok(
      peak - idle < 250 * 2 ** 20,
      `relay RSS grew by ${((peak - idle) / 2 ** 20).toFixed(0)} MB`,
    );

    // The stalled viewers still get a gap-free log once they read.
    const late = stalled[0]!;
    const got: SessionEvent[] = [];
    for await (const { opcode, payload } of serverFrames(late.conn)) {
      if (opcode !== 0x1) continue;
      const msg = JSON.parse(new TextDecoder().decode(payload)) as RelayToViewer;
      if (msg.t === "events") got.push(...msg.events);
      if (got.length >= total) break;
    }
    assertContiguous(got);
    assert.equal(got.length, total);
    assert.equal((await fetch(`${relay.url}/health`)).status, 200);
    ok = true;
  } finally {
    for (const close of closers) await close();
    if (!ok) console.error(relay.proc.output());
    await relay.stop();
    await cleanup(relay.home);
  }
});

// ---------------------------------------------------------------------------
// 4. Daemon SIGKILL

Deno.test("a daemon killed while two sessions stream comes back with both, contiguous from seq 1", async () => {
  const llm = MockLlm.start();
  const relay = await startLoggedRelay();
  let runner: RunnerProcess | undefined;
  let viewer: Viewer | undefined;
  let ok = false;
  try {
    const user = await signUp(relay.url);
    const home = await scratch(tempDir("baton-faults-home-"));
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    const runnerId = await runnerIdOf(home);
    viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    const v = viewer;
    const long = (tag: string) => ({
      text: Array.from({ length: 3000 }, (_, i) => `${tag}${i} `),
      chunkDelayMs: 2,
    });
    llm.enqueue(long("a"), long("b"));
    const a = await spawnReal(user, runnerId, home, "first long answer");
    const b = await spawnReal(user, runnerId, home, "second long answer");
    v.subscribe(a);
    v.subscribe(b);
    for (const id of [a, b]) {
      await v.until(() => count(v.eventsOf(id), "message_update") >= 50, `${id} streaming`);
    }
    for (const id of [a, b]) assert.equal(count(v.eventsOf(id), "agent_end"), 0, "mid-stream");

    const daemonPid = Number((await runner.proc.waitFor(/\[daemon\] runner .* pid (\d+)/))[1]);
    Deno.kill(daemonPid, "SIGKILL");
    await runner.proc.waitFor(/daemon exited \(signal SIGKILL\); restarting/);
    await runner.connected(2);

    for (const id of [a, b]) {
      await v.until(() => count(v.eventsOf(id), "session_start") === 2, `${id} resumed`);
      const starts = v.eventsOf(id).filter((e) => e.e.type === "session_start");
      assert.equal(starts[0]!.e.resumed, false);
      assert.equal(starts[1]!.e.resumed, true);
    }
    llm.enqueue({ text: "after the crash A" }, { text: "after the crash B" });
    for (const id of [a, b]) {
      const res = await user.api(
        `/api/sessions/${id}/input`,
        json("POST", { kind: "prompt", text: "still there?" }),
      );
      assert.equal(res.status, 200, await res.text());
      await v.until(() => count(v.eventsOf(id), "agent_end") >= 1, `${id} answers again`);
    }
    for (const id of [a, b]) {
      const seen = v.eventsOf(id);
      assertSawExactly(seen, await storedLog(user, id), `session ${id}`);
      assert.match(streamedText(seen), /after the crash [AB]$/);
      const info = (await (await user.api(`/api/sessions/${id}`)).json()).session;
      assert.equal(info.status, "running");
      assert.equal(info.lastSeq, seen.length);
    }
    assert.deepEqual(relay.logs.filter((l) => /gap/.test(l)), []);
    ok = true;
  } finally {
    await viewer?.close();
    if (!ok && runner) console.error(runner.proc.output());
    await runner?.stop();
    await relay.dispose();
    await llm.close();
    await cleanup();
  }
});

// ---------------------------------------------------------------------------
// 5. Slowloris

Deno.test("a slowloris crowd neither starves normal clients nor keeps hello-less runner sockets", async () => {
  const relay = await RelayProcess.start();
  const llm = MockLlm.start();
  const conns: Deno.Conn[] = [];
  const sockets: WebSocket[] = [];
  let runner: RunnerProcess | undefined;
  let viewer: Viewer | undefined;
  let ok = false;
  try {
    // Both ends of every socket may live on this machine: stay well under the limits.
    const budget = Math.min(openFileLimit(), openFileLimit(relay.proc.pid));
    const scale = Math.min(1, (budget - 300) / 1400);
    const partial = Math.floor(500 * scale);
    const runnersN = Math.floor(100 * scale);
    const viewersN = Math.floor(20 * scale);
    assert.ok(partial >= 50, `open file limit ${budget} is too low for this test`);

    for (let i = 0; i < partial; i++) {
      const conn = await Deno.connect({ hostname: "127.0.0.1", port: relay.port });
      conns.push(conn);
      await conn.write(
        new TextEncoder().encode(`GET /health HTTP/1.1\r\nhost: x\r\nx-slow-${i}: `),
      );
    }
    const wsUrl = relay.url.replace(/^http/, "ws");
    const open = (path: string) => {
      const ws = new WebSocket(wsUrl + path);
      sockets.push(ws);
      const opened = new Promise<number>((resolve, reject) => {
        ws.addEventListener("open", () => resolve(performance.now()), { once: true });
        ws.addEventListener("error", () => reject(new Error(`${path} failed`)), { once: true });
      });
      const closed = new Promise<{ code: number; at: number }>((resolve) => {
        ws.addEventListener("close", (ev) => resolve({ code: ev.code, at: performance.now() }));
      });
      return { opened, closed };
    };
    const silentRunners = Array.from({ length: runnersN }, () => open("/_runner"));
    const silentViewers = Array.from({ length: viewersN }, () => open("/_viewer"));
    const openedAt = await Promise.all([...silentRunners, ...silentViewers].map((s) => s.opened));
    console.log(
      `slowloris: ${partial} unfinished requests, ${runnersN} silent runner and ${viewersN} ` +
        `silent viewer sockets (open file limit ${budget})`,
    );

    // A normal client is served while they are all open.
    const served = performance.now();
    const health = await fetch(`${relay.url}/health`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: "ok" });
    const user = await signUp(relay.url);
    assert.ok((await signIn(relay.url, user.email, user.password)).length > 0);
    const home = await scratch(tempDir("baton-faults-home-"));
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    llm.enqueue({ text: Array.from({ length: 50 }, (_, i) => `s${i} `), chunkDelayMs: 1 });
    const id = await spawnReal(user, await runnerIdOf(home), home, "stream under siege");
    viewer.subscribe(id);
    await viewer.waitForEvent(id, "agent_end", 20_000);
    assertSawExactly(viewer.eventsOf(id), await storedLog(user, id), "viewer");
    const servedMs = performance.now() - served;
    console.log(`slowloris: normal client served in ${servedMs.toFixed(0)} ms`);
    // Silent sockets only go at HELLO_TIMEOUT_MS: served sooner means served among them.
    assert.ok(servedMs < HELLO_TIMEOUT_MS, `served in ${servedMs.toFixed(0)} ms`);
    assert.equal(sockets.filter((ws) => ws.readyState !== WebSocket.OPEN).length, 0);

    // The silent sockets are closed by the relay once their time is up.
    const runnerCloses = await Promise.all(silentRunners.map((s) => s.closed));
    for (const [i, c] of runnerCloses.entries()) {
      assert.equal(c.code, 4400, `silent runner ${i} close code`);
      const after = c.at - openedAt[i]!;
      assert.ok(
        after >= HELLO_TIMEOUT_MS - 500 && after < HELLO_TIMEOUT_MS + 3000,
        `silent runner ${i} closed after ${after.toFixed(0)} ms`,
      );
    }
    const viewerCloses = await Promise.all(silentViewers.map((s) => s.closed));
    for (const [i, c] of viewerCloses.entries()) {
      assert.equal(c.code, 4001, `silent viewer ${i} close code`);
      assert.ok(c.at - openedAt[runnersN + i]! < HELLO_TIMEOUT_MS + 3000);
    }
    // The relay is still healthy, and the crowd is gone from its descriptors.
    for (const conn of conns.splice(0)) conn.close();
    assert.equal((await fetch(`${relay.url}/health`)).status, 200);
    await eventually("the relay's descriptors to drop", () => {
      const fds = [...Deno.readDirSync(`/proc/${relay.proc.pid}/fd`)].length;
      return fds < 200 ? fds : undefined;
    });
    ok = true;
  } finally {
    for (const conn of conns) {
      try {
        conn.close();
      } catch {
        // Already closed.
      }
    }
    for (const ws of sockets) if (ws.readyState < WebSocket.CLOSING) ws.close();
    await viewer?.close();
    if (!ok) console.error(relay.proc.output());
    await runner?.stop();
    await relay.stop();
    await llm.close();
    await cleanup(relay.home);
  }
});

// ---------------------------------------------------------------------------
// 7. Accounts busy while events stream

Deno.test("sign-ups and sign-ins while a session streams never break the relay's event commits", async () => {
  const relay = await RelayProcess.start({ args: ["--allow-signup"] });
  try {
    const user = await signUp(relay.url);
    const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
    const id = await spawnSession(user, fake.runnerId);
    const total = 6000;
    // better-auth's own statements (sign-up writes a user, an account and a
    // session, across awaits) run in between the relay's commits.
    const accounts = Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const email = `busy-${i}@example.com`;
        const res = await fetch(
          `${relay.url}/api/auth/sign-up/email`,
          json("POST", { email, password: "long enough password", name: `Busy ${i}` }),
        );
        assert.equal(res.status, 200, await res.text());
        await signIn(relay.url, email, "long enough password");
      }),
    );
    await fake.stream(id, total, (seq) => textDelta(`d${seq} `), {
      frameEvents: 20,
      windowEvents: 400,
    });
    await accounts;
    assert.equal(fake.closeEvent, null, "the relay never dropped the runner");
    assert.equal(fake.acked(id), total);
    const stored = await storedLog(user, id);
    assert.equal(stored.length, total);
    assertContiguous(stored);
    assert.equal(
      relay.proc.lines.some((l) => /storing events failed|internal error/.test(l)),
      false,
    );
    fake.close();
  } finally {
    await relay.stop();
    await cleanup(relay.home);
  }
});

Deno.test("a spawn the runner refuses while it streams that session's events leaves none stored", async () => {
  const relay = await startLoggedRelay();
  const closers: (() => Promise<unknown>)[] = [];
  try {
    const user = await signUp(relay.url);
    const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
    closers.push(() => fake.close());
    // A runner whose worker starts streaming, then reports the spawn failed and
    // keeps streaming for a while (a worker it failed to stop): batches big
    // enough for the writer thread, so commits are in flight when the spawn fails.
    let sessionId = "";
    let streaming: Promise<void> = Promise.resolve();
    fake.answer = (req) => {
      if (req.op !== "spawn") return null;
      sessionId = (req.data as { sessionId: string }).sessionId;
      let seq = 0;
      const batch = () =>
        Array.from({ length: 600 }, () => ({
          seq: ++seq,
          ts: Date.now(),
          e: toolOutput("t1", `line ${seq} `.repeat(8)),
        }));
      fake.sendEvents(sessionId, batch());
      fake.sendEvents(sessionId, batch());
      streaming = (async () => {
        for (let i = 0; i < 60 && fake.open; i++) {
          fake.sendEvents(sessionId, batch());
          await new Promise((r) => setTimeout(r, 2));
        }
      })();
      return { ok: false, error: { code: "spawn_failed", message: "The worker did not start" } };
    };
    const res = await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: fake.runnerId, prompt: "fake", cwd: "/fake" }),
    );
    assert.equal(res.status, 502, await res.text());
    await streaming;
    await fake.barrier();
    await relay.relay.hub.settle();
    // Nothing of it is listed or stored, and the runner's later events were refused.
    assert.equal(await relay.relay.store.sessions.get(sessionId), undefined);
    assert.equal(await relay.relay.store.events.maxSeq(sessionId), 0, "events of the failed spawn");
    assert.ok(fake.errors.some((e) => e.code === "unknown_session" && e.sessionId === sessionId));
  } finally {
    for (const close of closers.reverse()) await close().catch(() => {});
    await relay.dispose();
  }
});
