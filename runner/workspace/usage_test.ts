import assert from "node:assert/strict";
import { join } from "node:path";
import { RequestError } from "../control_link.ts";
import { answerUsage, LINE_CAP, rangeStart, UsageIndex } from "./usage.ts";

const NOW = Date.parse("2026-11-26T12:00:00Z");
const DAY = 86_400_000;

/** pi's session header line (docs/session-format.md). */
function header(id: string, cwd: string, at: number): string {
  return JSON.stringify({
    type: "session",
    version: 3,
    id,
    timestamp: new Date(at).toISOString(),
    cwd,
  }) + "\n";
}

/** An assistant message entry with usage as pi writes it. */
function assistant(
  at: number,
  u: { input: number; output: number; cacheRead?: number; cacheWrite?: number; cost: number },
  model = "claude-sonnet-4-5",
): string {
  const cacheRead = u.cacheRead ?? 0;
  const cacheWrite = u.cacheWrite ?? 0;
  return JSON.stringify({
    type: "message",
    id: crypto.randomUUID().slice(0, 8),
    parentId: null,
    timestamp: new Date(at).toISOString(),
    message: {
      role: "assistant",
      content: [{ type: "text", text: "ok" }],
      api: "anthropic-messages",
      provider: "anthropic",
      model,
      usage: {
        input: u.input,
        output: u.output,
        cacheRead,
        cacheWrite,
        totalTokens: u.input + u.output + cacheRead + cacheWrite,
        cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: u.cost },
      },
      stopReason: "stop",
      timestamp: at,
    },
  }) + "\n";
}

function user(at: number, text: string): string {
  return JSON.stringify({
    type: "message",
    id: crypto.randomUUID().slice(0, 8),
    parentId: null,
    timestamp: new Date(at).toISOString(),
    message: { role: "user", content: text, timestamp: at },
  }) + "\n";
}

async function setup() {
  const root = await Deno.makeTempDir();
  const sessionsDir = join(root, "sessions");
  const conversationsDir = join(root, "runner", "conversations");
  const indexFile = join(root, "runner", "usage-index.json");
  const made: UsageIndex[] = [];
  const make = () => {
    const index = new UsageIndex({ sessionsDir, conversationsDir, indexFile, now: () => NOW });
    made.push(index);
    return index;
  };
  /** Waits for every index's background save, then removes the folder. */
  const cleanup = async () => {
    for (const index of made) await index.flush();
    await Deno.remove(root, { recursive: true });
  };
  const write = async (cwd: string, name: string, text: string) => {
    const dir = join(sessionsDir, `--${cwd.replace(/^\//, "").replaceAll("/", "-")}--`);
    await Deno.mkdir(dir, { recursive: true });
    const path = join(dir, name);
    await Deno.writeTextFile(path, text);
    return path;
  };
  return { root, sessionsDir, conversationsDir, indexFile, make, write, cleanup };
}

Deno.test("usage totals match the numbers written in the session files", async () => {
  const t = await setup();
  try {
    await t.write(
      "/w/a",
      "a.jsonl",
      header("pi-a", "/w/a", NOW - 2 * DAY) + user(NOW - 2 * DAY, "hi") +
        assistant(NOW - 2 * DAY, { input: 100, output: 20, cacheRead: 50, cost: 0.25 }) +
        assistant(NOW - DAY, { input: 10, output: 5, cacheWrite: 7, cost: 0.05 }),
    );
    await t.write(
      "/w/b",
      "b.jsonl",
      header("pi-b", "/w/b", NOW - DAY) +
        assistant(NOW - DAY, { input: 1000, output: 300, cost: 1.1 }, "gpt-4o"),
    );
    const s = await t.make().summary("90d");
    // By hand: input 100+50 + 10+7 + 1000 = 1167; output 20+5+300 = 325; cost 1.4.
    assert.equal(s.totalInputTokens, 1167);
    assert.equal(s.totalOutputTokens, 325);
    assert.equal(s.totalCostUsd, 1.4);
    assert.equal(s.totalCacheReadTokens, 50);
    assert.equal(s.totalCacheWriteTokens, 7);
    assert.equal(s.sessionCount, 2);
    assert.equal(s.truncated, false);
    assert.deepEqual(
      s.sessions.map((
        x,
      ) => [x.piSessionId, x.cwd, x.model, x.inputTokens, x.outputTokens, x.costUsd]),
      [["pi-b", "/w/b", "gpt-4o", 1000, 300, 1.1], [
        "pi-a",
        "/w/a",
        "claude-sonnet-4-5",
        167,
        25,
        0.3,
      ]],
    );
    assert.equal(s.sessions[1]!.startedAt, new Date(NOW - 2 * DAY).toISOString());
    assert.equal(s.sessions[1]!.sessionId, null);
    assert.deepEqual(s.days, [
      { date: "2026-11-24", inputTokens: 150, outputTokens: 20, costUsd: 0.25 },
      { date: "2026-11-25", inputTokens: 1017, outputTokens: 305, costUsd: 1.15 },
    ]);
    assert.deepEqual(s.models, [
      { model: "gpt-4o", inputTokens: 1000, outputTokens: 300, costUsd: 1.1 },
      { model: "claude-sonnet-4-5", inputTokens: 167, outputTokens: 25, costUsd: 0.3 },
    ]);
  } finally {
    await t.cleanup();
  }
});

