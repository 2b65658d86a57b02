/**
 * Deleting sessions and retention, against a real relay (in-process or a
 * `baton relay` subprocess) and its SQLite file: what a deleted session
 * leaves (nothing, and less disk), who may delete, what the sweep removes
 * and keeps, and what survives a restart.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import type { SessionListResponse, SessionResponse } from "../shared/api.ts";
import type { SessionEventBody } from "../shared/protocol.ts";
import { json, signUp, storedEvents, type User, Viewer } from "./harness/client.ts";
import { FakeRunner, runnerToken, spawnSession, textDelta } from "./harness/fake_runner.ts";
import { startTestRelay, withStack } from "./harness/in_process.ts";
import { RelayProcess } from "./harness/procs.ts";
import { MODEL } from "./harness/mock_llm.ts";
import { eventually } from "./harness/wait.ts";

const START: SessionEventBody = { type: "session_start", cwd: "/fake" };
const END: SessionEventBody = { type: "session_end", reason: "ended", message: "Done" };

/** Streams a session's start, `count` text deltas of `size` characters, and (unless told not to) its end. */
async function fill(
  runner: FakeRunner,
  sessionId: string,
  count: number,
  size: number,
  end = true,
): Promise<void> {
  const text = "x".repeat(size);
  const last = count + (end ? 2 : 1);
  await runner.stream(
    sessionId,
    last,
    (seq) => seq === 1 ? START : end && seq === last ? END : textDelta(text),
  );
}

async function listed(user: User): Promise<string[]> {
  const res = await user.api("/api/sessions");
  const body: SessionListResponse = await res.json();
  return [...body.sessions, ...body.persistedSessions].map((s) => s.sessionId);
}

/** The database file's size once the WAL is checkpointed into it. */
function dbFileSize(dataDir: string): number {
  return Deno.statSync(join(dataDir, "relay.db")).size;
}

