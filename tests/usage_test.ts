/**
 * `GET /api/runners/{runnerId}/usage` against a real runner: totals from
 * generated pi session files checked against sums done by hand, ranges,
 * incremental updates, a real session on the mock model, and who may ask.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { CreateKeyResponse } from "../shared/api.ts";
import type { UsageResponse } from "../shared/usage_api.ts";
import { errorCode, json, signUp, Viewer } from "./harness/client.ts";
import { defaultAnswer, emptyUsage, FakeRunner } from "./harness/fake_runner.ts";
import { startTestRelay, withStack } from "./harness/in_process.ts";
import { eventually } from "./harness/wait.ts";

const DAY = 86_400_000;

/** One pi session file (header + assistant messages), in pi's session format. */
function piSession(
  id: string,
  cwd: string,
  turns: { at: number; input: number; output: number; cacheRead?: number; cost: number }[],
): string {
  const start = turns[0]?.at ?? Date.now();
  let text = JSON.stringify({
    type: "session",
    version: 3,
    id,
    timestamp: new Date(start).toISOString(),
    cwd,
  }) + "\n";
  for (const t of turns) {
    text += JSON.stringify({
      type: "message",
      id: crypto.randomUUID().slice(0, 8),
      parentId: null,
      timestamp: new Date(t.at).toISOString(),
      message: { role: "user", content: "go", timestamp: t.at },
    }) + "\n";
    text += assistantLine(t);
  }
  return text;
}

function assistantLine(
  t: { at: number; input: number; output: number; cacheRead?: number; cost: number },
): string {
  return JSON.stringify({
    type: "message",
    id: crypto.randomUUID().slice(0, 8),
    parentId: null,
    timestamp: new Date(t.at).toISOString(),
    message: {
      role: "assistant",
      content: [{ type: "text", text: "done" }],
      api: "anthropic-messages",
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      usage: {
        input: t.input,
        output: t.output,
        cacheRead: t.cacheRead ?? 0,
        cacheWrite: 0,
        totalTokens: t.input + t.output + (t.cacheRead ?? 0),
        cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: t.cost },
      },
      stopReason: "stop",
      timestamp: t.at,
    },
  }) + "\n";
}

Deno.test("usage adds up pi's session files on the runner, by range, as they grow", async () => {
  await withStack({}, async ({ user, runnerId, home, llm, relay }) => {
    const now = Date.now();
    const dir = join(home, ".baton", "sessions", "--work-app--");
    await Deno.mkdir(dir, { recursive: true });
    const recent = join(dir, "2026_recent.jsonl");
    await Deno.writeTextFile(
      recent,
      piSession("recent", "/work/app", [
        { at: now - 2 * DAY, input: 1200, output: 300, cacheRead: 800, cost: 0.5 },
        { at: now, input: 100, output: 50, cost: 0.25 },
      ]) + '{corrupt line with "usage"\n',
    );
    await Deno.writeTextFile(
      join(dir, "2026_old.jsonl"),
      piSession("old", "/work/app", [{ at: now - 10 * DAY, input: 5000, output: 1000, cost: 2 }]),
    );
    const usage = async (query = "") => {
      const res = await user.api(`/api/runners/${runnerId}/usage${query}`);
      const text = await res.text();
      assert.equal(res.status, 200, text);
      return JSON.parse(text) as UsageResponse;
    };

    // By hand: 90d holds both files: input 1200+800+100+5000, output 300+50+1000, cost 2.75.
    let u = await usage();
    assert.equal(u.range, "90d");
    assert.equal(u.totalInputTokens, 7100);
    assert.equal(u.totalOutputTokens, 1350);
    assert.equal(u.totalCostUsd, 2.75);
    assert.equal(u.totalCacheReadTokens, 800);
    assert.equal(u.skippedLines, 1, "the corrupt line is skipped, not fatal");
    assert.deepEqual(u.sessions.map((s) => [s.piSessionId, s.costUsd]), [["old", 2], [
      "recent",
      0.75,
    ]]);
    assert.equal(u.sessions[1]!.sessionId, null, "not a session baton started");
    assert.equal(u.sessions[1]!.cwd, "/work/app");

    // 7d: the file whose only turn is 10 days old is out.
    u = await usage("?range=7d");
    assert.deepEqual(u.sessions.map((s) => s.piSessionId), ["recent"]);
    assert.equal(u.totalCostUsd, 0.75);
    assert.equal(u.days.reduce((n, d) => n + d.costUsd, 0), 0.75);
    assert.equal((await usage("?range=all")).totalCostUsd, 2.75);

    // A turn appended to one file changes the numbers at the next call.
    await Deno.writeTextFile(
      recent,
      assistantLine({ at: now, input: 10, output: 10, cost: 0.125 }),
      { append: true },
    );
    u = await usage("?range=7d");
    assert.equal(u.totalCostUsd, 0.875);
    assert.equal(u.totalInputTokens, 2110);

    // A real session on the mock model shows up under its baton id.
    llm.enqueue({ text: "Hello.", usage: { prompt: 1000, completion: 500 } });
    const spawned = await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId, prompt: "Say hello" }),
    );
    const { sessionId } = await spawned.json();
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    try {
      viewer.subscribe(sessionId);
      await viewer.waitForEvent(sessionId, "agent_end");
    } finally {
      await viewer.close();
    }
    const mine = await eventually("the session in usage", async () => {
      const list = (await usage("?range=7d")).sessions;
      return list.find((s) => s.sessionId === sessionId);
    });
    // models.json prices mock-1 at $1 in and $2 out per million tokens.
    assert.equal(mine.model, "mock-1");
    assert.equal(mine.inputTokens, 1000);
    assert.equal(mine.outputTokens, 500);
    assert.equal(mine.costUsd, 0.002);
    assert.equal(mine.cwd, await Deno.realPath(home));

    // The index is persisted owner-only beside the runner's other state.
    const index = join(home, ".baton", "runner", "usage-index.json");
    assert.equal((await Deno.stat(index)).mode! & 0o077, 0);

    // A read-only key may read it; a bad range is refused.
    const keyRes = await user.api("/api/keys", json("POST", { name: "dash", scope: "read" }));
    const { key } = await keyRes.json() as CreateKeyResponse;
    const ro = await fetch(`${relay.url}/api/runners/${runnerId}/usage?range=30d`, {
      headers: { "x-api-key": key },
    });
    assert.equal(ro.status, 200);
    await ro.body?.cancel();
    for (const bad of ["1d", "7D", "", "90d&range=7d", "%00"]) {
      const res = await user.api(`/api/runners/${runnerId}/usage?range=${bad}`);
      if (bad === "90d&range=7d") {
        // Hono takes the first value of a repeated parameter.
        assert.equal(res.status, 200);
        await res.body?.cancel();
        continue;
      }
      assert.equal(await errorCode(res, 400, bad), "bad_request");
    }
  });
});

