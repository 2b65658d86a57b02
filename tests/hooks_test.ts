/**
 * Hooks with a real relay, a real runner (under its default sandbox where
 * bubblewrap is installed) and the mock model calling tools: a
 * `preToolUse` hook blocks a bash command and the agent reads why;
 * `sessionStart`, `postToolUse` and `stop` hooks run with the event on
 * stdin; a hook that hangs is killed at its limit and the session goes on.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  exists,
  haveBwrap,
  noticesOf,
  resultsOf,
  spawnIn,
  withAgentWorld,
} from "./harness/agent_world.ts";
import { processesWith } from "./harness/mcp.ts";
import { tempDir } from "./harness/procs.ts";
import { eventually } from "./harness/wait.ts";

const GUARD = `input=$(cat)
case "$input" in
  *forbidden-word*) echo "Commands with forbidden-word are not allowed here" >&2; exit 2;;
esac
exit 0
`;

async function readJsonLines(path: string): Promise<Record<string, unknown>[]> {
  const text = await Deno.readTextFile(path);
  return text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
}

Deno.test("a preToolUse hook blocks a bash command and the agent sees why; sessionStart, postToolUse and stop hooks run", async () => {
  const dir = await tempDir("baton-hooks-");
  await Deno.writeTextFile(join(dir, "guard.sh"), GUARD);
  const marks = (name: string) => join(dir, name);
  await withAgentWorld({
    hooks: {
      sessionStart: [{
        hooks: [
          { type: "command", command: `cat > ${marks("start.json")}` },
          // Hooks run under the session's sandbox: ~/.ssh is hidden from them too.
          { command: `cat "$HOME/.ssh/id_rsa" > ${marks("ssh.txt")} 2>&1; true` },
        ],
      }],
      // Claude Code's name and tool spelling work too.
      PreToolUse: [{ matcher: "Bash", hooks: [{ command: `sh ${join(dir, "guard.sh")}` }] }],
      postToolUse: [
        { matcher: "*", hooks: [{ command: `(cat; echo) >> ${marks("post.jsonl")}` }] },
        { matcher: "ba?h", hooks: [{ command: `echo "remember to format" >&2; exit 2` }] },
        // A matcher for other tools only: it never runs here.
        { matcher: "edit|write", hooks: [{ command: `touch ${marks("wrong-matcher")}` }] },
      ],
      stop: [{
        hooks: [
          { command: `cat >> ${marks("stop.jsonl")}; echo >> ${marks("stop.jsonl")}`, timeout: 10 },
          // Sends the agent back once: "tests are not run yet".
          {
            command: `[ -e ${marks("sent-back")} ] && exit 0; touch ${marks("sent-back")}; ` +
              `echo "Run the tests before you stop" >&2; exit 2`,
          },
        ],
      }],
    },
  }, async (w) => {
    const ran = join(w.project, "ran.txt");
    w.llm.enqueue(
      {
        text: "Running.",
        toolCalls: [
          { id: "b1", name: "bash", args: { command: `echo forbidden-word > ${ran}` } },
          { id: "b2", name: "bash", args: { command: "echo allowed" } },
        ],
      },
      { text: "Done." },
      { text: "Tests pass." },
    );
    const { sessionId, viewer } = await spawnIn(w);
    try {
      // The stop hook sent the agent back once: two turns end.
      await viewer.until(
        () => viewer.eventsOf(sessionId).filter((e) => e.e.type === "agent_end").length >= 2,
        "two agent_end events",
        60_000,
      );
      const results = resultsOf(viewer.eventsOf(sessionId));
      // Blocked: the reason is the tool result, and the command did not run.
      assert.equal(results.get("b1")?.isError, true);
      assert.match(results.get("b1")!.text, /Commands with forbidden-word are not allowed here/);
      assert.equal(await exists(ran), false, "the blocked command ran");
      // The model read the reason in its next request.
      const toolMsgs = w.llm.requests[1]!.messages.filter((m) => m.role === "tool")
        .map((m) => JSON.stringify(m.content));
      assert.ok(
        toolMsgs.some((t) => t.includes("forbidden-word are not allowed")),
        toolMsgs.join(),
      );
      // Allowed, with the postToolUse hook's note (exit 2) added to its result.
      assert.equal(results.get("b2")?.isError, false);
      assert.match(results.get("b2")!.text, /allowed/);
      assert.match(results.get("b2")!.text, /postToolUse hook: remember to format/);

      const start = JSON.parse(await Deno.readTextFile(marks("start.json")));
      assert.equal(start.hook_event_name, "sessionStart");
      assert.equal(start.source, "startup");
      assert.equal(start.session_id, sessionId);
      assert.equal(start.cwd, w.project);
      if (haveBwrap) {
        assert.doesNotMatch(await Deno.readTextFile(marks("ssh.txt")), /PRIVATE-KEY/);
      }
      const post = await readJsonLines(marks("post.jsonl"));
      const b2 = post.find((p) => p.tool_call_id === "b2");
      assert.ok(b2, JSON.stringify(post));
      assert.equal(b2.tool_name, "bash");
      assert.deepEqual(b2.tool_input, { command: "echo allowed" });
      assert.match(JSON.stringify(b2.tool_response), /allowed/);
      // The agent read the stop hook's reason as a message, and stopped the second time.
      const third = JSON.stringify(w.llm.requests[2]?.messages.at(-1));
      assert.match(third, /A stop hook asks you to continue: Run the tests before you stop/);
      const stops = await eventually("both stop hooks", async () => {
        const list = await exists(marks("stop.jsonl"))
          ? await readJsonLines(marks("stop.jsonl"))
          : [];
        return list.length >= 2 ? list : undefined;
      });
      assert.deepEqual(stops.map((x) => [x.hook_event_name, x.stop_hook_active]), [
        ["stop", false],
        ["stop", true],
      ]);
      assert.equal(w.llm.requests.length, 3);
      assert.equal(await exists(marks("wrong-matcher")), false);
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("a hook that hangs is killed at its limit, and the session goes on", async () => {
  const tag = `hook-hang-${crypto.randomUUID()}`;
  await withAgentWorld({
    hooks: {
      preToolUse: [{ hooks: [{ command: `sleep 30; echo ${tag}`, timeout: "1500ms" }] }],
      // Not even a broken hook stops the session.
      postToolUse: [{ hooks: [{ command: "exit 7" }] }],
    },
  }, async (w) => {
    w.llm.enqueue({
      text: "Running.",
      toolCalls: [{ id: "b1", name: "bash", args: { command: "echo still-works" } }],
    }, { text: "Done." });
    const { sessionId, viewer } = await spawnIn(w);
    try {
      await viewer.until(
        () => viewer.eventsOf(sessionId).some((e) => e.e.type === "tool_execution_start"),
        "the tool call",
        60_000,
      );
      const t0 = Date.now();
      await viewer.waitForEvent(sessionId, "agent_end", 30_000);
      const took = Date.now() - t0;
      assert.ok(took < 10_000, `the hook held the tool for ${took} ms`);
      const events = viewer.eventsOf(sessionId);
      const results = resultsOf(events);
      assert.deepEqual(results.get("b1"), { text: "still-works\n", isError: false });
      const notices = noticesOf(events);
      assert.ok(
        notices.some((n) =>
          /preToolUse hook 'sleep 30; echo hook-hang-.*' was stopped at its time limit \(1500 ms\)/
            .test(n)
        ),
        notices.join("\n"),
      );
      assert.ok(
        notices.some((n) => /postToolUse hook 'exit 7' failed \(exit code 7\)/.test(n)),
        notices.join("\n"),
      );
      // Nothing of the hook is left running.
      assert.deepEqual(await processesWith(tag), []);
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("without the sandbox a project's own hooks and MCP servers do not run unless ~/.baton/config.json trusts projects", async () => {
  const hook = { sessionStart: [{ hooks: [{ command: "touch project-hook-ran" }] }] };
  await withAgentWorld({ sandbox: { mode: "none" } }, async (w) => {
    // A cloned repository's .baton/config.json: a hook and a stdio MCP server, both of which
    // would run with the user's rights as soon as a session starts in the folder.
    await Deno.mkdir(join(w.project, ".baton"));
    await Deno.writeTextFile(
      join(w.project, ".baton", "config.json"),
      JSON.stringify({
        hooks: hook,
        mcpServers: { evil: { command: "sh", args: ["-c", "touch project-mcp-ran; sleep 30"] } },
      }),
    );
    w.llm.enqueue({ text: "Hello." });
    const first = await spawnIn(w);
    try {
      await first.viewer.waitForEvent(first.sessionId, "agent_end", 60_000);
      const notices = noticesOf(first.viewer.eventsOf(first.sessionId)).join("\n");
      assert.equal(await exists(join(w.project, "project-hook-ran")), false, "the hook ran");
      assert.equal(await exists(join(w.project, "project-mcp-ran")), false, "the server ran");
      assert.match(notices, /project's \.baton\/config\.json.*hook.*not run/i);
      assert.match(notices, /project's \.baton\/config\.json.*MCP server.*not run/i);
      assert.match(notices, /trustProjectConfig/);
    } finally {
      await first.viewer.close();
    }
    // The person opts in on their own machine: the next session runs the project's hook.
    await Deno.writeTextFile(
      join(w.home, ".baton", "config.json"),
      JSON.stringify({ sandbox: { mode: "none" }, trustProjectConfig: true }),
    );
    await Deno.writeTextFile(
      join(w.project, ".baton", "config.json"),
      JSON.stringify({ hooks: hook }),
    );
    w.llm.enqueue({ text: "Hello again." });
    const second = await spawnIn(w);
    try {
      await second.viewer.waitForEvent(second.sessionId, "agent_end", 60_000);
      await eventually(
        "the trusted project hook ran",
        () => exists(join(w.project, "project-hook-ran")).then((e) => e || undefined),
      );
    } finally {
      await second.viewer.close();
    }
  });
});
