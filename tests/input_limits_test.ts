/**
 * Limits on what a caller sends, checked the same way on every path in:
 * an input's length over HTTP and over the viewer socket, control
 * characters in the paths a runner would resolve, JSON nested too deep in
 * any body or message.
 *
 * @module
 */
import assert from "node:assert/strict";
import { MAX_INPUT_TEXT } from "../shared/protocol.ts";
import { errorCode, json, signUp, type User, Viewer } from "./harness/client.ts";
import { FakeRunner, runnerToken, spawnSession } from "./harness/fake_runner.ts";
import { startTestRelay, type TestRelay } from "./harness/in_process.ts";

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
    await t.step("a path with spaces and non-ASCII letters is still a path", async () => {
      const res = await w.user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: w.runner.runnerId, prompt: "hi", cwd: "/tmp/My Projects/café" }),
      );
      assert.equal(res.status, 200, await res.text());
    });
  });
});
