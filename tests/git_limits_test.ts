/**
 * What the git service can make the relay hold: a viewer that asks for big
 * diffs and never reads the answers is cut off, and the relay's RSS stays
 * bounded. A real relay process, a real runner and a real repository.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { json, signUp, Viewer } from "./harness/client.ts";
import { makeRepo } from "./harness/git_repo.ts";
import { MockLlm } from "./harness/mock_llm.ts";
import { RelayProcess, type RunnerProcess, startRunner, tempDir } from "./harness/procs.ts";
import { openRawWebSocket } from "./harness/raw_http.ts";

const MB = 1024 * 1024;

function rssOf(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^VmRSS:\s+(\d+)\s+kB/m);
  if (!m) throw new Error(`No VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

Deno.test("a viewer that asks for 3 MB diffs and never reads them is cut off, and the relay's RSS stays bounded", async () => {
  const relay = await RelayProcess.start();
  const llm = MockLlm.start();
  const home = await tempDir("baton-git-limits-");
  let runner: RunnerProcess | undefined;
  let ok = false;
  try {
    const user = await signUp(relay.url);
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    const { repo } = await makeRepo(home);
    await Deno.writeTextFile(
      join(repo, "big.txt"),
      "a line of a big generated file\n".repeat(100_000),
    );
    const [r] = await (await user.api("/api/runners")).json();
    llm.enqueue({ text: "Ready." });
    const res = await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: r.id, cwd: repo, prompt: "Wait" }),
    );
    const { sessionId } = await res.json();
    const v = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    v.subscribe(sessionId);
    await v.waitForEvent(sessionId, "agent_end");
    // One answer, read, to know its size.
    v.send({
      t: "service_message",
      serviceId: "git",
      requestId: "one",
      sessionId,
      op: "diff",
      data: { path: "big.txt", maxBytes: 4 * MB },
    });
    const one = await v.waitFor((m) =>
      m.t === "service_message" && m.requestId === "one" && "ok" in m
    );
    assert.ok(JSON.stringify(one).length > 3 * MB, "the diff answer is not big");
    await v.close();

    const pid = relay.proc.pid;
    const before = rssOf(pid);
    let peak = before;
    const sampler = setInterval(() => peak = Math.max(peak, rssOf(pid)), 50);
    const raw = await openRawWebSocket(relay.port, "/_viewer", { "x-api-key": user.apiKey });
    let sent = 0;
    try {
      for (let i = 0; i < 300; i++) {
        await raw.sendText(JSON.stringify({
          t: "service_message",
          serviceId: "git",
          requestId: `r${i}`,
          sessionId,
          op: "diff",
          data: { path: "big.txt", maxBytes: 4 * MB },
        }));
        sent++;
        await new Promise((r) => setTimeout(r, 20));
      }
    } catch {
      // The relay closed the socket: what this test expects.
    }
    // Read what the relay sent: some answers, then its close frame (4429).
    let tail = new Uint8Array(0);
    let total = 0;
    const buf = new Uint8Array(256 * 1024);
    const reading = (async () => {
      for (;;) {
        const n = await raw.conn.read(buf).catch(() => null);
        if (n === null) return;
        total += n;
        const joined = new Uint8Array(tail.length + n);
        joined.set(tail);
        joined.set(buf.subarray(0, n), tail.length);
        tail = joined.slice(-64);
      }
    })();
    await Promise.race([reading, new Promise((r) => setTimeout(r, 10_000))]);
    clearInterval(sampler);
    raw.close();
    const close = tail.lastIndexOf(0x88);
    const code = close >= 0 ? (tail[close + 2]! << 8) | tail[close + 3]! : 0;
    assert.equal(code, 4429, "the relay did not close the socket as too slow");
    assert.ok(
      total < 16 * MB,
      `the relay sent ${(total / MB).toFixed(0)} MB to a reader that read none`,
    );
    console.log(
      `git limits: ${sent} diff requests of ~3 MB answers unread; relay RSS ` +
        `${(before / MB).toFixed(0)} MB → peak ${(peak / MB).toFixed(0)} MB`,
    );
    assert.ok(
      peak - before < 120 * MB,
      `relay RSS grew by ${((peak - before) / MB).toFixed(0)} MB`,
    );
    assert.equal((await fetch(`${relay.url}/health`)).status, 200);
    ok = true;
  } finally {
    if (!ok) console.error(relay.proc.output(), runner?.proc.output());
    await runner?.stop();
    await relay.stop();
    await llm.close();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
});
