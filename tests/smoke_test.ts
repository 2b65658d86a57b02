import assert from "node:assert/strict";
import { MockLlm } from "./harness/mock_llm.ts";
import { RelayProcess, startRunner, tempDir } from "./harness/procs.ts";
import { assertContiguous, json, signUp, Viewer } from "./harness/client.ts";

Deno.test("smoke: spawn runs a bash tool call through the mock model and the viewer sees it", async () => {
  const llm = MockLlm.start();
  const relay = await RelayProcess.start();
  let runner;
  try {
    const user = await signUp(relay.url);
    const home = await tempDir();
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    const runners = await (await user.api("/api/runners")).json();
    assert.equal(runners.length, 1);
    llm.enqueue({
      text: "Running it.",
      toolCalls: [{ name: "bash", args: { command: "echo hi-from-tool" } }],
    }, { text: ["All ", "done."] });
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    const res = await user.api(
      "/api/runners/spawn",
      json("POST", {
        runnerId: runners[0].id,
        prompt: "say hi",
        cwd: home,
        model: { provider: "mock", id: "mock-1" },
      }),
    );
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    viewer.subscribe(body.sessionId);
    await viewer.waitForEvent(body.sessionId, "agent_end");
    const evs = viewer.eventsOf(body.sessionId);
    assertContiguous(evs);
    console.log(evs.map((e) => e.e.type).join(" "));
    const end = evs.find((e) => e.e.type === "tool_execution_end")!;
    assert.match(JSON.stringify(end.e), /hi-from-tool/);
    await viewer.close();
  } finally {
    await runner?.stop();
    await relay.stop();
    await llm.close();
  }
});