Deno.test("usage ranges count whole UTC days, today included", async () => {
  assert.equal(rangeStart("7d", NOW), "2026-11-20");
  assert.equal(rangeStart("30d", NOW), "2026-10-28");
  assert.equal(rangeStart("all", NOW), "");
  const t = await setup();
  try {
    await t.write(
      "/w",
      "old.jsonl",
      header("old", "/w", NOW - 10 * DAY) +
        assistant(NOW - 10 * DAY, { input: 1, output: 1, cost: 1 }),
    );
    await t.write(
      "/w",
      "new.jsonl",
      header("new", "/w", NOW - 6 * DAY) +
        assistant(NOW - 6 * DAY, { input: 2, output: 2, cost: 2 }),
    );
    await t.write(
      "/w",
      "ancient.jsonl",
      header("ancient", "/w", NOW - 200 * DAY) +
        assistant(NOW - 200 * DAY, { input: 4, output: 4, cost: 4 }),
    );
    const index = t.make();
    const week = await index.summary("7d");
    assert.deepEqual(week.sessions.map((s) => s.piSessionId), ["new"]);
    assert.equal(week.totalCostUsd, 2);
    assert.equal((await index.summary("30d")).totalCostUsd, 3);
    assert.equal((await index.summary("90d")).totalCostUsd, 3);
    const all = await index.summary("all");
    assert.equal(all.totalCostUsd, 7);
    assert.equal(all.filesIndexed, 3);
  } finally {
    await t.cleanup();
  }
});

Deno.test("usage reads only the bytes appended to changed files", async () => {
  const t = await setup();
  try {
    const a = await t.write(
      "/w",
      "a.jsonl",
      header("a", "/w", NOW) +
        assistant(NOW, { input: 10, output: 1, cost: 0.1 }),
    );
    await t.write(
      "/w",
      "b.jsonl",
      header("b", "/w", NOW) +
        assistant(NOW, { input: 20, output: 2, cost: 0.2 }),
    );
    const index = t.make();
    assert.equal((await index.summary("all")).totalInputTokens, 30);
    assert.equal(index.stats.lastRefreshFilesRead, 2);
    const bytesBefore = index.stats.bytesRead;

    await index.summary("all");
    assert.equal(index.stats.lastRefreshFilesRead, 0, "nothing changed, nothing read");

    const line = assistant(NOW, { input: 5, output: 5, cost: 0.05 });
    await Deno.writeTextFile(a, line, { append: true });
    const s = await index.summary("all");
    assert.equal(s.totalInputTokens, 35);
    assert.equal(s.totalOutputTokens, 8);
    assert.equal(s.totalCostUsd, 0.35);
    assert.equal(index.stats.lastRefreshFilesRead, 1, "only the changed file");
    assert.equal(index.stats.bytesRead - bytesBefore, new TextEncoder().encode(line).length);
  } finally {
    await t.cleanup();
  }
});

