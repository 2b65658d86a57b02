/**
 * Limits on what a caller sends, checked the same way on every path in:
 * an input's length over HTTP and over the viewer socket, control
 * characters in the paths a runner would resolve, JSON nested too deep in
 * any body or message.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { MAX_INPUT_TEXT } from "../shared/protocol.ts";
import { errorCode, json, signUp, type User, Viewer } from "./harness/client.ts";
import { FakeRunner, runnerToken, spawnSession } from "./harness/fake_runner.ts";
import { startTestRelay, type TestRelay, withStack } from "./harness/in_process.ts";
import { MODEL } from "./harness/mock_llm.ts";

interface World {
  relay: TestRelay;
  user: User;
  runner: FakeRunner;
  sessionId: string;
}

/** An in-process relay, a user, a fake runner of theirs and a session on it. */
async function withWorld(fn: (w: World) => Promise<void>): Promise<void> {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const runner = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
  try {
    const sessionId = await spawnSession(user, runner.runnerId);
    await fn({ relay, user, runner, sessionId });
  } finally {
    await runner.close();
  }
}

/** The `input` requests the runner got, as their texts' lengths. */
function inputsSeen(r: FakeRunner): number[] {
  return r.requests.filter((q) => q.op === "input")
    .map((q) => (q.data as { text: string }).text.length);
}

Deno.test("an input's text has one limit over HTTP and over the viewer socket", async (t) => {
  await withWorld(async (w) => {
    const at = "x".repeat(MAX_INPUT_TEXT);
    const over = "x".repeat(MAX_INPUT_TEXT + 1);

    await t.step(
      "HTTP: the limit is accepted, one more character is 400 text_too_long",
      async () => {
        const path = `/api/sessions/${w.sessionId}/input`;
        const ok = await w.user.api(path, json("POST", { kind: "prompt", text: at }));
        assert.equal(ok.status, 200, await ok.text());
        const res = await w.user.api(path, json("POST", { kind: "prompt", text: over }));
        assert.equal(await errorCode(res, 400, "over the limit"), "text_too_long");
        assert.deepEqual(inputsSeen(w.runner), [MAX_INPUT_TEXT], "the runner got only the first");
      },
    );

    await t.step("viewer socket: the same limit, the same code in an error frame", async () => {
      const v = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
      try {
        for (const [id, text] of [["at", at], ["over", over]]) {
          v.send({ t: "input", id, sessionId: w.sessionId, kind: "steer", text });
        }
        const answered = (id: string) => (m: { t: string; id?: string | number }) =>
          (m.t === "input_ok" || m.t === "error") && m.id === id;
        const atAnswer = await v.waitFor(answered("at"));
        assert.equal(atAnswer.t, "input_ok", JSON.stringify(atAnswer));
        const overAnswer = await v.waitFor(answered("over"));
        assert.equal(overAnswer.t, "error", JSON.stringify(overAnswer).slice(0, 300));
        assert.equal((overAnswer as { code?: string }).code, "text_too_long");
        assert.deepEqual(inputsSeen(w.runner), [MAX_INPUT_TEXT, MAX_INPUT_TEXT]);
      } finally {
        await v.close();
      }
    });

    await t.step("a spawn's prompt has the same limit", async () => {
      const res = await w.user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: w.runner.runnerId, prompt: over, cwd: "/fake" }),
      );
      assert.equal(await errorCode(res, 400, "prompt over the limit"), "text_too_long");
      assert.equal(w.runner.requests.filter((q) => q.op === "spawn").length, 1, "no new spawn");
    });
  });
});

