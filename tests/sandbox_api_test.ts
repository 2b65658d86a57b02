/**
 * The sandbox routes with a real runner: status and the PUT deep merge into
 * `~/.baton/config.json`, its 400 cases, cookie only (an API key gets 403),
 * another user's runner 404; violations counted in the runner's ring and
 * `/sandbox` typed in a session answered there.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { errorCode, json, signUp, Viewer } from "./harness/client.ts";
import { startTestRelay } from "./harness/in_process.ts";
import { MockLlm } from "./harness/mock_llm.ts";
import { type RunnerProcess, startRunner, tempDir } from "./harness/procs.ts";
import type { SandboxConfigSaved, SandboxStatus } from "../shared/sandbox_api.ts";

Deno.test("sandbox-status and sandbox-config: owner by cookie only, deep merge, 400s", async () => {
  await using relay = await startTestRelay({ allowSignup: true });
  const llm = MockLlm.start();
  const home = await tempDir("baton-sbx-api-");
  await Deno.mkdir(join(home, ".baton"), { recursive: true });
  await Deno.writeTextFile(
    join(home, ".baton", "config.json"),
    JSON.stringify({
      runnerName: "kept",
      sandbox: { filesystem: { denyRead: ["~/a"], allowWrite: ["."] }, custom: 1 },
    }),
  );
  await llm.writeModelsJson(home);
  const owner = await signUp(relay.url);
  const other = await signUp(relay.url);
  let runner: RunnerProcess | undefined;
  let ok = false;
  try {
    runner = await startRunner({ relayUrl: relay.url, apiKey: owner.apiKey, home });
    const [{ id }] = await (await owner.api("/api/runners")).json();
    const status = `/api/runners/${id}/sandbox-status`;
    const config = `/api/runners/${id}/sandbox-config`;
    const put = (body: unknown, who = owner) =>
      who.web(config, json("PUT", body, { origin: relay.url }));

    const st: SandboxStatus = await (await owner.web(status)).json();
    assert.equal(st.mode, "basic");
    assert.equal(st.platform, "linux");
    assert.equal(typeof st.active, "boolean");
    assert.equal(st.violations, 0);
    // models.json's key is written in it, and no provider variable is set: nothing is kept back.
    assert.deepEqual(st.hiddenVariables, []);
    assert.deepEqual(st.recentViolations, []);
    assert.deepEqual(st.config.filesystem, { denyRead: ["~/a"], allowWrite: ["."] });

    // API keys are refused (spec: Authentication rule 3); foreign and unknown runners 404 alike.
    assert.equal(await errorCode(await owner.api(status), 403), "cookie_required");
    assert.equal(
      await errorCode(await owner.api(config, json("PUT", { mode: "none" })), 403),
      "cookie_required",
    );
    assert.equal(await errorCode(await other.web(status), 404), "not_found");
    assert.equal(await errorCode(await put({ mode: "none" }, other), 404), "not_found");
    assert.equal(
      await errorCode(await owner.web(`/api/runners/nope/sandbox-status`), 404),
      "not_found",
    );

    // The merge: null removes, objects merge key by key, arrays and scalars replace.
    const res = await put({
      mode: "full",
      filesystem: { denyRead: ["~/b"], allowWrite: null },
      network: { allowedDomains: ["example.com"] },
      custom: null,
    });
    assert.equal(res.status, 200);
    const saved: SandboxConfigSaved = await res.json();
    assert.equal(saved.saved, true);
    assert.match(saved.message, /sessions started from now on/);
    assert.deepEqual(saved.resolvedConfig, {
      mode: "full",
      filesystem: { denyRead: ["~/b"] },
      network: { allowedDomains: ["example.com"] },
    });
    const file = JSON.parse(await Deno.readTextFile(join(home, ".baton", "config.json")));
    assert.equal(file.runnerName, "kept", "other keys of the file stay");
    assert.deepEqual(file.sandbox, saved.resolvedConfig);

    // 400: an invalid mode, a non-string array entry; nothing changes.
    for (
      const bad of [
        { mode: "strict" },
        { filesystem: { denyRead: ["ok", 3] } },
        { network: { allowedDomains: [null] } },
        { network: { deniedDomains: "x.com" } },
      ]
    ) {
      assert.equal(await errorCode(await put(bad), 400, JSON.stringify(bad)), "invalid_body");
    }
    const after = JSON.parse(await Deno.readTextFile(join(home, ".baton", "config.json")));
    assert.deepEqual(after.sandbox, saved.resolvedConfig);

    // A write tool blocked in a session: the runner's ring counts it; /sandbox answers in place.
    llm.enqueue(
      {
        text: "Writing.",
        toolCalls: [{ id: "w", name: "write", args: { path: "/etc/baton-x", content: "x" } }],
      },
      { text: "Done." },
    );
    const project = await tempDir("baton-sbx-api-proj-");
    const spawn = await owner.api(
      "/api/runners/spawn",
      json("POST", { runnerId: id, prompt: "Go", cwd: project }),
    );
    const { sessionId } = await spawn.json();
    const viewer = await Viewer.connect(relay.url, { apiKey: owner.apiKey });
    try {
      viewer.subscribe(sessionId);
      await viewer.waitForEvent(sessionId, "agent_end", 60_000);
      const st2: SandboxStatus = await (await owner.web(status)).json();
      assert.equal(st2.violations, 1);
      assert.equal(st2.recentViolations[0]!.operation, "write");
      assert.equal(st2.recentViolations[0]!.target, "/etc/baton-x");

      for (
        const [text, re] of [
          ["/sandbox", /^Sandbox: mode full, (in)?active, platform linux, 1 violation/],
          ["/sandbox violations", /write \/etc\/baton-x/],
          ["/sandbox config", /"allowedDomains": \[\s*"example.com"\s*\]/],
        ] as const
      ) {
        const before = viewer.eventsOf(sessionId).length;
        viewer.send({ t: "input", id: text, sessionId, kind: "prompt", text });
        await viewer.until(
          () =>
            viewer.eventsOf(sessionId).slice(before).some((e) =>
              e.e.type === "sandbox:info" && e.e.command === text
            ),
          `the answer to ${text}`,
        );
        const info = viewer.eventsOf(sessionId).slice(before).find((e) =>
          e.e.type === "sandbox:info" && e.e.command === text
        );
        assert.ok(info, `no answer to ${text}`);
        assert.match(String(info.e.text), re);
      }
      assert.equal(llm.requests.length, 2, "/sandbox went to the model");
    } finally {
      await viewer.close();
      await Deno.remove(project, { recursive: true }).catch(() => {});
    }
    ok = true;
  } finally {
    if (runner && !ok) console.error(runner.proc.output());
    await runner?.stop();
    await llm.close();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
});
