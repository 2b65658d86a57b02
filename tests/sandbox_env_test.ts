/**
 * What the agent's processes inherit under the sandbox: the worker keeps the
 * model providers' keys (it calls the model with them), while `bash` and the
 * session's hooks go without, and the relay's own secrets never reach a
 * runner at all. The person may give provider keys back in the global config.
 * And the file tools, which run in the worker itself, read nothing under /proc.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  type AgentWorld,
  haveBwrap,
  resultsOf,
  spawnIn,
  withAgentWorld,
} from "./harness/agent_world.ts";
import { storedEvents } from "./harness/client.ts";
import { MODEL } from "./harness/mock_llm.ts";

const secret = () => crypto.randomUUID().replaceAll("-", "");

/** One session in the project whose turn runs `env`; the listing bash printed. */
async function bashEnv(w: AgentWorld): Promise<string> {
  w.llm.enqueue(
    { text: "Looking.", toolCalls: [{ name: "bash", args: { command: "env; echo listed" } }] },
    { text: "Done." },
  );
  // A provider key in the environment makes pi's default that provider's model: the mock's, here.
  const { sessionId, viewer } = await spawnIn(w, "Go", w.project, MODEL);
  try {
    await viewer.waitForEvent(sessionId, "agent_end", 60_000);
    const [result] = [...resultsOf(viewer.eventsOf(sessionId)).values()];
    assert.ok(result, "no tool result");
    assert.match(result.text, /listed/);
    return result.text;
  } finally {
    await viewer.close();
  }
}

Deno.test({
  name:
    "sandboxed bash and hooks get no provider key and no relay secret; the model still gets its key",
  ignore: !haveBwrap,
  async fn() {
    const v = {
      anthropic: `sk-ant-${secret()}`,
      modelsKey: secret(),
      vapid: secret(),
      metrics: secret(),
      own: `visible-${secret()}`,
    };
    const env = {
      ANTHROPIC_API_KEY: v.anthropic,
      MOCK_LLM_KEY: v.modelsKey,
      VAPID_PRIVATE_KEY: v.vapid,
      BATON_METRICS_TOKEN: v.metrics,
      PROJECT_SETTING: v.own,
    };
    const config = { hooks: { sessionStart: [{ hooks: [{ command: "env > hook-env.txt" }] }] } };
    await withAgentWorld(config, async (w) => {
      // The provider's key is read from a variable, as models.json allows.
      await w.llm.writeModelsJson(w.home, undefined, "MOCK_LLM_KEY");
      const listed = await bashEnv(w);
      assert.ok(listed.includes(v.own), "the project's own variable is kept");
      for (const [name, value] of Object.entries(v)) {
        if (name !== "own") assert.equal(listed.includes(value), false, `bash sees ${name}`);
      }
      const hooked = await Deno.readTextFile(join(w.project, "hook-env.txt"));
      assert.ok(hooked.includes(v.own));
      for (const [name, value] of Object.entries(v)) {
        if (name !== "own") assert.equal(hooked.includes(value), false, `the hook sees ${name}`);
      }
      assert.ok(
        w.llm.authorizations.includes(`Bearer ${v.modelsKey}`),
        `the model was not called with the key: ${w.llm.authorizations.join(", ")}`,
      );

      // The person gives one back; the others stay hidden.
      await Deno.writeTextFile(
        join(w.home, ".baton", "config.json"),
        JSON.stringify({ exposeProviderKeys: ["ANTHROPIC_API_KEY"] }),
      );
      const again = await bashEnv(w);
      assert.ok(again.includes(v.anthropic), "an exposed key is passed on");
      for (const name of ["modelsKey", "vapid", "metrics"] as const) {
        assert.equal(again.includes(v[name]), false, `bash sees ${name}`);
      }
    }, env);
  },
});

Deno.test({
  name: "the file tools read no process's environment or memory under /proc",
  ignore: !haveBwrap,
  async fn() {
    const key = `sk-ant-${secret()}`;
    // A process of the same user holding a credential, as in sandbox_test.ts.
    const neighbour = `brt_${secret()}`;
    const holder = new Deno.Command("sleep", {
      args: ["60"],
      env: { BATON_API_KEY: neighbour },
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      await withAgentWorld({}, async (w) => {
        const paths = [
          "/proc/self/environ",
          `/proc/${holder.pid}/environ`,
          "/proc/self/mem",
          "/dev/fd/0",
          "/proc/self/cwd/../../proc/self/environ",
        ];
        w.llm.enqueue(
          {
            text: "Reading.",
            toolCalls: paths.map((path, i) => ({ id: `r${i}`, name: "read", args: { path } })),
          },
          { text: "Done." },
        );
        const { sessionId, viewer } = await spawnIn(w, "Go", w.project, MODEL);
        try {
          await viewer.waitForEvent(sessionId, "agent_end", 60_000);
          const results = resultsOf(viewer.eventsOf(sessionId));
          assert.equal(results.size, paths.length);
          for (const [id, r] of results) {
            assert.ok(r.isError, `${id} was read: ${r.text.slice(0, 200)}`);
            assert.match(r.text, /Sandbox: reading '\/proc' is denied/, id);
            assert.equal(r.text.includes(key) || r.text.includes(neighbour), false);
          }
        } finally {
          await viewer.close();
        }
      }, { ANTHROPIC_API_KEY: key });
    } finally {
      holder.kill();
      await holder.status;
    }
  },
});

Deno.test({
  name: "a role's grep searches no folder that holds a hidden path (~/.ssh under the home folder)",
  ignore: !haveBwrap,
  async fn() {
    await withAgentWorld({}, async (w) => {
      // A role with pi's grep, which searches hidden folders (rg --hidden).
      await Deno.mkdir(join(w.home, ".baton", "agents"), { recursive: true });
      await Deno.writeTextFile(
        join(w.home, ".baton", "agents", "explorer.md"),
        "---\nname: explorer\ndescription: Finds things\ntools: read, grep\n---\nFind it.\n",
      );
      const searches = [{ pattern: "PRIVATE-KEY", path: w.home }, { pattern: "PRIVATE-KEY" }];
      w.llm.responder = (req) => {
        const names = (req.tools ?? []).map((t) => t.function.name);
        const done = req.messages.some((m) => m.role === "tool");
        if (names.includes("subagent")) {
          return done ? { text: "Done." } : {
            toolCalls: [{ name: "subagent", args: { task: "find the key", agent: "explorer" } }],
          };
        }
        return done ? { text: "Nothing." } : {
          toolCalls: searches.map((args, i) => ({ id: `g${i}`, name: "grep", args })),
        };
      };
      // The child's grep with no path searches its folder: the home folder here.
      const { sessionId, viewer } = await spawnIn(w, "Go", w.home, MODEL);
      try {
        await viewer.waitForEvent(sessionId, "agent_end", 60_000);
        const end = viewer.eventsOf(sessionId).find((e) => e.e.type === "tool_execution_end")!;
        const [run] = (end.e.result as { details: { runs: { sessionId: string }[] } }).details.runs;
        const child = resultsOf(await storedEvents(w.user, run!.sessionId));
        assert.equal(child.size, searches.length);
        for (const [id, r] of child) {
          assert.ok(r.isError, `${id} searched: ${r.text.slice(0, 200)}`);
          assert.match(r.text, /Sandbox: searching '.*' would read '.*\.ssh', which is denied/, id);
          assert.equal(r.text.includes("PRIVATE-KEY-MATERIAL"), false);
        }
      } finally {
        await viewer.close();
      }
    });
  },
});
