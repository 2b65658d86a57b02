import assert from "node:assert/strict";
import { join } from "node:path";
import type { SessionListResponse } from "../shared/api.ts";
import type { SessionEvent, SessionInfo } from "../shared/protocol.ts";
import type { SessionChildrenResponse, SubagentDetails } from "../shared/subagents_api.ts";
import { json, storedEvents } from "./harness/client.ts";
import type { ChatRequest, Turn } from "./harness/mock_llm.ts";
import {
  answer,
  closeWorld,
  requestText,
  spawn,
  startWorld,
  stepper,
  userTexts,
  type World,
} from "./harness/trigger_world.ts";
import { eventually } from "./harness/wait.ts";

/** The prompt a request answers (the child's task, or the parent's prompt). */
const firstUser = (req: ChatRequest) => userTexts(req)[0] ?? "";

/** What the parents ask for, by their prompt. */
const PARENT_CALLS: Record<string, Record<string, unknown>> = {
  "PARENT-single": { task: "CHILD-one: say hi" },
  "PARENT-parallel": {
    tasks: Array.from({ length: 8 }, (_, i) => ({ task: `CHILD-SLOW-p${i}` })),
  },
  "PARENT-chain": {
    chain: [{ task: "CHILD-c1" }, { task: "CHILD-c2 builds on: {previous}" }],
  },
  "PARENT-stop": { task: "CHILD-HANG-stop" },
  "PARENT-end": { task: "CHILD-HANG-end" },
  "PARENT-nest": { task: "CHILD-NEST" },
  "PARENT-role": { task: "CHILD-role", agent: "reviewer" },
  "PARENT-badrole": { task: "CHILD-badrole", agent: "nobody" },
};

/** The scripted model: parents call `subagent`, children answer `answer<task>`. */
function script(req: ChatRequest): Turn | undefined {
  const first = firstUser(req);
  const last = req.messages.at(-1);
  if (last?.role === "tool") return { text: `parent saw: ${requestText(req).slice(-2000)}` };
  if (first === "CHILD-NEST" || first === "GRAND") {
    // A child and a grandchild that try to start subagents of their own.
    return {
      toolCalls: [{ name: "subagent", args: { task: first === "GRAND" ? "GREAT" : "GRAND" } }],
    };
  }
  if (first.startsWith("CHILD-HANG")) {
    return { text: Array.from({ length: 600 }, () => "."), chunkDelayMs: 100 };
  }
  if (first.startsWith("CHILD-SLOW")) {
    return {
      text: [...Array.from({ length: 15 }, () => ""), `answer<${first}>`],
      chunkDelayMs: 100,
    };
  }
  if (first.startsWith("CHILD")) return { text: `answer<${first}>` };
  const call = PARENT_CALLS[first];
  if (call) return { toolCalls: [{ name: "subagent", args: call }] };
  return undefined;
}

async function children(w: World, parentId: string): Promise<SessionInfo[]> {
  const { status, body } = await answer(await w.user.api(`/api/sessions/${parentId}/children`));
  assert.equal(status, 200, JSON.stringify(body));
  return (body as SessionChildrenResponse).sessions;
}

/** The parent's `subagent` tool result as stored (tool_execution_end). */
async function toolEnd(w: World, parentId: string): Promise<SessionEvent> {
  await w.viewer.waitForEvent(parentId, "tool_execution_end", 120_000);
  return w.viewer.eventsOf(parentId).find((e) => e.e.type === "tool_execution_end")!;
}

function detailsOf(ev: SessionEvent): SubagentDetails {
  return (ev.e.result as { details: SubagentDetails }).details;
}

function resultText(ev: SessionEvent): string {
  const r = ev.e.result as { content: { text?: string }[] };
  return r.content.map((c) => c.text ?? "").join("");
}

async function statusOf(w: World, id: string): Promise<string> {
  const { body } = await answer(await w.user.api(`/api/sessions/${id}`));
  return body.session.status;
}

