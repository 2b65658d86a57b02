/**
 * Questions and approvals with a real runner and the mock model: the agent's
 * `ask_user` tool waits as a `question` event until a person answers (from
 * the session or from a notification), the answer is the tool's result, a
 * second answer is refused; `/api/push/answer`'s 403, 409 and 502; an
 * approval policy that holds a bash command for Approve or Deny; and the
 * `agent_needs_input` push payload, decrypted by the test push service.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { SessionEvent } from "../shared/protocol.ts";
import { errorCode, json, signUp, type User, Viewer } from "./harness/client.ts";
import { type Stack, withStack } from "./harness/in_process.ts";
import type { ChatRequest } from "./harness/mock_llm.ts";
import { PushService } from "./harness/push_service.ts";

const QUESTION = {
  questions: [{
    question: "Which database should the service use?",
    header: "Database",
    options: [
      { label: "PostgreSQL", description: "Scales out" },
      { label: "SQLite", description: "One file" },
      { label: "Both" },
    ],
  }],
};

/** Spawns a session whose first turn makes `calls`, then says "Done."; returns its id. */
async function spawnWith(
  s: Stack,
  calls: { name: string; args: Record<string, unknown>; id: string }[],
  then: { text: string }[] = [{ text: "Done." }],
): Promise<string> {
  s.llm.enqueue({ text: "One moment.", toolCalls: calls }, ...then);
  const res = await s.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: s.runnerId, prompt: "Set up the service", cwd: s.home }),
  );
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text).sessionId;
}

function answer(user: User, sessionId: string, toolCallId: string, text: string, key = false) {
  const send = key ? user.api : user.web;
  return send(`/api/sessions/${sessionId}/answer`, json("POST", { toolCallId, text }));
}

function pushAnswer(user: User, body: Record<string, unknown>, key = false) {
  return (key ? user.api : user.web)("/api/push/answer", json("POST", body));
}

/** The tool result the model received for `toolCallId` (the follow-up request's tool message). */
function toolResult(requests: ChatRequest[], toolCallId: string): string {
  for (const r of requests) {
    for (const m of r.messages) {
      if (m.role === "tool" && m.tool_call_id === toolCallId) {
        return typeof m.content === "string" ? m.content : JSON.stringify(m.content);
      }
    }
  }
  return "";
}

function eventOf(events: SessionEvent[], type: string, toolCallId: string) {
  return events.find((ev) => ev.e.type === type && ev.e.toolCallId === toolCallId)?.e;
}

