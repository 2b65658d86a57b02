import assert from "node:assert/strict";
import { join } from "node:path";
import { applyEvents, emptyConversation } from "../shared/conversation.ts";
import { assertContiguous, json, Viewer } from "./harness/client.ts";
import { crashMidStream, startRelayOn, withRunner } from "./harness/cluster.ts";
import { MockLlm } from "./harness/mock_llm.ts";
import type { RunnerProcess } from "./harness/procs.ts";
import { eventually } from "./harness/wait.ts";

async function sessionState(api: (p: string) => Promise<Response>, id: string) {
  return (await (await api(`/api/sessions/${id}`)).json()).session;
}

/** Reads the worker pid the daemon records for a session. */
async function workerPid(home: string, sessionId: string): Promise<number> {
  return await eventually("worker pid", async () => {
    try {
      const e = JSON.parse(
        await Deno.readTextFile(join(home, ".baton/runner/sessions", `${sessionId}.json`)),
      );
      return typeof e.pid === "number" ? e.pid : undefined;
    } catch {
      return undefined;
    }
  });
}

Deno.test("a relay killed mid-stream and restarted loses no acknowledged event", async () => {
  const llm = MockLlm.start();
  const relay = await startRelayOn("sqlite");
  let runner: RunnerProcess | undefined;
  try {
    const world = await withRunner(relay, llm);
    runner = world.runner;
    await crashMidStream(relay, world, llm, { pieces: 120, killAfter: 20 });
  } finally {
    await runner?.stop();
    await relay.stop();
    await llm.close();
  }
});

Deno.test("a worker killed with SIGKILL ends only its own session", async () => {
  const llm = MockLlm.start();
  const relay = await startRelayOn("sqlite");
  let runner: RunnerProcess | undefined;
  try {
    const world = await withRunner(relay, llm);
    const { user, home } = world;
    runner = world.runner;
    const a = await world.spawn("");
    const b = await world.spawn("");
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    try {
      viewer.subscribe(a);
      viewer.subscribe(b);
      await viewer.waitForEvent(a, "session_start");
      await viewer.waitForEvent(b, "session_start");

      Deno.kill(await workerPid(home, a), "SIGKILL");
      const end = await viewer.waitForEvent(a, "session_end");
      assert.equal(end.e.reason, "crashed");
      assert.match(String(end.e.message), /SIGKILL/);
      assert.equal((await sessionState(user.api, a)).status, "error");

      // The other session is untouched and still answers.
      assert.equal((await sessionState(user.api, b)).status, "running");
      llm.enqueue({ text: "still alive" });
      const res = await user.api(
        `/api/sessions/${b}/input`,
        json("POST", { kind: "prompt", text: "you there?" }),
      );
      assert.equal(res.status, 200);
      await viewer.waitForEvent(b, "agent_end");
      assert.equal(viewer.eventsOf(b).some((e) => e.e.type === "session_end"), false);
      assertContiguous(viewer.eventsOf(a));
      assertContiguous(viewer.eventsOf(b));
    } finally {
      await viewer.close();
    }
  } finally {
    await runner?.stop();
    await relay.stop();
    await llm.close();
  }
});