Deno.test("the subagent tool runs child sessions: single, parallel, chain, linked and stopped with their parent", async (t) => {
  const w = await startWorld({ relay: { allowSignup: true } });
  const st = stepper(t);
  try {
    w.model.rules.push(script);

    await st.step("a single task answers with the child's final text", async () => {
      const parent = await spawn(w, "PARENT-single");
      const end = await toolEnd(w, parent);
      assert.equal(resultText(end), "answer<CHILD-one: say hi>");
      const d = detailsOf(end);
      assert.equal(d.mode, "single");
      assert.equal(d.runs.length, 1);
      assert.equal(d.runs[0]!.ok, true);
      const kids = await children(w, parent);
      assert.equal(kids.length, 1);
      assert.equal(kids[0]!.sessionId, d.runs[0]!.sessionId, "the tool call links its child");
      assert.equal(kids[0]!.parentId, parent);
      assert.equal(kids[0]!.runnerId, w.runnerId);
      const p = (await answer(await w.user.api(`/api/sessions/${parent}`))).body.session;
      assert.equal(p.parentId, null);
      assert.equal(kids[0]!.cwd, p.cwd, "the child works in its parent's folder");
      // Listed like any session, with its parent; ended once it answered.
      await eventually(
        "the child ended",
        async () => (await statusOf(w, kids[0]!.sessionId)) === "ended" ? true : undefined,
      );
      const list: SessionListResponse = await (await w.user.api("/api/sessions")).json();
      const listed = [...list.sessions, ...list.persistedSessions]
        .find((s) => s.sessionId === kids[0]!.sessionId);
      assert.equal(listed?.parentId, parent);
      // Its conversation is stored and streamed like any other.
      const events = await storedEvents(w.user, kids[0]!.sessionId);
      assert.ok(events.some((e) => e.e.type === "agent_end"));
      // The parent's model got the answer as the tool result.
      await w.model.until(
        () =>
          w.model.requests.some((r) =>
            firstUser(r) === "PARENT-single" && requestText(r).includes("answer<CHILD-one")
          ),
        "the parent's model to read the answer",
      );
    });

    await st.step("eight parallel tasks run at most four at once", async () => {
      const parent = await spawn(w, "PARENT-parallel");
      const end = await toolEnd(w, parent);
      const d = detailsOf(end);
      assert.equal(d.mode, "parallel");
      assert.equal(d.runs.length, 8);
      for (const [i, r] of d.runs.entries()) {
        assert.equal(r.ok, true, r.text);
        assert.equal(r.text, `answer<CHILD-SLOW-p${i}>`);
        assert.ok(resultText(end).includes(`answer<CHILD-SLOW-p${i}>`));
      }
      const kids = await children(w, parent);
      assert.equal(kids.length, 8);
      // Each child's turn, from its own events' timestamps.
      const spans: [number, number][] = [];
      for (const k of kids) {
        const evs = await storedEvents(w.user, k.sessionId);
        const start = evs.find((e) => e.e.type === "agent_start")!.ts;
        const stop = evs.find((e) => e.e.type === "agent_end")!.ts;
        spans.push([start, stop]);
      }
      let most = 0;
      for (const [s] of spans) {
        most = Math.max(most, spans.filter(([a, b]) => a <= s && s < b).length);
      }
      assert.ok(most <= 4, `at most 4 children at once, saw ${most}`);
      assert.ok(most >= 2, `children ran side by side, saw ${most} at most`);
    });

    await st.step("a chain hands each step the previous step's answer", async () => {
      const parent = await spawn(w, "PARENT-chain");
      const end = await toolEnd(w, parent);
      const d = detailsOf(end);
      assert.equal(d.mode, "chain");
      assert.deepEqual(d.runs.map((r) => r.ok), [true, true]);
      assert.equal(d.runs[1]!.text, "answer<CHILD-c2 builds on: answer<CHILD-c1>>");
      assert.equal(resultText(end), "answer<CHILD-c2 builds on: answer<CHILD-c1>>");
      const kids = await children(w, parent);
      assert.deepEqual(kids.map((k) => k.sessionId), d.runs.map((r) => r.sessionId));
    });

    for (const kind of ["abort", "end"] as const) {
      await st.step(`a child is stopped when its parent gets '${kind}'`, async () => {
        const prompt = kind === "abort" ? "PARENT-stop" : "PARENT-end";
        const parent = await spawn(w, prompt);
        await w.model.withText(`CHILD-HANG-${kind === "abort" ? "stop" : "end"}`, 60_000);
        const [kid] = await children(w, parent);
        assert.ok(kid);
        assert.equal(await statusOf(w, kid.sessionId), "running");
        // While it works, the parent's tool call already links it (a partial result).
        await w.viewer.until(
          () =>
            w.viewer.eventsOf(parent).some((e) =>
              e.e.type === "tool_execution_update" &&
              JSON.stringify(e.e.partialResult).includes(kid.sessionId)
            ),
          "a partial result linking the child",
        );
        const res = await w.user.api(`/api/sessions/${parent}/input`, json("POST", { kind }));
        assert.equal(res.status, 200, await res.text());
        await eventually(
          "the child to end",
          async () => (await statusOf(w, kid.sessionId)) === "ended" ? true : undefined,
          20_000,
        );
      });
    }

    await st.step("a grandchild cannot start subagents (depth 2)", async () => {
      const parent = await spawn(w, "PARENT-nest");
      await toolEnd(w, parent);
      const [kid] = await children(w, parent);
      const [grand] = await children(w, kid!.sessionId);
      assert.ok(grand, "the child started a grandchild");
      assert.deepEqual(await children(w, grand.sessionId), []);
      const grandEvents = await storedEvents(w.user, grand.sessionId);
      const refused = grandEvents.find((e) => e.e.type === "tool_execution_end");
      assert.match(JSON.stringify(refused?.e.result), /depth 2 cannot start subagents/);
    });

    await st.step("a named agent definition gives the child its prompt and tools", async () => {
      await Deno.mkdir(join(w.home, ".baton", "agents"), { recursive: true });
      await Deno.writeTextFile(
        join(w.home, ".baton", "agents", "reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews code\ntools: read, ls\n---\n\nROLE-PROMPT-7731\n",
      );
      const parent = await spawn(w, "PARENT-role");
      const end = await toolEnd(w, parent);
      assert.equal(detailsOf(end).runs[0]!.ok, true, resultText(end));
      const req = w.model.requests.find((r) => firstUser(r) === "CHILD-role")!;
      assert.ok(
        requestText(req).includes("ROLE-PROMPT-7731"),
        "the role's prompt is in the system prompt",
      );
      assert.deepEqual((req.tools ?? []).map((t) => t.function.name).sort(), ["ls", "read"]);
      const [kid] = await children(w, parent);
      assert.equal(kid!.agent, "reviewer");

      const bad = await spawn(w, "PARENT-badrole");
      const badEnd = await toolEnd(w, bad);
      assert.match(resultText(badEnd), /Unknown agent definition: 'nobody'/);
      assert.deepEqual(await children(w, bad), [], "no child starts for an unknown role");
    });

    await st.step("another user sees neither the children nor the parent's list", async () => {
      const { signUp } = await import("./harness/client.ts");
      const bob = await signUp(w.relay.url, { name: "Bob" });
      const list: SessionListResponse = await (await w.user.api("/api/sessions")).json();
      const anyParent = [...list.sessions, ...list.persistedSessions].find((s) => s.parentId)!
        .parentId!;
      const res = await bob.api(`/api/sessions/${anyParent}/children`);
      assert.equal(res.status, 404);
      await res.body?.cancel();
      const missing = await bob.api(`/api/sessions/${crypto.randomUUID()}/children`);
      assert.equal(missing.status, 404);
      await missing.body?.cancel();
    });
  } finally {
    await closeWorld(w, st.ok);
  }
});
