/**
 * A worker that does not start its session in time (here: a global extension
 * whose factory never returns, as one waiting on a network that does not
 * answer would): the session ends with an error that names the step, its
 * worker is gone, and the runner's next session starts as usual.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { json, Viewer } from "./harness/client.ts";
import { spawnOnStack, withStack } from "./harness/in_process.ts";
import { processAlive } from "./harness/procs.ts";
import { eventually } from "./harness/wait.ts";

Deno.test({
  name:
    "a session whose worker does not start in time ends with an error naming the step, and the next one starts",
  ignore: Deno.build.os !== "linux",
  async fn() {
    await withStack({ runnerEnv: { BATON_START_TIMEOUT: "3s" } }, async (w) => {
      const extensions = join(w.home, ".baton", "extensions");
      await Deno.mkdir(extensions, { recursive: true });
      const stuck = join(extensions, "stuck.ts");
      await Deno.writeTextFile(
        stuck,
        "export default async function () {\n  await new Promise(() => {});\n}\n",
      );
      const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
      try {
        const id = await spawnOnStack(w, "Hello");
        viewer.subscribe(id);
        // The worker the daemon gave the session (recorded as it starts).
        const entry = join(w.home, ".baton/runner/sessions", `${id}.json`);
        const pid: number = await eventually("the session's worker", async () => {
          const text = await Deno.readTextFile(entry).catch(() => null);
          return text ? JSON.parse(text).pid : undefined;
        });
        const end = await viewer.waitForEvent(id, "session_end", 30_000);
        assert.equal(end.e.reason, "error");
        assert.match(
          String(end.e.message),
          /^The agent did not start within 3 s: it was still loading extensions, skills and pi packages/,
        );
        assert.equal(viewer.eventsOf(id).some((e) => e.e.type === "session_start"), false);
        const session = (await (await w.user.api(`/api/sessions/${id}`)).json()).session;
        assert.equal(session.status, "error");
        // Its worker is gone, not left loading.
        await eventually("the worker to exit", () => !processAlive(pid) || undefined, 10_000);
        assert.match(w.runner.proc.output(), /did not start within 3 s \(still loading extensions/);

        // The extension fixed, the runner's next session starts and answers.
        await Deno.remove(stuck);
        w.llm.enqueue({ text: "Hi there." });
        const next = await spawnOnStack(w, "Hello again");
        viewer.subscribe(next);
        await viewer.waitForEvent(next, "agent_end", 60_000);
        const texts = viewer.eventsOf(next).filter((e) => e.e.type === "message_end")
          .map((e) => JSON.stringify(e.e));
        assert.ok(texts.some((t) => t.includes("Hi there.")), texts.join("\n"));
      } finally {
        await viewer.close();
      }
    });
  },
});

Deno.test({
  name:
    "a sleeping session whose worker does not wake in time sleeps again with the error, and the next input wakes it with its memory",
  ignore: Deno.build.os !== "linux",
  async fn() {
    await withStack(
      { runnerEnv: { BATON_START_TIMEOUT: "3s", BATON_SLEEP_AFTER: "1s" } },
      async (w) => {
        const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
        try {
          w.llm.enqueue({ text: "Noted: the number is 7." });
          const id = await spawnOnStack(w, "Remember 7");
          viewer.subscribe(id);
          await viewer.waitForEvent(id, "agent_end", 60_000);
          await viewer.waitForEvent(id, "session_sleep", 15_000);

          const stuck = join(w.home, ".baton", "extensions", "stuck.ts");
          await Deno.mkdir(join(w.home, ".baton", "extensions"), { recursive: true });
          await Deno.writeTextFile(
            stuck,
            "export default async () => await new Promise(() => {});\n",
          );
          const input = (text: string) =>
            w.user.api(`/api/sessions/${id}/input`, json("POST", { kind: "prompt", text }));
          const refused = await input("Which number?");
          const body = await refused.text();
          assert.equal(refused.status, 504, body);
          assert.equal(JSON.parse(body).error.code, "start_timeout", body);
          assert.match(JSON.parse(body).error.message, /did not start within 3 s/);
          const error = await viewer.waitForEvent(id, "session_error", 15_000);
          assert.match(
            String(error.e.message),
            /^The agent did not start within 3 s: it was still loading extensions.*The next input tries again$/,
          );
          await eventually(
            "the session to sleep again",
            () =>
              viewer.eventsOf(id).filter((e) => e.e.type === "session_sleep").length >= 2 ||
              undefined,
          );
          const session = (await (await w.user.api(`/api/sessions/${id}`)).json()).session;
          assert.equal(session.status, "running", "the session is still open");
          assert.equal(session.activity, "asleep");

          await Deno.remove(stuck);
          w.llm.enqueue({ text: "It was 7." });
          const before = w.llm.requests.length;
          const ok = await input("Which number?");
          assert.equal(ok.status, 200, await ok.text());
          await eventually(
            "the answer",
            () =>
              viewer.eventsOf(id).filter((e) => e.e.type === "agent_end").length >= 2 || undefined,
            60_000,
          );
          const asked = JSON.stringify(w.llm.requests.slice(before));
          assert.match(asked, /Remember 7/, "the woken agent lost its conversation");
        } finally {
          await viewer.close();
        }
      },
    );
  },
});