Deno.test("usage skips corrupt lines and waits for a line's newline", async () => {
  const t = await setup();
  try {
    const full = assistant(NOW, { input: 7, output: 3, cost: 0.07 });
    const path = await t.write(
      "/w",
      "a.jsonl",
      header("a", "/w", NOW) + '{"type":"message","usage":\n' + 'not json at all "usage"\n' +
        JSON.stringify({ type: "message", message: { role: "assistant", usage: "x" } }) + "\n" +
        assistant(NOW, { input: 1, output: 1, cost: 0.01 }) + full.slice(0, 40),
    );
    const index = t.make();
    let s = await index.summary("all");
    assert.equal(s.totalInputTokens, 1, "the half-written last line is not counted yet");
    assert.equal(s.skippedLines, 2);
    await Deno.writeTextFile(path, full.slice(40), { append: true });
    s = await index.summary("all");
    assert.equal(s.totalInputTokens, 8);
    assert.equal(s.totalCostUsd, 0.08);
  } finally {
    await t.cleanup();
  }
});

Deno.test("usage skips a line over the cap and counts the lines after it", async () => {
  const t = await setup();
  try {
    const huge = user(NOW, "x".repeat(LINE_CAP + 10));
    await t.write(
      "/w",
      "a.jsonl",
      header("a", "/w", NOW) + huge +
        assistant(NOW, { input: 3, output: 4, cost: 0.5 }),
    );
    const s = await t.make().summary("all");
    assert.equal(s.totalInputTokens, 3);
    assert.equal(s.totalOutputTokens, 4);
    assert.equal(s.skippedLines, 1);
  } finally {
    await t.cleanup();
  }
});

Deno.test("usage re-reads a file that was replaced or shrank, and forgets deleted ones", async () => {
  const t = await setup();
  try {
    const path = await t.write(
      "/w",
      "a.jsonl",
      header("a", "/w", NOW) +
        assistant(NOW, { input: 10, output: 10, cost: 1 }) +
        assistant(NOW, { input: 10, output: 10, cost: 1 }),
    );
    const index = t.make();
    assert.equal((await index.summary("all")).totalCostUsd, 2);
    await Deno.writeTextFile(
      path,
      header("a", "/w", NOW) +
        assistant(NOW, { input: 1, output: 1, cost: 0.5 }),
    );
    assert.equal((await index.summary("all")).totalCostUsd, 0.5);
    await Deno.remove(path);
    const s = await index.summary("all");
    assert.equal(s.totalCostUsd, 0);
    assert.equal(s.filesIndexed, 0);
  } finally {
    await t.cleanup();
  }
});

Deno.test("usage names the baton session of a conversation the runner remembers", async () => {
  const t = await setup();
  try {
    const path = await t.write(
      "/w",
      "2026_x.jsonl",
      header("pi-x", "/w", NOW) +
        assistant(NOW, { input: 1, output: 1, cost: 0.1 }),
    );
    await t.write(
      "/w",
      "2026_y.jsonl",
      header("pi-y", "/w", NOW) +
        assistant(NOW, { input: 1, output: 1, cost: 0.2 }),
    );
    await Deno.mkdir(t.conversationsDir, { recursive: true });
    const sid = crypto.randomUUID();
    await Deno.writeTextFile(
      join(t.conversationsDir, `${sid}.json`),
      JSON.stringify({ piSessionFile: path }),
    );
    const index = t.make();
    let s = await index.summary("all");
    assert.deepEqual(s.sessions.map((x) => [x.piSessionId, x.sessionId]), [
      ["pi-y", null],
      ["pi-x", sid],
    ]);
    // The relay deleted the session but the file stays (a pi run outside baton's reach).
    await Deno.remove(join(t.conversationsDir, `${sid}.json`));
    s = await index.summary("all");
    assert.equal(s.sessions.find((x) => x.piSessionId === "pi-x")!.sessionId, null);
  } finally {
    await t.cleanup();
  }
});

