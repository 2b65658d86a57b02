import assert from "node:assert/strict";
import { join } from "node:path";
import { json, signUp } from "./harness/client.ts";
import { startTestRelay } from "./harness/in_process.ts";
import { MockLlm } from "./harness/mock_llm.ts";
import { baseEnv, baton, ROOT, startRunner, tempDir } from "./harness/procs.ts";

Deno.test("'baton webhook fire' signs a delivery that starts a session, and refuses bad input", async () => {
  const llm = MockLlm.start();
  const relay = await startTestRelay();
  const home = await tempDir("baton-whcli-");
  await llm.writeModelsJson(home);
  const user = await signUp(relay.url);
  const runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
  try {
    const [r] = await (await user.api("/api/runners")).json();
    const res = await user.api(
      "/api/webhooks",
      json("POST", { name: "ci", source: "ci", runnerId: r.id, cwd: home, prompt: "Look at this" }),
    );
    const { webhook } = await res.json();
    const file = join(home, "event.json");
    await Deno.writeTextFile(file, JSON.stringify({ type: "build.failed", branch: "main" }));
    const env = baseEnv(home);

    const ok = await baton(
      [
        "webhook",
        "fire",
        webhook.id,
        "--secret",
        webhook.secret,
        "--data",
        `@${file}`,
        "--relay",
        relay.url,
      ],
      env,
    );
    assert.equal(ok.code, 0, ok.stderr);
    const answer = JSON.parse(ok.stdout.replace(/^200 /, ""));
    assert.equal(answer.ok, true);
    const list = await (await user.api("/api/sessions")).json();
    assert.ok(list.sessions.some((s: { sessionId: string }) => s.sessionId === answer.sessionId));
    await llm.waitForRequests(1);
    assert.match(JSON.stringify(llm.requests[0]?.messages), /build\.failed/);

    const wrong = await baton(
      ["webhook", "fire", webhook.id, "--secret", "0".repeat(64), "--relay", relay.url],
      env,
    );
    assert.equal(wrong.code, 1);
    assert.match(wrong.stdout, /^401 /);

    // The shell script of docs/webhooks.md, run as written (curl and openssl).
    const doc = await Deno.readTextFile(join(ROOT, "docs", "webhooks.md"));
    const script = doc.match(/```sh\n(#!\/usr\/bin\/env bash[\s\S]*?)```/)?.[1];
    assert.ok(script, "docs/webhooks.md has the openssl script");
    const scriptFile = join(home, "fire.sh");
    await Deno.writeTextFile(scriptFile, script);
    const sh = await new Deno.Command("bash", {
      args: [scriptFile],
      env: { ...env, RELAY: relay.url, WEBHOOK_ID: webhook.id, WEBHOOK_SECRET: webhook.secret },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const shOut = new TextDecoder().decode(sh.stdout);
    assert.equal(sh.code, 0, new TextDecoder().decode(sh.stderr));
    assert.match(shOut, /"ok":true/);
    assert.match(shOut, /"sessionId"/);

    const usage = await baton(["webhook", "fire", webhook.id, "--relay", relay.url], env);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /Missing --secret/);
    const badJson = await baton(
      ["webhook", "fire", webhook.id, "--secret", "x", "--data", "{nope", "--relay", relay.url],
      env,
    );
    assert.equal(badJson.code, 2);
    assert.match(badJson.stderr, /not valid JSON/);
  } finally {
    await runner.stop();
    await relay[Symbol.asyncDispose]();
    await llm.close();
  }
});
