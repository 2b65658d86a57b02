/**
 * MCP servers with a real relay, a real runner (its default
 * sandbox, `basic`, where bubblewrap is installed) and the mock model
 * calling tools: a stdio and a streamable HTTP server's tools reach the
 * agent and their results the viewer; a hanging server is cut at
 * `mcpTimeout` while the session starts with a visible warning;
 * `BATON_NO_MCP` and `BATON_SAFE_MODE` skip them.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { json } from "./harness/client.ts";
import type { ScriptedToolCall } from "./harness/mock_llm.ts";
import {
  exists,
  haveBwrap,
  noticesOf,
  resultsOf,
  spawnIn,
  toolNamesOf,
  withAgentWorld as withWorld,
} from "./harness/agent_world.ts";
import { processesWith, startHttpMcp, stdioEntry } from "./harness/mcp.ts";
import { tempDir } from "./harness/procs.ts";
import { eventually } from "./harness/wait.ts";

Deno.test("stdio and streamable HTTP MCP servers: their tools reach the agent and the results reach the viewer", async () => {
  const tag = `mcp-tag-${crypto.randomUUID()}`;
  const http = startHttpMcp("http-server", { token: "secret-token" });
  try {
    await withWorld({
      mcpServers: {
        words: stdioEntry({ label: "stdio-server", tag }),
        remote: { type: "http", url: http.url, headers: { Authorization: "Bearer ${MCP_TOKEN}" } },
      },
    }, async (w) => {
      // `${MCP_TOKEN}` comes from the worker's environment.
      w.llm.responder = (req, i) => {
        if (i !== 0) return undefined;
        const names = (req.tools ?? []).map((t) => t.function.name);
        assert.ok(names.includes("mcp__words__word_count"), `tools: ${names}`);
        assert.ok(names.includes("mcp__remote__word_count"), `tools: ${names}`);
        return undefined;
      };
      const calls: ScriptedToolCall[] = [
        { id: "s1", name: "mcp__words__word_count", args: { text: "one two three" } },
        { id: "h1", name: "mcp__remote__word_count", args: { text: "four five" } },
        { id: "f1", name: "mcp__words__fail", args: {} },
        // The stdio server runs under the session's sandbox: ~/.ssh is hidden from it.
        {
          id: "r1",
          name: "mcp__words__read_file",
          args: { target: join(w.home, ".ssh", "id_rsa") },
        },
        {
          id: "r2",
          name: "mcp__remote__read_file",
          args: { target: join(w.home, ".ssh", "id_rsa") },
        },
      ];
      w.llm.enqueue({ text: "Counting.", toolCalls: calls }, { text: "Done." });
      const { sessionId, viewer } = await spawnIn(w);
      try {
        await viewer.waitForEvent(sessionId, "agent_end", 60_000);
        const events = viewer.eventsOf(sessionId);
        const results = resultsOf(events);
        assert.deepEqual(results.get("s1"), {
          text: "Words: 3 (from stdio-server)",
          isError: false,
        });
        assert.deepEqual(results.get("h1"), {
          text: "Words: 2 (from http-server)",
          isError: false,
        });
        assert.equal(results.get("f1")?.isError, true);
        assert.match(results.get("f1")?.text ?? "", /Failure from stdio-server/);
        if (haveBwrap) {
          assert.doesNotMatch(results.get("r1")?.text ?? "", /PRIVATE-KEY/);
          // The control: the same read in the test's own (unsandboxed) HTTP server.
          assert.match(results.get("r2")?.text ?? "", /PRIVATE-KEY/);
          const procs = await processesWith(tag);
          const cmds = await Promise.all(procs.map((p) => Deno.readTextFile(`/proc/${p}/cmdline`)));
          assert.ok(
            cmds.some((c) => c.startsWith("bwrap\0") || c.includes("/bwrap\0")),
            "not in bwrap",
          );
        }
        // The model got the results back in its next request.
        const last = w.llm.requests.at(-1)!;
        const toolMsgs = last.messages.filter((m) => m.role === "tool").map((m) =>
          JSON.stringify(m.content)
        );
        assert.ok(
          toolMsgs.some((t) => t.includes("Words: 3 (from stdio-server)")),
          toolMsgs.join(),
        );
        const ready = events.find((e) => e.e.type === "mcp:ready")!.e;
        const status = ready.mcp as { name: string; ok: boolean; tools: number }[];
        assert.deepEqual(
          status.map((s) => [s.name, s.ok, s.tools]).sort(),
          [["remote", true, 3], ["words", true, 3]],
        );
        assert.ok(http.requests.length > 0);
        assert.ok((await processesWith(tag)).length > 0, "the stdio server runs");
        // Ending the session ends its MCP server.
        const end = await w.user.api(
          `/api/sessions/${sessionId}/input`,
          json("POST", { kind: "end" }),
        );
        assert.equal(end.status, 200);
        await eventually(
          "the MCP server to end with its session",
          async () => (await processesWith(tag)).length === 0 ? true : undefined,
          10_000,
        );
      } finally {
        await viewer.close();
      }
    }, { MCP_TOKEN: "secret-token" });
  } finally {
    await http.close();
  }
});

Deno.test("a hanging MCP server is cut at mcpTimeout: the session starts, with a visible warning", async () => {
  const tag = `mcp-hang-${crypto.randomUUID()}`;
  const okTag = `mcp-ok-${crypto.randomUUID()}`;
  await withWorld({
    // Past the 5 s of the slow-startup warning, so both show.
    mcpTimeout: 6000,
    mcpServers: {
      stuck: stdioEntry({ label: "stuck", tag, hang: true }),
      words: stdioEntry({ label: "words", tag: okTag }),
      broken: { command: "/nonexistent/mcp-server" },
    },
  }, async (w) => {
    w.llm.enqueue({
      text: "Counting.",
      toolCalls: [{ id: "s1", name: "mcp__words__word_count", args: { text: "a b" } }],
    }, { text: "Done." });
    const t0 = Date.now();
    const { sessionId, viewer } = await spawnIn(w);
    try {
      await viewer.waitForEvent(sessionId, "agent_end", 60_000);
      const started = Date.now() - t0;
      const events = viewer.eventsOf(sessionId);
      assert.ok(started < 20_000, `the session took ${started} ms`);
      const notices = noticesOf(events);
      assert.ok(
        notices.some((n) => /MCP servers are slow to start .*waiting for: stuck/.test(n)),
        notices.join("\n"),
      );
      assert.ok(
        notices.some((n) =>
          /MCP server 'stuck' skipped: no answer within mcpTimeout \(6000 ms\)/.test(n)
        ),
        notices.join("\n"),
      );
      assert.ok(notices.some((n) => /MCP server 'broken' skipped/.test(n)), notices.join("\n"));
      // The other server works, the stuck one's tools are not there.
      assert.deepEqual(resultsOf(events).get("s1"), {
        text: "Words: 2 (from words)",
        isError: false,
      });
      const tools = toolNamesOf(events);
      assert.ok(tools.includes("mcp__words__word_count"));
      assert.ok(!tools.some((t) => t.startsWith("mcp__stuck__")));
      // The stuck server's process is gone, not left behind.
      assert.deepEqual(await processesWith(tag), []);
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("BATON_NO_MCP=1 and BATON_SAFE_MODE=1 skip MCP servers (safe mode: hooks too)", async (t) => {
  const envs: Record<string, string>[] = [{ BATON_NO_MCP: "1" }, { BATON_SAFE_MODE: "1" }];
  for (const env of envs) {
    await t.step(Object.keys(env)[0]!, async () => {
      const tag = `mcp-skip-${crypto.randomUUID()}`;
      const project = await tempDir("baton-mcp-marker-");
      const marker = join(project, "server-started");
      const hookMarker = join(project, "hook-ran");
      await withWorld({
        mcpServers: { words: stdioEntry({ label: "words", tag, marker }) },
        hooks: { sessionStart: [{ hooks: [{ command: `touch ${hookMarker}` }] }] },
      }, async (w) => {
        w.llm.enqueue({ text: "Hello." });
        const { sessionId, viewer } = await spawnIn(w);
        try {
          await viewer.waitForEvent(sessionId, "agent_end", 60_000);
          const events = viewer.eventsOf(sessionId);
          const start = events.find((e) => e.e.type === "session_start")!.e;
          const skip = start.skip as Record<string, boolean>;
          assert.equal(skip.mcp, true);
          assert.ok(!toolNamesOf(events).some((n) => n.startsWith("mcp__")));
          const safe = "BATON_SAFE_MODE" in env;
          assert.equal(skip.hooks, safe);
          assert.equal(skip.plugins, safe);
          assert.equal(await exists(marker), false, "the server was started");
          assert.equal(await exists(hookMarker), !safe, "hooks ran in safe mode");
        } finally {
          await viewer.close();
        }
      }, env);
    });
  }
});

Deno.test("without the sandbox a stdio server runs as itself and ends when its worker goes to sleep", async () => {
  const tag = `mcp-nosbx-${crypto.randomUUID()}`;
  await withWorld({
    sandbox: { mode: "none" },
    sleepAfter: "1s",
    mcpServers: { words: stdioEntry({ label: "words", tag }) },
  }, async (w) => {
    w.llm.enqueue({
      text: "Counting.",
      toolCalls: [{ id: "s1", name: "mcp__words__word_count", args: { text: "a b c d" } }],
    }, { text: "Done." });
    const { sessionId, viewer } = await spawnIn(w);
    try {
      await viewer.waitForEvent(sessionId, "agent_end", 60_000);
      assert.deepEqual(resultsOf(viewer.eventsOf(sessionId)).get("s1"), {
        text: "Words: 4 (from words)",
        isError: false,
      });
      const procs = await processesWith(tag);
      assert.ok(procs.length > 0, "the server runs");
      const cmds = await Promise.all(procs.map((p) => Deno.readTextFile(`/proc/${p}/cmdline`)));
      assert.ok(!cmds.some((c) => c.includes("bwrap")), "sandboxed in mode none");
      // The daemon stops the idle worker with SIGTERM: the server goes with it, and the
      // worker still ends by that signal (a sleep, not a crash).
      await viewer.waitForEvent(sessionId, "session_sleep", 30_000);
      assert.deepEqual(await processesWith(tag), []);
      assert.equal(w.runner.proc.count(/exited unexpectedly/), 0, w.runner.proc.output());
    } finally {
      await viewer.close();
    }
  });
});

Deno.test("a session starts before its MCP servers answer, and its first prompt still sees their tools", async () => {
  const tag = `mcp-late-${crypto.randomUUID()}`;
  const gateDir = await tempDir("baton-mcp-gate-");
  const gate = join(gateDir, "release");
  try {
    await withWorld(
      { mcpServers: { late: stdioEntry({ label: "late", tag, gate }) } },
      async (w) => {
        w.llm.enqueue({ text: "Hello." });
        const { sessionId, viewer } = await spawnIn(w);
        try {
          // The server answers nothing until the gate opens: the session has started anyway,
          // and its first prompt has not gone to the model.
          await viewer.waitForEvent(sessionId, "session_start", 60_000);
          const before = viewer.eventsOf(sessionId).map((e) => e.e.type);
          assert.ok(!before.includes("mcp:ready"), before.join());
          assert.ok(!before.includes("agent_start"), before.join());
          assert.equal(w.llm.requests.length, 0);
          assert.ok(!toolNamesOf(viewer.eventsOf(sessionId)).some((n) => n.startsWith("mcp__")));
          await Deno.writeTextFile(gate, "go\n");
          await viewer.waitForEvent(sessionId, "agent_end", 60_000);
          const events = viewer.eventsOf(sessionId);
          const types = events.map((e) => e.e.type);
          assert.ok(types.indexOf("mcp:ready") < types.indexOf("agent_start"), types.join());
          const first = (w.llm.requests[0]!.tools ?? []).map((t) => t.function.name);
          assert.ok(first.includes("mcp__late__word_count"), `tools: ${first}`);
          assert.ok(toolNamesOf(events).includes("mcp__late__word_count"));
          const ready = events.find((e) => e.e.type === "mcp:ready")!.e;
          const status = ready.mcp as { name: string; ok: boolean; tools: number }[];
          assert.deepEqual(status.map((s) => [s.name, s.ok, s.tools]), [["late", true, 3]]);
        } finally {
          await viewer.close();
        }
      },
    );
  } finally {
    await Deno.remove(gateDir, { recursive: true }).catch(() => {});
  }
});