Deno.test("usage of another user's runner and of an unknown one look the same; offline is 503", async () => {
  await using relay = await startTestRelay({ allowSignup: true });
  const owner = await signUp(relay.url);
  const other = await signUp(relay.url);
  let answer: "good" | "bad" | "huge" = "good";
  const runner = await FakeRunner.connect(relay.url, {
    apiKey: owner.apiKey,
    answer: (req) => {
      if (req.op !== "usage") return defaultAnswer(req);
      const data = emptyUsage((req.data as { range?: unknown }).range);
      if (answer === "bad") return { ok: true, data: { ...data, totalCostUsd: "lots" } };
      if (answer === "huge") {
        const s = { sessionId: null, piSessionId: null, cwd: null, model: null, startedAt: null };
        const one = { ...s, lastActivityAt: null, inputTokens: 1, outputTokens: 1, costUsd: 0 };
        return { ok: true, data: { ...data, sessions: Array(1001).fill(one) } };
      }
      return { ok: true, data: { ...data, extra: "dropped" } };
    },
  });
  try {
    const foreign = await other.api(`/api/runners/${runner.runnerId}/usage`);
    const unknown = await other.api(`/api/runners/${crypto.randomUUID()}/usage`);
    assert.equal(foreign.status, 404);
    assert.equal(unknown.status, 404);
    assert.deepEqual(await foreign.json(), await unknown.json());
    // Even with a bad range, a foreign runner is just not found.
    assert.equal(
      await errorCode(await other.api(`/api/runners/${runner.runnerId}/usage?range=x`), 404),
      "not_found",
    );

    // The owner gets the runner's answer, in the documented shape only.
    const good = await owner.api(`/api/runners/${runner.runnerId}/usage?range=all`);
    const body = await good.json();
    assert.equal(good.status, 200);
    assert.equal(body.range, "all");
    assert.equal("extra" in body, false);
    // A runner answering another shape, or over 1000 sessions, is refused.
    for (const kind of ["bad", "huge"] as const) {
      answer = kind;
      const bad = await owner.api(`/api/runners/${runner.runnerId}/usage`);
      assert.equal(await errorCode(bad, 502, kind), "bad_runner_answer");
    }

    await runner.close();
    await eventually("the runner offline", async () => {
      const list = await (await owner.api("/api/runners")).json();
      return list[0]?.connected === false ? true : undefined;
    });
    const off = await owner.api(`/api/runners/${runner.runnerId}/usage`);
    assert.equal(await errorCode(off, 503), "runner_offline");
    const offBad = await owner.api(`/api/runners/${runner.runnerId}/usage?range=365d`);
    assert.equal(await errorCode(offBad, 400), "bad_request");
  } finally {
    await runner.close();
  }
});
