import assert from "node:assert/strict";
import { join } from "node:path";
import type { SessionEvent } from "../shared/protocol.ts";
import { assertContiguous, errorCode, json, signUp, Viewer } from "./harness/client.ts";
import { type Stack, startTestRelay, withStack } from "./harness/in_process.ts";
import { MODEL } from "./harness/mock_llm.ts";
import { type RunnerProcess, startRunner, tempDir } from "./harness/procs.ts";

type World = Stack;

/** One relay, one runner (models mock-1 and mock-2) and one scripted model shared by the steps of a test. */
function withWorld(fn: (w: World) => Promise<void>, runnerEnv: Record<string, string> = {}) {
  return withStack({ models: ["mock-1", "mock-2"], runnerEnv }, fn);
}

async function spawn(w: World, body: Record<string, unknown>) {
  const res = await w.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: w.runnerId, cwd: w.home, model: MODEL, prompt: "", ...body }),
  );
  return { status: res.status, body: await res.json() };
}

function types(events: SessionEvent[]): string[] {
  return events.map((e) => e.e.type);
}

/** The number of agent_end events: one per finished run of the agent. */
function runs(v: Viewer, id: string): number {
  return v.eventsOf(id).filter((e) => e.e.type === "agent_end").length;
}

Deno.test("a spawned session runs a real bash tool call and the viewer sees every event in order", async () => {
  await withWorld(async (w) => {
    w.llm.enqueue(
      {
        text: "I will create the file.",
        toolCalls: [{
          name: "bash",
          args: { command: "echo made-by-agent > proof.txt && cat proof.txt" },
        }],
      },
      { text: ["The file ", "is there."] },
    );
    const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    try {
      const { status, body } = await spawn(w, { prompt: "Create proof.txt" });
      assert.equal(status, 200);
      assert.match(body.sessionId, /^[0-9a-f-]{36}$/);
      assert.equal(body.shareUrl, `${w.relay.baseUrl}/session/${body.sessionId}`);
      viewer.subscribe(body.sessionId);
      await viewer.waitForEvent(body.sessionId, "agent_end");

      // The tool really ran in the session's folder.
      assert.equal((await Deno.readTextFile(join(w.home, "proof.txt"))).trim(), "made-by-agent");

      const events = viewer.eventsOf(body.sessionId);
      assertContiguous(events);
      const t = types(events);
      assert.equal(t[0], "session_start");
      for (
        const expected of [
          "agent_start",
          "turn_start",
          "message_start",
          "message_update",
          "message_end",
          "tool_execution_start",
          "tool_execution_end",
          "turn_end",
          "agent_end",
        ]
      ) assert.ok(t.includes(expected), `missing ${expected} in ${t.join(" ")}`);
      assert.ok(t.indexOf("tool_execution_start") < t.indexOf("tool_execution_end"));
      const toolEnd = events.find((e) => e.e.type === "tool_execution_end")!.e;
      assert.equal(toolEnd.toolName, "bash");
      assert.equal(toolEnd.isError, false);
      assert.match(JSON.stringify(toolEnd.result), /made-by-agent/);
      const text = events
        .filter((e) => e.e.type === "message_update")
        .map((e) => (e.e.assistantMessageEvent as { delta?: string }).delta ?? "")
        .join("");
      assert.match(text, /The file is there\./);

      // The session is listed as running and idle, titled after its prompt.
      const list = await (await w.user.api("/api/sessions")).json();
      const s = list.sessions.find((x: { sessionId: string }) => x.sessionId === body.sessionId);
      assert.equal(s.status, "running");
      assert.equal(s.activity, "idle");
      assert.equal(s.title, "Create proof.txt");
      assert.equal(s.cwd, w.home);
      assert.deepEqual(s.model, MODEL);
      assert.equal(s.lastSeq, events.length);

      // The model saw the tool's output in its second request.
      assert.match(JSON.stringify(w.llm.requests[1]?.messages), /made-by-agent/);
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("the agent's tools never see the runner's credentials", async () => {
  const secrets = {
    BATON_RUNNER_API_KEY: "brt_not-for-agents",
    BATON_PASSWORD: "pw-not-for-agents",
    BATON_OWNER_PASSWORD: "owner-not-for-agents",
    BATON_AUTH_SECRET: "auth-not-for-agents",
  };
  await withWorld(async (w) => {
    w.llm.enqueue(
      {
        text: "Looking.",
        toolCalls: [{ name: "bash", args: { command: "env; echo env-listed" } }],
      },
      { text: "Done." },
    );
    const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    try {
      const { status, body } = await spawn(w, { prompt: "Show the environment" });
      assert.equal(status, 200);
      viewer.subscribe(body.sessionId);
      await viewer.waitForEvent(body.sessionId, "agent_end");
      const toolEnd = viewer.eventsOf(body.sessionId)
        .find((e) => e.e.type === "tool_execution_end")!.e;
      const output = JSON.stringify(toolEnd.result);
      assert.match(output, /env-listed/);
      // The rest of the runner's environment is there (it is the user's machine).
      assert.match(output, /PATH=/);
      assert.match(output, /HOME=/);
      // The runner's key (BATON_API_KEY here) and the passwords are not.
      assert.equal(output.includes(w.user.apiKey), false, "the runner's API key leaked");
      for (const [name, value] of Object.entries(secrets)) {
        assert.equal(output.includes(value), false, `${name} leaked`);
      }
      assert.doesNotMatch(
        output,
        /BATON_(API_KEY|RUNNER_API_KEY|PASSWORD|OWNER_PASSWORD|AUTH_SECRET)=/,
      );
      // Nor did the model get them.
      assert.equal(JSON.stringify(w.llm.requests).includes(w.user.apiKey), false);
    } finally {
      await viewer.close();
    }
  }, secrets);
});

Deno.test("a viewer that reconnects with its last seq gets exactly the events it missed", async () => {
  await withWorld(async (w) => {
    const first = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    const { body } = await spawn(w, { prompt: "first" });
    const id = body.sessionId;
    first.subscribe(id);
    await first.until(() => runs(first, id) === 1, "first run");
    const seen = first.eventsOf(id);
    const last = seen[seen.length - 1]!.seq;
    await first.close();

    // While nobody watches, the agent answers another prompt.
    w.llm.enqueue({ text: ["missed ", "answer"] });
    const input = await w.user.api(
      `/api/sessions/${id}/input`,
      json("POST", { kind: "prompt", text: "second" }),
    );
    assert.equal(input.status, 200);
    const deadline = Date.now() + 20_000;
    while (true) {
      const s = (await (await w.user.api(`/api/sessions/${id}`)).json()).session;
      if (s.activity === "idle" && s.lastSeq > last + 3) break;
      if (Date.now() > deadline) throw new Error("second run did not finish");
      await new Promise((r) => setTimeout(r, 50));
    }

    const again = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    try {
      again.subscribe(id, last);
      await again.waitFor((m) => m.t === "caught_up" && m.sessionId === id);
      const missed = again.eventsOf(id);
      assert.ok(missed.length > 0);
      assertContiguous(missed, last + 1);
      assert.ok(types(missed).includes("agent_end"));
      // Together they are exactly the stored log.
      const stored = await (await w.user.api(`/api/sessions/${id}/events?since=0`)).json();
      assert.deepEqual([...seen, ...missed], stored.events);

      // Live events keep flowing after the catch-up, without duplicates.
      w.llm.enqueue({ text: "live" });
      again.send({ t: "input", id: "i1", sessionId: id, kind: "prompt", text: "third" });
      await again.waitFor((m) => m.t === "input_ok" && m.id === "i1");
      await again.until(() => runs(again, id) === 2, "third run");
      assertContiguous(again.eventsOf(id), last + 1);
    } finally {
      await again.close();
    }
  });
});

Deno.test("steer reaches the working agent and follow-up waits for the turn to end", async () => {
  await withWorld(async (w) => {
    const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    try {
      // A slow first answer keeps the agent busy while we steer.
      w.llm.enqueue(
        {
          text: Array.from({ length: 30 }, (_, i) => `part${i} `),
          chunkDelayMs: 40,
          toolCalls: [{ name: "bash", args: { command: "echo step" } }],
        },
        { text: "steered answer" },
        { text: "follow-up answer" },
      );
      const { body } = await spawn(w, { prompt: "long task" });
      const id = body.sessionId;
      viewer.subscribe(id);
      await viewer.waitForEvent(id, "message_update");

      const busy = await w.user.api(
        `/api/sessions/${id}/input`,
        json("POST", { kind: "prompt", text: "x" }),
      );
      assert.equal(busy.status, 409, "a plain prompt while working is refused");
      assert.equal((await busy.json()).error.code, "busy");

      viewer.send({ t: "input", id: "s", sessionId: id, kind: "steer", text: "STEER-NOW" });
      viewer.send({ t: "input", id: "f", sessionId: id, kind: "followUp", text: "FOLLOW-LATER" });
      await viewer.waitFor((m) => m.t === "input_ok" && m.id === "s");
      await viewer.waitFor((m) => m.t === "input_ok" && m.id === "f");
      await w.llm.waitForRequests(3);
      await viewer.until(
        () => runs(viewer, id) >= 1 && w.llm.requests.length >= 3,
        "both answered",
      );

      const asText = (i: number) => JSON.stringify(w.llm.requests[i]?.messages ?? []);
      // The steer is delivered in the very next model request (after the tool result)...
      assert.match(asText(1), /STEER-NOW/);
      assert.doesNotMatch(asText(1), /FOLLOW-LATER/);
      // ...and the follow-up only once the steered turn is done.
      assert.match(asText(2), /FOLLOW-LATER/);
      assertContiguous(viewer.eventsOf(id));
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("abort stops the running turn and end closes the session", async () => {
  await withWorld(async (w) => {
    const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    try {
      w.llm.enqueue({ text: Array.from({ length: 200 }, () => "slow "), chunkDelayMs: 50 });
      const { body } = await spawn(w, { prompt: "never finishes" });
      const id = body.sessionId;
      viewer.subscribe(id);
      await viewer.waitForEvent(id, "message_update");
      viewer.send({ t: "input", id: "a", sessionId: id, kind: "abort" });
      await viewer.waitFor((m) => m.t === "input_ok" && m.id === "a");
      await viewer.waitForEvent(id, "agent_end", 10_000);
      const ends = viewer.eventsOf(id).filter((e) => e.e.type === "message_end");
      const lastEnd = ends[ends.length - 1]!.e.message as { stopReason: string };
      assert.equal(lastEnd.stopReason, "aborted");

      // The session still takes prompts after an abort.
      w.llm.enqueue({ text: "after abort" });
      viewer.send({ t: "input", id: "p", sessionId: id, kind: "prompt", text: "again" });
      await viewer.until(() => runs(viewer, id) === 2, "second run");

      viewer.send({ t: "input", id: "e", sessionId: id, kind: "end" });
      const end = await viewer.waitForEvent(id, "session_end");
      assert.equal(end.e.reason, "ended");
      const list = await (await w.user.api("/api/sessions")).json();
      assert.equal(list.sessions.some((s: { sessionId: string }) => s.sessionId === id), false);
      const past = list.persistedSessions.find((s: { sessionId: string }) => s.sessionId === id);
      assert.equal(past.status, "ended");
      assert.ok(past.endedAt);
      const onlyLive = await (await w.user.api("/api/sessions?includePersisted=false")).json();
      assert.deepEqual(onlyLive.persistedSessions, []);

      const late = await w.user.api(
        `/api/sessions/${id}/input`,
        json("POST", { kind: "prompt", text: "x" }),
      );
      assert.equal(late.status, 409);
      assert.equal((await late.json()).error.code, "session_ended");
      assertContiguous(viewer.eventsOf(id));
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("the runner lists its configured models and spawn checks folder and model first", async (t) => {
  const root = await tempDir("baton-roots-");
  await Deno.mkdir(join(root, "srv/a/inner"), { recursive: true });
  await Deno.mkdir(join(root, "srv/ab"), { recursive: true });
  await Deno.mkdir(join(root, "outside"), { recursive: true });
  await Deno.symlink(join(root, "outside"), join(root, "srv/a/escape"));
  await withWorld(async (w) => {
    await t.step("models", async () => {
      const res = await w.user.api(`/api/runners/${w.runnerId}/models`);
      const { models } = await res.json();
      assert.deepEqual(
        models.map((m: { provider: string; id: string }) => `${m.provider}/${m.id}`),
        [
          "mock/mock-1",
          "mock/mock-2",
        ],
      );
    });

    const rejected = async (cwd: string, code: string) => {
      const before = (await (await w.user.api("/api/sessions")).json()).sessions.length;
      const { status, body } = await spawn(w, { cwd, prompt: "hi" });
      assert.equal(status, 400, JSON.stringify(body));
      assert.equal(body.error.code, code);
      assert.match(body.error.message, /\S/);
      const after = await (await w.user.api("/api/sessions")).json();
      assert.equal(after.sessions.length, before, "nothing was stored");
      assert.equal(after.persistedSessions.length, 0);
    };
    await t.step("outside the roots", () => rejected(join(root, "outside"), "cwd_outside_roots"));
    await t.step(
      "'..' out of a root",
      () => rejected(`${root}/srv/a/inner/../../../outside`, "cwd_outside_roots"),
    );
    await t.step("symlink escape", () => rejected(join(root, "srv/a/escape"), "cwd_outside_roots"));
    await t.step("sibling prefix", () => rejected(join(root, "srv/ab"), "cwd_outside_roots"));
    await t.step("missing folder", () => rejected(join(root, "srv/a/missing"), "cwd_not_found"));
    await t.step("unknown model", async () => {
      const { status, body } = await spawn(w, {
        cwd: join(root, "srv/a"),
        model: { provider: "mock", id: "nope" },
      });
      assert.equal(status, 400);
      assert.equal(body.error.code, "unknown_model");
    });
    await t.step("inside a root, and the default folder is the first root", async () => {
      const inside = await spawn(w, { cwd: join(root, "srv/a/inner") });
      assert.equal(inside.status, 200);
      const dflt = await spawn(w, { cwd: null });
      assert.equal(dflt.status, 200);
      const s = (await (await w.user.api(`/api/sessions/${dflt.body.sessionId}`)).json()).session;
      assert.equal(s.cwd, join(root, "srv/a"));
    });
  }, { BATON_WORKSPACE_ROOTS: `${join(root, "srv/a")}/` });
  await Deno.remove(root, { recursive: true });
});

Deno.test("a runner without any model says so in words instead of failing later", async () => {
  const relay = await startTestRelay();
  let runner: RunnerProcess | undefined;
  try {
    const user = await signUp(relay.url);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey });
    const [r] = await (await user.api("/api/runners")).json();
    assert.deepEqual((await (await user.api(`/api/runners/${r.id}/models`)).json()).models, []);
    const res = await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: r.id, cwd: runner.home, prompt: "hello", model: null }),
    );
    const { sessionId } = await res.json();
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    try {
      viewer.subscribe(sessionId);
      const err = await viewer.waitForEvent(sessionId, "session_error");
      assert.match(String(err.e.message), /No model is configured on this runner/);
      assert.match(String(err.e.message), /models\.json/);
      const start = viewer.eventsOf(sessionId).find((e) => e.e.type === "session_start")!;
      assert.equal(start.e.model, null);
    } finally {
      await viewer.close();
    }
  } finally {
    await runner?.stop();
    await relay[Symbol.asyncDispose]();
  }
});

Deno.test("a session is renamed: the title is trimmed and checked, stored, and reaches every open tab", async (t) => {
  await withWorld(async (w) => {
    const byKey = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    const byCookie = await Viewer.connect(w.relay.url, { cookie: w.user.cookie });
    const rename = (id: string, body: unknown, as = w.user.api) =>
      as(`/api/sessions/${id}`, json("PATCH", body, { origin: w.relay.url }));
    const titleOf = async (id: string) =>
      (await (await w.user.api(`/api/sessions/${id}`)).json()).session.title;
    try {
      for (const v of [byKey, byCookie]) v.send({ t: "watch" });
      // Started without a prompt: the first prompt would title it, unless it was renamed first.
      const { body } = await spawn(w, { prompt: "" });
      const id: string = body.sessionId;
      byKey.subscribe(id);
      await byKey.waitForEvent(id, "session_start");

      await t.step("a good title is trimmed, answered and sent to every watching tab", async () => {
        const res = await rename(id, { title: "  Fix the login bug  " }, w.user.web);
        assert.equal(res.status, 200);
        const { session } = await res.json();
        assert.equal(session.sessionId, id);
        assert.equal(session.title, "Fix the login bug");
        for (const v of [byKey, byCookie]) {
          await v.waitFor((m) =>
            m.t === "session" && m.session.sessionId === id &&
            m.session.title === "Fix the login bug"
          );
        }
        assert.equal(await titleOf(id), "Fix the login bug");
        const listed = (await (await w.user.api("/api/sessions")).json()).sessions;
        assert.equal(
          listed.find((s: { sessionId: string }) => s.sessionId === id).title,
          "Fix the login bug",
        );
      });

      await t.step("the first prompt no longer titles a renamed session", async () => {
        const runs0 = runs(byKey, id);
        const sent = await w.user.api(
          `/api/sessions/${id}/input`,
          json("POST", { kind: "prompt", text: "first words of the session" }),
        );
        assert.equal(sent.status, 200);
        await sent.body?.cancel();
        await byKey.until(() => runs(byKey, id) > runs0, "the prompt's run");
        assert.equal(await titleOf(id), "Fix the login bug");
      });

      await t.step("bad titles get 400 invalid_body and change nothing", async () => {
        const bad: [string, unknown][] = [
          ["empty", { title: "" }],
          ["only spaces", { title: "   \u3000 " }],
          ["201 characters", { title: "x".repeat(201) }],
          ["a line break", { title: "two\nlines" }],
          ["a tab", { title: "a\tb" }],
          ["a bell", { title: "ring\u0007" }],
          ["DEL", { title: "x\u007f" }],
          ["a line separator", { title: "a\u2028b" }],
          ["a number", { title: 42 }],
          ["null", { title: null }],
          ["no title", {}],
        ];
        for (const [what, b] of bad) {
          assert.equal(await errorCode(await rename(id, b), 400, what), "invalid_body", what);
        }
        assert.equal(
          await errorCode(
            await w.user.api(`/api/sessions/${id}`, {
              method: "PATCH",
              headers: { "content-type": "application/json" },
              body: "{not json",
            }),
            400,
            "bad json",
          ),
          "bad_json",
        );
        assert.equal(await titleOf(id), "Fix the login bug");
        // Any script or emoji is fine, and 200 characters is the longest title.
        const accented = await rename(id, { title: "Ünïcode 🙂 ok" });
        assert.equal((await accented.json()).session.title, "Ünïcode 🙂 ok");
        const res = await rename(id, { title: "y".repeat(200) });
        assert.equal((await res.json()).session.title, "y".repeat(200));
      });

      await t.step(
        "a missing id is 404, and a cookie from a foreign origin is refused",
        async () => {
          assert.equal(
            await errorCode(await rename(crypto.randomUUID(), { title: "x" }), 404),
            "not_found",
          );
          const foreign = await w.user.web(
            `/api/sessions/${id}`,
            json("PATCH", { title: "from elsewhere" }, { origin: "https://evil.example" }),
          );
          assert.equal(await errorCode(foreign, 403), "bad_origin");
          assert.equal(await titleOf(id), "y".repeat(200));
        },
      );

      await t.step("an ended session can be renamed too", async () => {
        byKey.send({ t: "input", id: "end", sessionId: id, kind: "end" });
        await byKey.waitForEvent(id, "session_end");
        const res = await rename(id, { title: "Done: login bug" });
        assert.equal((await res.json()).session.status, "ended");
        assert.equal(await titleOf(id), "Done: login bug");
      });
    } finally {
      await byKey.close();
      await byCookie.close();
    }
  });
});