Deno.test("paths with NUL or control characters are refused with 400 before any runner sees them", async (t) => {
  await withWorld(async (w) => {
    const spawnsBefore = w.runner.requests.filter((q) => q.op === "spawn").length;
    for (
      const cwd of ["/tmp/a\u0000b", "\u0000", "/tmp/line\nbreak", "/tmp/\u001b[31m", "/tmp/\u007f"]
    ) {
      await t.step(`spawn cwd ${JSON.stringify(cwd)}`, async () => {
        const res = await w.user.api(
          "/api/runners/spawn",
          json("POST", { runnerId: w.runner.runnerId, prompt: "hi", cwd }),
        );
        assert.equal(await errorCode(res, 400, JSON.stringify(cwd)), "invalid_body");
      });
    }
    assert.equal(
      w.runner.requests.filter((q) => q.op === "spawn").length,
      spawnsBefore,
      "the runner was asked for no spawn",
    );
    await t.step("a recent folder to dismiss", async () => {
      const res = await w.user.api(
        `/api/runners/${w.runner.runnerId}/recent-folders`,
        json("DELETE", { path: "/tmp/a\u0000b" }),
      );
      assert.equal(await errorCode(res, 400, "NUL path"), "invalid_body");
    });
    await t.step("a listener's and a webhook's cwd (spawned from later)", async () => {
      const listener = await w.user.api(
        `/api/runners/${w.runner.runnerId}/trigger-listeners`,
        json("POST", { triggerType: "cron:tick", prompt: "tick", cwd: "/tmp/a\u0000b" }),
      );
      assert.equal(await errorCode(listener, 400, "listener cwd"), "invalid_body");
      const hook = await w.user.api(
        "/api/webhooks",
        json("POST", { name: "n", source: "custom", runnerId: w.runner.runnerId, cwd: "\u0000" }),
      );
      assert.equal(await errorCode(hook, 400, "webhook cwd"), "invalid_body");
    });
    await t.step("a path with spaces and non-ASCII letters is still a path", async () => {
      const res = await w.user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: w.runner.runnerId, prompt: "hi", cwd: "/tmp/My Projects/café" }),
      );
      assert.equal(res.status, 200, await res.text());
    });
  });
});

/** `levels` arrays nested in one another, as JSON text. */
function nested(levels: number): string {
  return "[".repeat(levels) + "]".repeat(levels);
}

/** A JSON body whose `payload.deep` nests `levels` arrays. */
function deepTrigger(type: string, levels: number): string {
  return `{"type":${JSON.stringify(type)},"payload":{"deep":${nested(levels)}}}`;
}

const post = (body: string): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/json" },
  body,
});

Deno.test("a trigger payload nested 200,000 levels is 400 too_deep at once, to a session or broadcast", async (t) => {
  await withWorld(async (w) => {
    const { user, runner, sessionId } = w;
    // A running session subscribed to cron:tick, and a listener that spawns on it.
    runner.send({
      t: "service_announce",
      triggerDefs: [{ type: "cron:tick", label: "Tick", params: [] }],
      panels: [],
      sigils: [],
    });
    runner.sendEvents(sessionId, [
      { seq: 1, ts: Date.now(), e: { type: "session_start", cwd: "/fake", model: null } },
    ]);
    await runner.waitForAck(sessionId, 1);
    const sub = await user.api(
      `/api/sessions/${sessionId}/trigger-subscriptions`,
      json("POST", { triggerType: "cron:tick" }),
    );
    assert.equal(sub.status, 200, await sub.text());
    const listener = await user.api(
      `/api/runners/${runner.runnerId}/trigger-listeners`,
      json("POST", { triggerType: "cron:tick", prompt: "tick", cwd: "/fake" }),
    );
    assert.ok(listener.status < 300, await listener.text());
    const ops = () => runner.requests.map((q) => q.op).filter((op) => op !== "models");
    const before = ops();

    await t.step(
      "into a session: 400 too_deep, quickly, and the runner hears nothing",
      async () => {
        const started = Date.now();
        const res = await user.api(
          `/api/sessions/${sessionId}/trigger`,
          post(deepTrigger("x:y", 200_000)),
        );
        assert.equal(await errorCode(res, 400, "deep trigger"), "too_deep");
        assert.ok(Date.now() - started < 5_000, `answered in ${Date.now() - started} ms`);
        const history = await (await user.api(`/api/sessions/${sessionId}/triggers`)).json();
        assert.deepEqual(history.triggers, [], "nothing recorded");
      },
    );

    await t.step("broadcast: 400 too_deep, not a silent success that reached no one", async () => {
      const res = await user.api(
        `/api/runners/${runner.runnerId}/trigger-broadcast`,
        post(deepTrigger("cron:tick", 200_000)),
      );
      assert.equal(await errorCode(res, 400, "deep broadcast"), "too_deep");
      await runner.barrier();
      assert.deepEqual(ops(), before, "nothing delivered or spawned");
    });

    await t.step(
      "just past the cap is refused too; at the cap it is delivered and spawns",
      async () => {
        // The body itself and `payload` are two levels: 63 more make 65.
        const over = await user.api(
          `/api/runners/${runner.runnerId}/trigger-broadcast`,
          post(deepTrigger("cron:tick", 63)),
        );
        assert.equal(await errorCode(over, 400, "65 levels"), "too_deep");
        const ok = await user.api(
          `/api/runners/${runner.runnerId}/trigger-broadcast`,
          post(deepTrigger("cron:tick", 62)),
        );
        const body = await ok.json();
        assert.equal(ok.status, 200, JSON.stringify(body));
        assert.equal(body.delivered, 1, JSON.stringify(body));
        assert.equal(body.spawned, 1, JSON.stringify(body));
        await runner.until(() => ops().includes("trigger"), "the delivered trigger");
        const delivered = runner.requests.find((q) => q.op === "trigger")!;
        assert.equal(
          JSON.stringify((delivered.data as { trigger: { payload: unknown } }).trigger.payload),
          `{"deep":${nested(62)}}`,
        );
      },
    );
  });
});

