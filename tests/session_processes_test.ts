/**
 * What a session's agent leaves running ends with the session: a real
 * runner, the mock model, and a bash tool call that starts a detached
 * `sleep` (setsid nohup: it leaves the worker's process tree at once), or
 * under the sandbox one that runs in the foreground (bubblewrap ends what a
 * command detached when the command ends). After
 * the session ends, or its runner stops, no process of it is left; while it
 * merely sleeps the process runs on (a dev server under live preview). With
 * the sandbox off (`none`) and on (`basic`: bash in its own PID namespace).
 */
import assert from "node:assert/strict";
import { json, Viewer } from "./harness/client.ts";
import { type Stack, withStack } from "./harness/in_process.ts";
import { MODEL } from "./harness/mock_llm.ts";
import { eventually } from "./harness/wait.ts";
import { markedProcesses } from "../runner/platform/process_tree.ts";
import { SESSION_MARKER_ENV } from "../runner/workspace/ports.ts";

const haveBwrap = Deno.build.os === "linux" &&
  (await new Deno.Command("sh", { args: ["-c", "command -v bwrap && command -v socat"] }).output()
    .then((o) => o.success, () => false));

/** The session's processes still running whose command line is a `sleep`. */
async function sleeps(sessionId: string): Promise<number[]> {
  const out: number[] = [];
  for (const pid of await markedProcesses({ name: SESSION_MARKER_ENV, value: sessionId })) {
    const cmd = await Deno.readTextFile(`/proc/${pid}/cmdline`).catch(() => "");
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`).catch(() => "");
    if (cmd.startsWith("sleep\0") && !/\) Z /.test(stat)) out.push(pid);
  }
  return out;
}

const DETACHED = "setsid nohup sleep 1000 >/dev/null 2>&1 & echo started";
/** A tool call still running (the sandbox's `bwrap` ends what a command detached with it). */
const FOREGROUND = "sleep 1000";

/** Spawns a session whose agent starts a sleep; resolves once it runs. */
async function startSleep(w: Stack, viewer: Viewer, command = DETACHED): Promise<string> {
  const call = { toolCalls: [{ name: "bash", args: { command, timeout: 600 } }] };
  // The mock's answers are one queue: a turn still in its tool call takes no second one.
  if (command === DETACHED) w.llm.enqueue(call, { text: "It runs." });
  else w.llm.enqueue(call);
  const res = await w.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: w.runnerId, cwd: w.home, model: MODEL, prompt: "start it" }),
  );
  const body = await res.text();
  assert.equal(res.status, 200, body);
  const { sessionId } = JSON.parse(body);
  viewer.subscribe(sessionId);
  if (command === DETACHED) await viewer.waitForEvent(sessionId, "agent_end");
  await eventually("the sleep", async () => (await sleeps(sessionId)).length || undefined);
  return sessionId;
}

async function end(w: Stack, sessionId: string): Promise<void> {
  const res = await w.user.api(`/api/sessions/${sessionId}/input`, json("POST", { kind: "end" }));
  assert.equal(res.status, 200, await res.text());
}

async function gone(sessionId: string, what: string): Promise<void> {
  await eventually(what, async () => (await sleeps(sessionId)).length === 0 || undefined, 15_000);
}

for (const mode of ["none", "basic"] as const) {
  Deno.test({
    name:
      `a process a session started and detached ends when the session ends or its runner stops (sandbox ${mode})`,
    ignore: Deno.build.os !== "linux" || (mode === "basic" && !haveBwrap),
    async fn() {
      await withStack(
        { runnerEnv: { BATON_SANDBOX: mode, BATON_SLEEP_AFTER: "off" } },
        async (w) => {
          const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
          try {
            // Under the sandbox a detached process ends with its command: a tool call in flight.
            const command = mode === "none" ? DETACHED : FOREGROUND;
            const ended = await startSleep(w, viewer, command);
            // The worker's bash tool is the platform's agent shell, and says which shell it is.
            const tools = (w.llm.requests[0]?.tools ?? []) as {
              function: { name: string; description?: string };
            }[];
            const bash = tools.find((t) => t.function.name === "bash");
            assert.match(bash?.function.description ?? "", /^Runs a command with bash\. /);
            const stopped = await startSleep(w, viewer, command);
            await end(w, ended);
            await viewer.waitForEvent(ended, "session_end");
            await gone(ended, "the ended session's sleep to end");
            assert.ok(
              (await sleeps(stopped)).length > 0,
              "another session's process is left alone",
            );
            await w.runner.stop();
            await gone(stopped, "the stopped runner's session's sleep to end");
          } finally {
            await viewer.close();
          }
        },
      );
    },
  });
}

Deno.test({
  name:
    "a sleeping session's detached process runs on (a previewed server); ending the session ends it",
  ignore: Deno.build.os !== "linux",
  async fn() {
    await withStack(
      { runnerEnv: { BATON_SANDBOX: "none", BATON_SLEEP_AFTER: "1s" } },
      async (w) => {
        const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
        try {
          const id = await startSleep(w, viewer);
          await viewer.waitForEvent(id, "session_sleep", 15_000);
          // The worker is gone (the sleep's marker is all that ties it to the session).
          await new Promise((r) => setTimeout(r, 500));
          assert.ok((await sleeps(id)).length > 0, "the process outlives the worker's sleep");
          await end(w, id);
          await gone(id, "the sleeping session's process to end with it");
        } finally {
          await viewer.close();
        }
      },
    );
  },
});