Deno.test("usage index survives a restart without rereading, in an owner-only file", async () => {
  const t = await setup();
  try {
    for (let i = 0; i < 5; i++) {
      await t.write(
        `/w/${i}`,
        `${i}.jsonl`,
        header(`p${i}`, `/w/${i}`, NOW) +
          assistant(NOW, { input: i, output: 1, cost: 0.125 }),
      );
    }
    const first = t.make();
    const before = await first.summary("all");
    assert.equal(first.stats.lastRefreshFilesRead, 5);
    await first.flush();
    assert.equal((await Deno.stat(t.indexFile)).mode! & 0o777, 0o600);

    const second = t.make();
    const after = await second.summary("all");
    assert.equal(second.stats.filesRead, 0, "a restarted daemon reads no session file again");
    assert.deepEqual(after, before);

    // A corrupt index is not fatal: the next instance rebuilds it.
    await Deno.writeTextFile(t.indexFile, "{oops");
    const third = t.make();
    assert.deepEqual(await third.summary("all"), before);
    assert.equal(third.stats.filesRead, 5);
  } finally {
    await t.cleanup();
  }
});

Deno.test("between full sweeps a refresh checks only recent files and changed folders", async () => {
  const t = await setup();
  let clock = 0;
  const index = new UsageIndex({
    sessionsDir: t.sessionsDir,
    conversationsDir: t.conversationsDir,
    indexFile: t.indexFile,
    now: () => NOW,
    clock: () => clock,
    fullSweepMs: 30_000,
  });
  try {
    const old = new Date(Date.now() - 2 * DAY);
    const paths: string[] = [];
    for (let i = 0; i < 5; i++) {
      paths.push(
        await t.write(
          "/w/old",
          `${i}.jsonl`,
          header(`o${i}`, "/w/old", NOW) +
            assistant(NOW, { input: 1, output: 1, cost: 1 }),
        ),
      );
    }
    const live = await t.write(
      "/w/live",
      "live.jsonl",
      header("live", "/w/live", NOW) +
        assistant(NOW, { input: 1, output: 1, cost: 1 }),
    );
    // Everything but the live conversation was last written two days ago.
    for (const p of paths) await Deno.utime(p, old, old);
    await Deno.utime(join(paths[0]!, ".."), old, old);
    await Deno.utime(t.sessionsDir, old, old);
    assert.equal((await index.summary("all")).totalCostUsd, 6);
    assert.equal(index.stats.lastRefreshFull, true);

    clock += 1000;
    await Deno.writeTextFile(live, assistant(NOW, { input: 1, output: 1, cost: 1 }), {
      append: true,
    });
    let s = await index.summary("all");
    assert.equal(index.stats.lastRefreshFull, false);
    assert.equal(index.stats.lastRefreshFilesChecked, 1, "only the live file was checked");
    assert.equal(s.totalCostUsd, 7);

    // A quiet conversation that resumes waits for the next full sweep (30 s).
    await Deno.writeTextFile(paths[1]!, assistant(NOW, { input: 1, output: 1, cost: 1 }), {
      append: true,
    });
    assert.equal((await index.summary("all")).totalCostUsd, 7);
    clock += 30_000;
    s = await index.summary("all");
    assert.equal(index.stats.lastRefreshFull, true);
    assert.equal(s.totalCostUsd, 8);

    // A conversation added to or removed from a quiet folder shows at once.
    await Deno.utime(join(paths[0]!, ".."), old, old);
    clock += 1000;
    await index.summary("all");
    await Deno.remove(paths[2]!);
    await t.write(
      "/w/old",
      "new.jsonl",
      header("n", "/w/old", NOW) +
        assistant(NOW, { input: 1, output: 1, cost: 0.5 }),
    );
    clock += 1000;
    s = await index.summary("all");
    assert.equal(index.stats.lastRefreshFull, false);
    assert.equal(s.totalCostUsd, 7.5);
    assert.equal(s.filesIndexed, 6);
  } finally {
    await index.flush();
    await t.cleanup();
  }
});

Deno.test("the runner's usage request takes only the four ranges, 90d by default", async () => {
  const t = await setup();
  try {
    const index = t.make();
    assert.equal((await answerUsage(index, {})).range, "90d");
    assert.equal((await answerUsage(index, { range: "all" })).range, "all");
    for (const range of ["1y", 7, null, "../x", "7d\u0000"]) {
      await assert.rejects(
        answerUsage(index, { range }),
        (err: unknown) => err instanceof RequestError && err.code === "bad_request",
      );
    }
  } finally {
    await t.cleanup();
  }
});