Deno.test("ask_user waits as an event; the session's answer is the tool's result; a second is refused", async () => {
  await withStack({ relay: { allowSignup: true } }, async (s) => {
    const sessionId = await spawnWith(s, [{ name: "ask_user", args: QUESTION, id: "call_q1" }]);
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      viewer.subscribe(sessionId);
      const q = await viewer.waitForEvent(sessionId, "question", 60_000);
      assert.equal(q.e.toolCallId, "call_q1");
      assert.equal(q.e.kind, "question");
      assert.deepEqual(q.e.questions, QUESTION.questions);

      // A viewer that comes later (a reload) sees it waiting too.
      const late = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
      late.subscribe(sessionId);
      await late.waitForEvent(sessionId, "question");
      await late.close();

      // Another account cannot answer (nor learn that the session exists).
      const bob = await signUp(s.relay.url);
      assert.equal(await errorCode(await answer(bob, sessionId, "call_q1", "x"), 404), "not_found");
      assert.equal(
        await errorCode(await answer(s.user, sessionId, "call_nope", "x"), 409),
        "not_pending",
      );
      assert.equal(
        await errorCode(await answer(s.user, sessionId, "call_q1", "y".repeat(10_001)), 400),
        "invalid_body",
      );

      const res = await answer(s.user, sessionId, "call_q1", "SQLite", true);
      assert.equal(res.status, 200, await res.text());
      await viewer.waitForEvent(sessionId, "agent_end", 60_000);
      const done = eventOf(viewer.eventsOf(sessionId), "question_answered", "call_q1");
      assert.equal(done?.answer, "SQLite");
      assert.equal(done?.via, "session");
      assert.match(toolResult(s.llm.requests, "call_q1"), /The user answered:\nSQLite/);

      assert.equal(
        await errorCode(await answer(s.user, sessionId, "call_q1", "PostgreSQL"), 409),
        "not_pending",
      );
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("/api/push/answer: 403 without collab mode, answers with it, 409 after, 502 with the runner gone", async () => {
  await withStack({}, async (s) => {
    const sessionId = await spawnWith(s, [{ name: "ask_user", args: QUESTION, id: "call_p1" }]);
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      viewer.subscribe(sessionId);
      await viewer.waitForEvent(sessionId, "question", 60_000);
      const body = { sessionId, toolCallId: "call_p1", text: "PostgreSQL" };
      assert.equal(await errorCode(await pushAnswer(s.user, body), 403), "not_collab");
      assert.equal(
        (await (await s.user.web(`/api/sessions/${sessionId}/collab`)).json()).collab,
        false,
      );

      // Collab mode is switched by the browser session only.
      const byKey = await s.user.api(
        `/api/sessions/${sessionId}/collab`,
        json("PUT", { enabled: true }),
      );
      assert.equal(await errorCode(byKey, 403), "cookie_required");
      const on = await s.user.web(
        `/api/sessions/${sessionId}/collab`,
        json("PUT", { enabled: true }),
      );
      assert.deepEqual(await on.json(), { collab: true });
      assert.equal(await errorCode(await pushAnswer(s.user, body, true), 403), "cookie_required");

      const ok = await pushAnswer(s.user, body);
      assert.equal(ok.status, 200, await ok.text());
      assert.equal(await errorCode(await pushAnswer(s.user, body), 409), "not_pending");
      await viewer.waitForEvent(sessionId, "agent_end", 60_000);
      assert.equal(
        eventOf(viewer.eventsOf(sessionId), "question_answered", "call_p1")?.via,
        "push",
      );
      assert.match(toolResult(s.llm.requests, "call_p1"), /PostgreSQL/);

      // A second question, then the runner goes away while it waits.
      s.llm.enqueue({ toolCalls: [{ name: "ask_user", args: QUESTION, id: "call_p2" }] });
      await s.user.api(
        `/api/sessions/${sessionId}/input`,
        json("POST", { kind: "followUp", text: "And the cache?" }),
      );
      await viewer.until(
        () => !!eventOf(viewer.eventsOf(sessionId), "question", "call_p2"),
        "the second question",
        60_000,
      );
      await s.runner.stop();
      const gone = await pushAnswer(s.user, { ...body, toolCallId: "call_p2" });
      assert.equal(await errorCode(gone, 502), "runner_not_connected");
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("an approval policy holds a bash call: Approve runs it, Deny tells the agent why", async () => {
  await withStack({}, async (s) => {
    const put = await s.user.web(
      `/api/runners/${s.runnerId}/approvals`,
      json("PUT", { mode: "ask", commands: ["echo approve*"] }),
    );
    const putText = await put.text();
    assert.equal(put.status, 200, putText);
    assert.deepEqual(JSON.parse(putText).policy, {
      mode: "ask",
      tools: [],
      commands: ["echo approve*"],
    });
    const byKey = await s.user.api(
      `/api/runners/${s.runnerId}/approvals`,
      json("PUT", { mode: "auto" }),
    );
    assert.equal(await errorCode(byKey, 403), "cookie_required");

    const sessionId = await spawnWith(s, [
      { name: "bash", args: { command: "echo other-command-runs" }, id: "call_free" },
      { name: "bash", args: { command: "cd . && echo approve-me" }, id: "call_a1" },
    ]);
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      viewer.subscribe(sessionId);
      const q = await viewer.waitForEvent(sessionId, "question", 60_000);
      assert.equal(q.e.toolCallId, "call_a1");
      assert.equal(q.e.kind, "approval");
      assert.equal(q.e.toolName, "bash");
      assert.equal(q.e.summary, "cd . && echo approve-me");
      const events = () => viewer.eventsOf(sessionId);
      assert.ok(!eventOf(events(), "question", "call_free"), "an unlisted command is not held");
      // An API key never approves (an agent could hold one).
      assert.equal(
        await errorCode(await answer(s.user, sessionId, "call_a1", "approve", true), 403),
        "cookie_required",
      );
      const ok = await answer(s.user, sessionId, "call_a1", "approve");
      assert.equal(ok.status, 200, await ok.text());
      await viewer.waitForEvent(sessionId, "agent_end", 60_000);
      assert.equal(eventOf(events(), "question_answered", "call_a1")?.approved, true);
      assert.match(toolResult(s.llm.requests, "call_a1"), /approve-me/);

      // The session's own policy: every bash call asks. Deny with a reason.
      const mine = await s.user.web(
        `/api/sessions/${sessionId}/approvals`,
        json("PUT", { policy: { mode: "ask", tools: ["bash"] } }),
      );
      const got = await mine.json();
      assert.deepEqual(got.effective, { mode: "ask", tools: ["bash"], commands: [] });
      assert.deepEqual(got.runner.commands, ["echo approve*"]);
      s.llm.enqueue(
        { toolCalls: [{ name: "bash", args: { command: "echo denied-run" }, id: "call_d1" }] },
        { text: "Understood." },
      );
      const before = events().length;
      await s.user.api(
        `/api/sessions/${sessionId}/input`,
        json("POST", { kind: "followUp", text: "Again" }),
      );
      await viewer.until(
        () => !!eventOf(events(), "question", "call_d1"),
        "the approval of call_d1",
        60_000,
      );
      const no = await answer(s.user, sessionId, "call_d1", "deny: not on a Friday");
      assert.equal(no.status, 200, await no.text());
      await viewer.until(
        () => events().slice(before).some((ev) => ev.e.type === "agent_end"),
        "the second turn's end",
        60_000,
      );
      assert.equal(eventOf(events(), "question_answered", "call_d1")?.approved, false);
      const result = toolResult(s.llm.requests, "call_d1");
      assert.match(result, /The user denied this bash call: not on a Friday/);
      assert.doesNotMatch(result, /denied-run\n/);
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("agent_needs_input reaches the push service with option buttons and a reply in collab mode", async () => {
  await using service = new PushService();
  await withStack({ relay: { pushAllowedOrigins: [service.origin] } }, async (s) => {
    const sub = await service.subscribe();
    const res = await s.user.web(
      "/api/push/subscribe",
      json("POST", { endpoint: sub.endpoint, keys: sub.keys }),
    );
    assert.equal(res.status, 200, await res.text());

    // Not in collab mode: the text, no buttons.
    const first = await spawnWith(s, [{ name: "ask_user", args: QUESTION, id: "call_n1" }]);
    await service.until(
      () => service.of(sub.id).some((p) => p.payload.kind === "agent_needs_input"),
      "the first agent_needs_input",
      60_000,
    );
    const plain = service.of(sub.id).find((p) => p.payload.kind === "agent_needs_input")!;
    assert.equal(plain.payload.sessionId, first);
    assert.equal(plain.payload.toolCallId, "call_n1");
    assert.match(
      String(plain.payload.body),
      /^agent in "Set up the service" asks: Which database should the service use\?$/,
    );
    assert.equal(plain.payload.actions, undefined);
    assert.equal(plain.headers.get("urgency"), "high");

    // In collab mode: two of the options as buttons and an inline reply.
    await s.user.web(`/api/sessions/${first}/collab`, json("PUT", { enabled: true }));
    const r = await answer(s.user, first, "call_n1", "Both");
    assert.equal(r.status, 200, await r.text());
    s.llm.enqueue({ toolCalls: [{ name: "ask_user", args: QUESTION, id: "call_n2" }] });
    await s.user.api(
      `/api/sessions/${first}/input`,
      json("POST", { kind: "followUp", text: "Next" }),
    );
    await service.until(
      () => service.of(sub.id).some((p) => p.payload.toolCallId === "call_n2"),
      "the collab agent_needs_input",
      60_000,
    );
    const withButtons = service.of(sub.id).find((p) => p.payload.toolCallId === "call_n2")!;
    assert.deepEqual(withButtons.payload.actions, [
      { action: "option0", title: "PostgreSQL", answer: "PostgreSQL" },
      { action: "option1", title: "SQLite", answer: "SQLite" },
      { action: "reply", title: "Reply", type: "text", placeholder: "Your answer" },
    ]);

    // An approval: Approve and Deny.
    await s.user.web(
      `/api/sessions/${first}/approvals`,
      json("PUT", { policy: { mode: "ask", tools: ["bash"] } }),
    );
    await answer(s.user, first, "call_n2", "SQLite");
    s.llm.enqueue({ toolCalls: [{ name: "bash", args: { command: "ls" }, id: "call_n3" }] });
    await s.user.api(
      `/api/sessions/${first}/input`,
      json("POST", { kind: "followUp", text: "ls" }),
    );
    await service.until(
      () => service.of(sub.id).some((p) => p.payload.toolCallId === "call_n3"),
      "the approval's agent_needs_input",
      60_000,
    );
    const approval = service.of(sub.id).find((p) => p.payload.toolCallId === "call_n3")!;
    assert.match(String(approval.payload.body), /asks: approve bash: ls$/);
    assert.deepEqual(
      (approval.payload.actions as { action: string }[]).map((a) => a.action),
      ["approve", "deny"],
    );
    const ok = await pushAnswer(s.user, {
      sessionId: first,
      toolCallId: "call_n3",
      text: "approve",
    });
    assert.equal(ok.status, 200, await ok.text());
    assert.deepEqual(service.failures, []);
  });
});

Deno.test("a question answered from the phone's notification is withdrawn on the desktop, not on the phone", async () => {
  await using service = new PushService();
  await withStack({ relay: { pushAllowedOrigins: [service.origin] } }, async (s) => {
    const phone = await service.subscribe();
    const desk = await service.subscribe();
    for (const sub of [phone, desk]) {
      const res = await s.user.web(
        "/api/push/subscribe",
        json("POST", { endpoint: sub.endpoint, keys: sub.keys }),
      );
      assert.equal(res.status, 200, await res.text());
    }
    const sessionId = await spawnWith(s, [{ name: "ask_user", args: QUESTION, id: "call_d1" }]);
    await s.user.web(`/api/sessions/${sessionId}/collab`, json("PUT", { enabled: true }));
    const asked = (id: string) => service.of(id).some((p) => p.payload.toolCallId === "call_d1");
    await service.until(() => asked(phone.id) && asked(desk.id), "the question on both", 60_000);

    const ok = await pushAnswer(s.user, {
      sessionId,
      toolCallId: "call_d1",
      text: "SQLite",
      endpoint: phone.endpoint,
    });
    assert.equal(ok.status, 200, await ok.text());
    const withdrawn = (id: string) =>
      service.of(id).filter((p) => p.payload.toolCallId === "call_d1" && p.payload.resolved);
    await service.until(() => withdrawn(desk.id).length > 0, "the desktop's withdrawal", 30_000);
    const [w] = withdrawn(desk.id);
    assert.equal(w!.payload.resolved, "answered");
    assert.equal(w!.payload.tag, `session-${sessionId}`);
    assert.equal(w!.payload.actions, undefined);
    // The agent's turn ends (its "Done." may notify both); the phone never gets the withdrawal.
    await service.until(
      () => service.of(phone.id).some((p) => p.payload.kind === "agent_finished"),
      "the turn's end on the phone",
      60_000,
    );
    assert.deepEqual(withdrawn(phone.id), []);
    assert.deepEqual(service.failures, []);
  });
});

Deno.test("stopping the agent while it waits cancels the question (or held call); a late answer is refused", async () => {
  await withStack({}, async (s) => {
    const sessionId = await spawnWith(
      s,
      [{ name: "ask_user", args: QUESTION, id: "call_s1" }],
      [],
    );
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      viewer.subscribe(sessionId);
      await viewer.waitForEvent(sessionId, "question", 60_000);
      const stop = await s.user.api(
        `/api/sessions/${sessionId}/input`,
        json("POST", { kind: "abort", text: "" }),
      );
      assert.equal(stop.status, 200, await stop.text());
      const cancelled = await viewer.waitForEvent(sessionId, "question_cancelled", 30_000);
      assert.equal(cancelled.e.toolCallId, "call_s1");
      await viewer.waitForEvent(sessionId, "agent_end", 30_000);
      assert.equal(
        await errorCode(await answer(s.user, sessionId, "call_s1", "SQLite"), 409),
        "not_pending",
      );

      // The same for a held call: Stop ends its wait, and the call does not run.
      await s.user.web(
        `/api/sessions/${sessionId}/approvals`,
        json("PUT", { policy: { mode: "ask", tools: ["bash"] } }),
      );
      s.llm.enqueue({
        toolCalls: [{ name: "bash", args: { command: "echo held-run" }, id: "call_s2" }],
      });
      await s.user.api(
        `/api/sessions/${sessionId}/input`,
        json("POST", { kind: "followUp", text: "Run it" }),
      );
      await viewer.until(
        () => !!eventOf(viewer.eventsOf(sessionId), "question", "call_s2"),
        "the held call",
        60_000,
      );
      await s.user.api(
        `/api/sessions/${sessionId}/input`,
        json("POST", { kind: "abort", text: "" }),
      );
      await viewer.until(
        () => !!eventOf(viewer.eventsOf(sessionId), "question_cancelled", "call_s2"),
        "the held call's cancellation",
        30_000,
      );
      const end = viewer.eventsOf(sessionId).find((ev) =>
        ev.e.type === "tool_execution_end" && ev.e.toolCallId === "call_s2"
      );
      assert.doesNotMatch(JSON.stringify(end?.e ?? {}), /held-run\\n/);
    } finally {
      await viewer.close();
    }
  });
});
