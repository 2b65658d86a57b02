/**
 * What the agent's processes inherit under the sandbox: the worker keeps the
 * model providers' keys (it calls the model with them), while `bash` and the
 * session's hooks go without, and the relay's own secrets never reach a
 * runner at all. The person may give provider keys back in the global config.
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