Deno.test("deleting a session removes it and its events, tells its viewers and gives the disk space back", async () => {
  await using relay = await startTestRelay({ allowSignup: true });
  const owner = await signUp(relay.url);
  const other = await signUp(relay.url);
  const runner = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(owner) });
  try {
    const doomed = await spawnSession(owner, runner.runnerId);
    const kept = await spawnSession(owner, runner.runnerId);
    // About 12 MB of events in the one to delete, a little in the other.
    await fill(runner, doomed, 3000, 4000);
    await fill(runner, kept, 20, 100);
    const viewer = await Viewer.connect(relay.url, { apiKey: owner.apiKey });
    viewer.send({ t: "watch" });
    viewer.subscribe(doomed);
    await viewer.waitFor((m) => m.t === "caught_up" && m.sessionId === doomed);
    await eventually("the log checkpointed", () => {
      const wal = Deno.statSync(join(relay.dataDir, "relay.db-wal")).size;
      return wal === 0 || dbFileSize(relay.dataDir) > 12_000_000 ? true : undefined;
    });
    const before = dbFileSize(relay.dataDir);

    const foreign = await other.api(`/api/sessions/${doomed}`, { method: "DELETE" });
    assert.equal(foreign.status, 404, "another user's delete is a 404");
    const missing = await owner.api(`/api/sessions/${crypto.randomUUID()}`, { method: "DELETE" });
    assert.equal(missing.status, 404);
    assert.deepEqual(
      (await foreign.json()).error.code,
      (await missing.json()).error.code,
      "foreign and missing ids answer alike",
    );
    const still = await storedEvents(owner, doomed);
    assert.equal(still.length, 3002, "a refused delete changes nothing");

    const del = await owner.api(`/api/sessions/${doomed}`, { method: "DELETE" });
    assert.equal(del.status, 200, await del.clone().text());
    assert.deepEqual(await del.json(), { ok: true });
    await viewer.waitFor((m) => m.t === "session_deleted" && m.sessionId === doomed);

    assert.equal((await owner.api(`/api/sessions/${doomed}`)).status, 404);
    const events = await owner.api(`/api/sessions/${doomed}/events`);
    assert.equal(events.status, 404, "its events are gone");
    await events.body?.cancel();
    assert.deepEqual(await listed(owner), [kept], "the listing drops it");
    const again = await owner.api(`/api/sessions/${doomed}`, { method: "DELETE" });
    assert.equal(again.status, 404, "a second delete finds nothing");
    await again.body?.cancel();
    const keptEvents = await owner.api(`/api/sessions/${kept}/events`);
    assert.equal((await keptEvents.json()).events.length, 22, "the other session is untouched");

    // Nothing of it is left in the file, and the file shrinks without a restart.
    const db = new DatabaseSync(join(relay.dataDir, "relay.db"), { readOnly: true });
    try {
      for (const table of ["session_event_chunks", "session_deletions", "sessions"]) {
        const col = table === "sessions" ? "id" : "session_id";
        const row = db.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE ${col} = ?`).get(
          doomed,
        ) as { n: number };
        assert.equal(row.n, 0, `${table} keeps nothing of it`);
      }
    } finally {
      db.close();
    }
    const after = await eventually("the file to shrink", () => {
      const size = dbFileSize(relay.dataDir);
      return size < before - 10_000_000 ? size : undefined;
    });
    assert.ok(after < before, `relay.db went from ${before} to ${after} bytes`);

    // A runner still sending its events is told the session is unknown.
    runner.sendEvents(doomed, [{ seq: 5000, ts: Date.now(), e: textDelta("late") }]);
    await runner.until(() => runner.errors.some((e) => e.sessionId === doomed), "unknown_session");
    await viewer.close();
  } finally {
    await runner.close();
  }
});

Deno.test("deleting a running session tells its runner, and its later events are refused", async () => {
  await using relay = await startTestRelay();
  const owner = await signUp(relay.url);
  const runner = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(owner) });
  try {
    const id = await spawnSession(owner, runner.runnerId);
    await fill(runner, id, 5, 10, false);
    const del = await owner.api(`/api/sessions/${id}`, { method: "DELETE" });
    assert.equal(del.status, 200);
    await del.body?.cancel();
    await runner.until(() => runner.requests.some((r) => r.op === "delete_session"), "the news");
    const told = runner.requests.filter((r) => r.op === "delete_session");
    assert.deepEqual(told.map((r) => r.data), [{ sessionId: id }]);
    assert.deepEqual(await listed(owner), []);
    // Like a daemon: the worker's end comes after; the relay no longer knows the session.
    runner.sendEvents(id, [{ seq: 7, ts: Date.now(), e: END }]);
    await runner.until(
      () => runner.errors.some((e) => e.sessionId === id && e.code === "unknown_session"),
      "unknown_session",
    );
  } finally {
    await runner.close();
  }
});

/** Every pi conversation file under `dir`. */
async function conversations(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    const path = join(dir, e.name);
    if (e.isDirectory) out.push(...await conversations(path));
    else if (e.name.endsWith(".jsonl")) out.push(path);
  }
  return out;
}

Deno.test("a runner deletes the conversation file of a session deleted on the relay, running or ended", async () => {
  await withStack({}, async (s) => {
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      const ids: string[] = [];
      for (const prompt of ["first", "second"]) {
        const res = await s.user.api(
          "/api/runners/spawn",
          json("POST", { runnerId: s.runnerId, cwd: s.home, model: MODEL, prompt }),
        );
        const { sessionId } = await res.json();
        viewer.subscribe(sessionId);
        await viewer.waitForEvent(sessionId, "agent_end");
        ids.push(sessionId);
      }
      const [ended, running] = ids as [string, string];
      const end = await s.user.api(`/api/sessions/${ended}/input`, json("POST", { kind: "end" }));
      assert.equal(end.status, 200);
      await end.body?.cancel();
      await viewer.waitForEvent(ended, "session_end");
      const batonDir = join(s.home, ".baton");
      const before = await conversations(batonDir);
      assert.equal(before.length, 2, before.join("\n"));

      for (const id of [ended, running]) {
        const del = await s.user.api(`/api/sessions/${id}`, { method: "DELETE" });
        assert.equal(del.status, 200);
        await del.body?.cancel();
      }
      await eventually("the conversation files to go", async () => {
        return (await conversations(batonDir)).length === 0 ? true : undefined;
      });
      // The running one's worker was stopped.
      await s.runner.proc.waitFor(new RegExp(`session ${running} was deleted on the relay`));
      // Nothing of them is left in the runner's registry either.
      for (const sub of ["sessions", "conversations"]) {
        const dir = join(batonDir, "runner", sub);
        const left: string[] = [];
        for await (const e of Deno.readDir(dir)) left.push(e.name);
        assert.deepEqual(left.filter((n) => ids.some((id) => n.startsWith(id))), [], sub);
      }
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("PATCH pins and unpins a session, alone or with a new title", async () => {
  await using relay = await startTestRelay({ allowSignup: true });
  const owner = await signUp(relay.url);
  const other = await signUp(relay.url);
  const runner = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(owner) });
  try {
    const id = await spawnSession(owner, runner.runnerId);
    const patch = (u: User, body: unknown) => u.api(`/api/sessions/${id}`, json("PATCH", body));
    let res = await patch(owner, { pinned: true });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as SessionResponse).session.isPinned, true);
    res = await patch(owner, { pinned: false, title: "Renamed" });
    const { session } = (await res.json()) as SessionResponse;
    assert.deepEqual([session.isPinned, session.title], [false, "Renamed"]);
    res = await patch(other, { pinned: true });
    assert.equal(res.status, 404, "someone else's session cannot be pinned");
    await res.body?.cancel();
    for (const bad of [{}, { pinned: "yes" }, { pinned: 1 }]) {
      res = await patch(owner, bad);
      assert.equal(res.status, 400, JSON.stringify(bad));
      assert.equal((await res.json()).error.code, "invalid_body");
    }
    const now = (await (await owner.api(`/api/sessions/${id}`)).json()) as SessionResponse;
    assert.equal(now.session.isPinned, false, "bad requests changed nothing");
  } finally {
    await runner.close();
  }
});

Deno.test("retention at start removes old ended sessions and the oldest over a user's cap, keeps pinned and running ones, and the rest survives", async () => {
  const relay = await RelayProcess.start({ env: { BATON_ALLOW_SIGNUP: "1" } });
  let runner: FakeRunner | null = null;
  try {
    const alice = await signUp(relay.url);
    const bob = await signUp(relay.url);
    runner = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(alice) });
    const bobRunner = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(bob) });
    const ids: Record<string, string> = {};
    // ~600 KB each: 150 deltas of 4,000 characters.
    for (const name of ["old", "oldPinned", "running", "e1", "e2", "recent"]) {
      ids[name] = await spawnSession(alice, runner.runnerId);
      await fill(runner, ids[name], 150, 4000, name !== "running");
    }
    ids.bob = await spawnSession(bob, bobRunner.runnerId);
    await fill(bobRunner, ids.bob, 400, 4000);
    const pin = await alice.api(`/api/sessions/${ids.oldPinned}`, json("PATCH", { pinned: true }));
    assert.equal(pin.status, 200);
    await pin.body?.cancel();
    await runner.close();
    await bobRunner.close();
    runner = null;
    assert.equal((await relay.stop()).code, 0);

    // Time passes: move the ends back (the relay is stopped).
    const day = 86_400_000;
    const db = new DatabaseSync(join(relay.dataDir, "relay.db"));
    const ago = (days: number) => new Date(Date.now() - days * day).toISOString();
    for (const [name, days] of [["old", 200], ["oldPinned", 200], ["e1", 10], ["e2", 5]] as const) {
      db.prepare("UPDATE sessions SET ended_at = ? WHERE id = ?").run(ago(days), ids[name]!);
    }
    db.prepare("UPDATE sessions SET created_at = ? WHERE id = ?").run(ago(300), ids.running!);
    const sizes = db.prepare("SELECT id, event_bytes FROM sessions").all() as {
      id: string;
      event_bytes: number;
    }[];
    db.close();
    for (const { id, event_bytes } of sizes) {
      assert.ok(event_bytes > 590_000, `session ${id} knows its log's size: ${event_bytes}`);
    }

    // Alice holds ~3.6 MB: the old one goes by age, then e1 and e2 (the
    // oldest ends) bring her under 2 MB; pinned and running ones stay
    // whatever they weigh. Bob (~1.6 MB) is under his own cap.
    relay.env.BATON_RETENTION_MAX_AGE_DAYS = "30";
    relay.env.BATON_RETENTION_USER_MAX_MB = "2";
    await relay.restart();
    await relay.proc.waitFor(/retention removed 3 sessions/);
    assert.deepEqual(
      new Set(await listed(alice)),
      new Set([ids.oldPinned, ids.running, ids.recent]),
    );
    for (const name of ["old", "e1", "e2"]) {
      const res = await alice.api(`/api/sessions/${ids[name]}/events`);
      assert.equal(res.status, 404, `${name} is gone`);
      await res.body?.cancel();
    }
    for (
      const [name, user, n] of [
        ["oldPinned", alice, 152],
        ["running", alice, 151],
        ["recent", alice, 152],
        ["bob", bob, 402],
      ] as const
    ) {
      const kept = await storedEvents(user, ids[name]!);
      assert.equal(kept.length, n, `${name} kept every event`);
    }
  } finally {
    await runner?.close();
    await relay.stop().catch(() => {});
  }
});
