/**
 * Idle sessions sleep: their worker stops after `BATON_SLEEP_AFTER` without
 * a turn, the session stays listed, and the next input or trigger wakes it
 * from pi's conversation file.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { applyEvents, emptyConversation } from "../shared/conversation.ts";
import type { SessionEvent } from "../shared/protocol.ts";
import { json, Viewer } from "./harness/client.ts";
import { spawnOnStack, type Stack, withStack } from "./harness/in_process.ts";
import { processAlive } from "./harness/procs.ts";
import { userTexts } from "./harness/trigger_world.ts";
import { eventually } from "./harness/wait.ts";

function withWorld(fn: (w: Stack) => Promise<void>) {
  return withStack({ runnerEnv: { BATON_SLEEP_AFTER: "1s" } }, fn);
}

async function activity(w: Stack, id: string): Promise<string> {
  return (await (await w.user.api(`/api/sessions/${id}`)).json()).session.activity;
}

async function input(w: Stack, id: string, kind: string, text = ""): Promise<Response> {
  return await w.user.api(`/api/sessions/${id}/input`, json("POST", { kind, text }));
}

/** The worker process the daemon last recorded for a session. */
async function workerPid(w: Stack, id: string): Promise<number> {
  const path = join(w.home, ".baton/runner/sessions", `${id}.json`);
  return JSON.parse(await Deno.readTextFile(path)).pid;
}

function count(events: SessionEvent[], type: string): number {
  return events.filter((e) => e.e.type === type).length;
}

Deno.test("an idle session's worker stops after the sleep delay and the next prompt wakes it with its memory", async () => {
  await withWorld(async (w) => {
    const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    try {
      w.llm.enqueue({ text: "noted: the number is 7" });
      const id = await spawnOnStack(w, "remember 7");
      viewer.subscribe(id);
      await viewer.waitForEvent(id, "agent_end");
      const pid = await workerPid(w, id);
      assert.ok(processAlive(pid), "the worker runs while the session is fresh");

      await viewer.waitForEvent(id, "session_sleep", 15_000);
      await eventually("the worker to exit", () => !processAlive(pid) || undefined);
      assert.equal(await activity(w, id), "asleep");
      const listed = await (await w.user.api("/api/sessions")).json();
      const row = listed.sessions.find((s: { sessionId: string }) => s.sessionId === id);
      assert.equal(row?.status, "running", "a sleeping session is still listed as open");

      // A prompt wakes it: the viewer sees waking, then the answer, and the
      // agent still has the conversation from before its sleep.
      w.llm.enqueue({ text: "it was 7" });
      const before = w.llm.requests.length;
      const res = await input(w, id, "prompt", "which number?");
      assert.equal(res.status, 200, await res.text());
      await viewer.until(() => count(viewer.eventsOf(id), "agent_end") === 2, "the second answer");
      const history = JSON.stringify(w.llm.requests[before]?.messages);
      assert.match(history, /remember 7/);
      assert.match(history, /noted: the number is 7/);
      const types = viewer.eventsOf(id).map((e) => e.e.type);
      const sleep = types.indexOf("session_sleep");
      assert.deepEqual(types.slice(sleep, sleep + 3), [
        "session_sleep",
        "session_waking",
        "session_start",
      ]);
      const woke = viewer.eventsOf(id)[sleep + 2]!.e;
      assert.equal(woke.woke, true);
      assert.notEqual(await workerPid(w, id), pid, "a new worker runs the session");

      // Sleeping and waking add nothing to the conversation a person reads.
      const conv = applyEvents(emptyConversation(), viewer.eventsOf(id));
      assert.deepEqual(conv.items.filter((i) => i.kind === "notice"), []);
      assert.deepEqual(
        conv.items.map((i) =>
          i.kind === "user" ? `${i.text}${i.forgotten ? " (forgotten)" : ""}` : i.kind
        ),
        ["remember 7", "assistant", "which number?", "assistant"],
      );
      // ...and once idle again, it goes back to sleep.
      await viewer.until(() => count(viewer.eventsOf(id), "session_sleep") === 2, "second sleep");
      assert.equal(await activity(w, id), "asleep");
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("a turn longer than the sleep delay keeps its worker; a trigger wakes a sleeping session; end does not", async (t) => {
  await withWorld(async (w) => {
    const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    try {
      await t.step("a session stays awake through a long turn", async () => {
        w.llm.enqueue({ text: Array.from({ length: 25 }, (_, i) => `p${i} `), chunkDelayMs: 100 });
        const id = await spawnOnStack(w, "a long answer");
        viewer.subscribe(id);
        await viewer.waitForEvent(id, "agent_end", 20_000);
        const events = viewer.eventsOf(id);
        assert.equal(count(events, "session_sleep"), 0, "no sleep during the 2.5 s turn");
        await viewer.waitForEvent(id, "session_sleep", 15_000);
      });

      await t.step("a trigger wakes a sleeping session and reaches the agent", async () => {
        w.llm.enqueue({ text: "first" });
        const id = await spawnOnStack(w, "hello");
        viewer.subscribe(id);
        await viewer.waitForEvent(id, "session_sleep", 15_000);
        w.llm.enqueue({ text: "got the trigger" });
        const before = w.llm.requests.length;
        const res = await w.user.api(
          `/api/sessions/${id}/trigger`,
          json("POST", { type: "ci:done", payload: { build: 41 } }),
        );
        assert.equal(res.status, 200, await res.text());
        await w.llm.waitForRequests(before + 1);
        const last = userTexts(w.llm.requests[before]!).at(-1) ?? "";
        assert.match(last, /type="ci:done"/);
        assert.match(last, /"build": 41/);
        await viewer.waitForEvent(id, "trigger_delivered");
        assert.equal(count(viewer.eventsOf(id), "session_waking"), 1);
      });

      await t.step("stop and end reach a sleeping session without waking it", async () => {
        w.llm.enqueue({ text: "done" });
        const id = await spawnOnStack(w, "short");
        viewer.subscribe(id);
        await viewer.waitForEvent(id, "session_sleep", 15_000);
        assert.equal((await input(w, id, "abort")).status, 200);
        assert.equal((await input(w, id, "end")).status, 200);
        const end = await viewer.waitForEvent(id, "session_end");
        assert.equal(end.e.reason, "ended");
        assert.equal(count(viewer.eventsOf(id), "session_waking"), 0);
        const s = (await (await w.user.api(`/api/sessions/${id}`)).json()).session;
        assert.equal(s.status, "ended");
        const res = await input(w, id, "prompt", "are you there?");
        assert.equal(res.status, 409);
      });
    } finally {
      await viewer.close();
    }
  });
});
