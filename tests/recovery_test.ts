import assert from "node:assert/strict";
import { join } from "node:path";
import { assertContiguous, json, signUp, Viewer } from "./harness/client.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import { RelayProcess, type RunnerProcess, startRunner, tempDir } from "./harness/procs.ts";
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
  const relay = await RelayProcess.start();
  let runner: RunnerProcess | undefined;
  try {
    const user = await signUp(relay.url);
    const home = await tempDir();
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    const [r] = await (await user.api("/api/runners")).json();

    const pieces = Array.from({ length: 120 }, (_, i) => `w${i} `);
    llm.enqueue({ text: pieces, chunkDelayMs: 25 });
    const spawned = await (await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: r.id, cwd: home, model: MODEL, prompt: "stream a lot" }),
    )).json();
    const id = spawned.sessionId;

    const v1 = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    v1.subscribe(id);
    await v1.until(() => v1.eventsOf(id).length > 20, "some streamed events");
    const before = await (await user.api(`/api/sessions/${id}/events?since=0&limit=5000`)).json();
    const ackedBefore = before.events.length;
    await relay.kill("SIGKILL");
    await v1.closed;
    const seen = v1.eventsOf(id);

    await relay.restart();
    await runner.connected(2);
    const v2 = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    try {
      v2.subscribe(id, seen[seen.length - 1]!.seq);
      await v2.waitForEvent(id, "agent_end", 30_000);
      const all = [...seen, ...v2.eventsOf(id)];
      assertContiguous(all);
      const stored = await (await user.api(`/api/sessions/${id}/events?since=0&limit=5000`)).json();
      assert.deepEqual(all, stored.events, "the viewer saw exactly the stored log");
      // Everything stored before the crash is still there, unchanged.
      assert.deepEqual(stored.events.slice(0, ackedBefore), before.events);
      const text = all
        .filter((e) => e.e.type === "message_update")
        .map((e) => (e.e.assistantMessageEvent as { delta?: string }).delta ?? "")
        .join("");
      assert.equal(text, pieces.join(""), "every streamed piece arrived exactly once");
    } finally {
      await v2.close();
    }
  } finally {
    await runner?.stop();
    await relay.stop();
    await llm.close();
  }
});

Deno.test("a worker killed with SIGKILL ends only its own session", async () => {
  const llm = MockLlm.start();
  const relay = await RelayProcess.start();
  let runner: RunnerProcess | undefined;
  try {
    const user = await signUp(relay.url);
    const home = await tempDir();
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    const [r] = await (await user.api("/api/runners")).json();
    const spawn = async () =>
      (await (await user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: r.id, cwd: home, model: MODEL, prompt: "" }),
      )).json()).sessionId as string;
    const a = await spawn();
    const b = await spawn();
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

Deno.test("a killed daemon is restarted by the supervisor and its sessions come back", async () => {
  const llm = MockLlm.start();
  const relay = await RelayProcess.start();
  let runner: RunnerProcess | undefined;
  try {
    const user = await signUp(relay.url);
    const home = await tempDir();
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    const runnerId = JSON.parse(await Deno.readTextFile(join(home, ".baton/runner.json"))).runnerId;
    const spawn = async (prompt: string) =>
      (await (await user.api(
        "/api/runners/spawn",
        json("POST", { runnerId, cwd: home, model: MODEL, prompt }),
      )).json()).sessionId as string;
    llm.enqueue({ text: "remembered: the answer is 42" }, { text: "other" });
    const a = await spawn("remember 42");
    const b = await spawn("second session");
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    viewer.subscribe(a);
    viewer.subscribe(b);
    await viewer.waitForEvent(a, "agent_end");
    await viewer.waitForEvent(b, "agent_end");
    // pi has saved both conversations once their first turn ended.
    const daemonPid = Number((await runner.proc.waitFor(/\[daemon\] runner .* pid (\d+)/))[1]);
    Deno.kill(daemonPid, "SIGKILL");

    await runner.proc.waitFor(/daemon exited \(signal SIGKILL\); restarting/);
    await runner.connected(2);
    const runners = await (await user.api("/api/runners")).json();
    assert.equal(runners.length, 1);
    assert.equal(runners[0].id, runnerId, "same runner id after the restart");
    assert.equal(runners[0].connected, true);

    for (const id of [a, b]) {
      await viewer.until(
        () => viewer.eventsOf(id).filter((e) => e.e.type === "session_start").length === 2,
        "resumed session_start",
      );
      const starts = viewer.eventsOf(id).filter((e) => e.e.type === "session_start");
      assert.equal(starts[1]!.e.resumed, true);
      assert.equal((await sessionState(user.api, id)).status, "running");
    }

    // The resumed session remembers its conversation.
    llm.enqueue({ text: "still 42" });
    const before = llm.requests.length;
    const res = await user.api(
      `/api/sessions/${a}/input`,
      json("POST", { kind: "prompt", text: "what was it?" }),
    );
    assert.equal(res.status, 200, await res.text());
    await viewer.until(
      () => viewer.eventsOf(a).filter((e) => e.e.type === "agent_end").length === 2,
      "answer after resume",
    );
    const history = JSON.stringify(llm.requests[before]?.messages);
    assert.match(history, /remember 42/);
    assert.match(history, /remembered: the answer is 42/);
    assertContiguous(viewer.eventsOf(a));
    assertContiguous(viewer.eventsOf(b));
    await viewer.close();
  } finally {
    await runner?.stop();
    await relay.stop();
    await llm.close();
  }
});