Deno.test("webhook fire, sign-in and the two sockets refuse JSON nested too deep", async (t) => {
  await withWorld(async (w) => {
    await t.step("better-auth's routes get 400 too_deep before better-auth parses", async () => {
      const res = await fetch(`${w.relay.url}/api/auth/sign-in/email`, post(nested(200_000)));
      assert.equal(await errorCode(res, 400, "sign-in"), "too_deep");
    });

    await t.step("a webhook delivery, signed: 400 too_deep and no session", async () => {
      const created = await w.user.api(
        "/api/webhooks",
        json("POST", {
          name: "Deep",
          source: "custom",
          runnerId: w.runner.runnerId,
          cwd: "/fake",
          // Signed the legacy way below, which replay protection refuses first.
          requireReplayProtection: false,
        }),
      );
      const { webhook: hook } = await created.json();
      assert.equal(created.status, 201, JSON.stringify(hook));
      const body = `{"type":"push","x":${nested(200_000)}}`;
      const spawns = w.runner.requests.filter((q) => q.op === "spawn").length;
      const res = await fetch(`${w.relay.url}/api/webhooks/${hook.id}/fire`, {
        ...post(body),
        headers: {
          "content-type": "application/json",
          "x-webhook-signature": createHmac("sha256", hook.secret).update(body).digest("hex"),
        },
      });
      assert.equal(await errorCode(res, 400, "deep delivery"), "too_deep");
      assert.equal(w.runner.requests.filter((q) => q.op === "spawn").length, spawns);
    });

    await t.step("a viewer message: a too_deep error frame, and the socket goes on", async () => {
      const v = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
      try {
        v.ws.send(`{"t":"input","sessionId":"x","kind":"prompt","text":${nested(200_000)}}`);
        v.send({ t: "ping" });
        await v.waitFor((m) => m.t === "pong");
        const errors = v.messages.filter((m) => m.t === "error");
        assert.deepEqual(errors.map((m) => (m as { code: string }).code), ["too_deep"]);
      } finally {
        await v.close();
      }
    });

    await t.step("a runner message: a too_deep error frame, and the link goes on", async () => {
      const from = w.runner.errors.length;
      w.runner.sendRaw(`{"t":"call","id":7,"op":"triggers.list","data":${nested(200_000)}}`);
      await w.runner.barrier();
      assert.deepEqual(w.runner.errors.slice(from).map((e) => e.code), ["too_deep"]);
    });
  });
});

Deno.test("a trigger payload nested up to the cap reaches a real runner's agent and comes back in its events", async () => {
  await withStack({}, async (s) => {
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      const spawned = await s.user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: s.runnerId, cwd: s.home, model: MODEL, prompt: "hello" }),
      );
      const { sessionId } = await spawned.json();
      assert.equal(spawned.status, 200);
      viewer.subscribe(sessionId);
      await viewer.waitForEvent(sessionId, "agent_end");
      // The body and `payload` are two levels: 62 more make the HTTP cap of 64.
      const res = await s.user.api(
        `/api/sessions/${sessionId}/trigger`,
        post(deepTrigger("x:y", 62)),
      );
      assert.equal(res.status, 200, await res.text());
      const delivered = await viewer.waitForEvent(sessionId, "trigger_delivered", 30_000);
      assert.equal(delivered.e.truncated, undefined, "the event is whole");
      assert.equal(
        JSON.stringify((delivered.e.trigger as { payload: unknown }).payload),
        `{"deep":${nested(62)}}`,
      );
    } finally {
      await viewer.close();
    }
  });
});