Deno.test("a killed daemon is restarted by the supervisor: idle sessions sleep, turns in flight end visibly", async () => {
  const llm = MockLlm.start();
  const relay = await startRelayOn("sqlite");
  let runner: RunnerProcess | undefined;
  try {
    const world = await withRunner(relay, llm);
    const { user, home, spawn } = world;
    runner = world.runner;
    const runnerId = JSON.parse(await Deno.readTextFile(join(home, ".baton/runner.json"))).runnerId;
    const slow = { text: Array.from({ length: 400 }, (_, i) => `s${i} `), chunkDelayMs: 50 };
    llm.responder = (req) => {
      const said = JSON.stringify(req.messages.filter((m) => m.role !== "system"));
      if (said.includes("what was it?")) return { text: "still 42" };
      if (said.includes("SLOW-SECOND")) return slow;
      if (said.includes("remember 42")) return { text: "remembered: the answer is 42" };
      if (said.includes("SLOW-FIRST")) return slow;
      return { text: "ok" };
    };
    const idle = await spawn("remember 42");
    const first = await spawn("SLOW-FIRST turn");
    const second = await spawn("a first turn");
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    for (const id of [idle, first, second]) viewer.subscribe(id);
    await viewer.waitForEvent(idle, "agent_end");
    await viewer.waitForEvent(second, "agent_end");
    await user.api(
      `/api/sessions/${second}/input`,
      json("POST", { kind: "prompt", text: "SLOW-SECOND turn" }),
    );
    const streamed = (id: string) =>
      viewer.eventsOf(id).filter((e) => e.e.type === "message_update").length;
    await viewer.until(() => streamed(first) > 5 && streamed(second) > 5, "both slow turns stream");
    assert.equal((await sessionState(user.api, first)).activity, "working");

    const daemonPid = Number((await runner.proc.waitFor(/\[daemon\] runner .* pid (\d+)/))[1]);
    Deno.kill(daemonPid, "SIGKILL");
    await runner.proc.waitFor(/daemon exited \(signal SIGKILL\); restarting/);
    await runner.connected(2);
    const runners = await (await user.api("/api/runners")).json();
    assert.equal(runners.length, 1);
    assert.equal(runners[0].id, runnerId, "same runner id after the restart");
    assert.equal(runners[0].connected, true);

    // The idle session sleeps: no worker until something needs it.
    await viewer.waitForEvent(idle, "session_sleep");
    assert.equal(viewer.eventsOf(idle).filter((e) => e.e.type === "session_start").length, 1);
    assert.equal((await sessionState(user.api, idle)).activity, "asleep");

    // The turns in flight are over, and everyone can tell.
    for (const id of [first, second]) {
      await viewer.until(
        () => viewer.eventsOf(id).filter((e) => e.e.type === "session_start").length === 2,
        "resumed session_start",
      );
      const state = await sessionState(user.api, id);
      assert.equal(state.status, "running");
      assert.equal(state.activity, "idle", "not working forever");
      const conv = applyEvents(emptyConversation(), viewer.eventsOf(id));
      assert.equal(conv.working, false);
      const answers = conv.items.filter((i) => i.kind === "assistant");
      const cut = answers[answers.length - 1]!;
      assert.ok(cut.kind === "assistant" && cut.interrupted && !cut.streaming, "answer cut off");
      assert.ok(
        conv.items.some((i) => i.kind === "notice" && /restarted during this turn/.test(i.text)),
      );
    }
    // A crash in the first turn: pi had saved nothing, and the prompt shows as forgotten.
    const lost = applyEvents(emptyConversation(), viewer.eventsOf(first)).items
      .filter((i) => i.kind === "user");
    assert.deepEqual(lost.map((i) => i.kind === "user" && i.forgotten), [true]);
    // A crash in a later turn: the agent kept every prompt.
    const kept = applyEvents(emptyConversation(), viewer.eventsOf(second)).items
      .filter((i) => i.kind === "user");
    assert.deepEqual(kept.map((i) => i.kind === "user" && i.forgotten), [false, false]);

    // The sleeping session wakes for a prompt and remembers its conversation.
    const before = llm.requests.length;
    const res = await user.api(
      `/api/sessions/${idle}/input`,
      json("POST", { kind: "prompt", text: "what was it?" }),
    );
    assert.equal(res.status, 200, await res.text());
    await viewer.until(
      () => viewer.eventsOf(idle).filter((e) => e.e.type === "agent_end").length === 2,
      "answer after waking",
    );
    const history = JSON.stringify(llm.requests[before]?.messages);
    assert.match(history, /remember 42/);
    assert.match(history, /remembered: the answer is 42/);
    for (const id of [idle, first, second]) assertContiguous(viewer.eventsOf(id));
    await viewer.close();
  } finally {
    await runner?.stop();
    await relay.stop();
    await llm.close();
  }
});
