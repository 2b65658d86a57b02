/**
 * Scenario 11: the usage summary over a long history. A real runner's HOME
 * holds 10,000 pi session files (pi's format, ten turns each, 120 days of
 * them, each last written when its session ran, so ~1% are from today); `GET /api/runners/{id}/usage` goes through a real relay to the
 * runner's index. Measured: the first answer (every file read once: what a
 * rescan per request would cost every time), warm answers, an
 * answer after ten files grew, and the first answer after a daemon restart
 * (the persisted index: nothing read again).
 *
 * @module
 */
import { join } from "node:path";
import { signUp } from "../../harness/client.ts";
import { RelayProcess, type RunnerProcess, startRunner, tempDir } from "../../harness/procs.ts";
import type { BenchContext } from "../_report.ts";
import { ms, percentileOf } from "../_stats.ts";

const FILES = 10_000;
const DAY = 86_400_000;

/** Writes `n` session files spread over 100 folders and 120 days; returns their paths. */
async function writeHistory(sessionsDir: string, n: number, turns: number): Promise<string[]> {
  const now = Date.now();
  const paths: string[] = [];
  const filler = "word ".repeat(60);
  for (let i = 0; i < n; i++) {
    const dir = join(sessionsDir, `--src-project${i % 100}--`);
    if (i < 100) await Deno.mkdir(dir, { recursive: true });
    const at = now - (i % 120) * DAY;
    const ts = new Date(at).toISOString();
    let text = JSON.stringify({
      type: "session",
      version: 3,
      id: crypto.randomUUID(),
      timestamp: ts,
      cwd: `/src/project${i % 100}`,
    }) + "\n";
    for (let t = 0; t < turns; t++) {
      text += JSON.stringify({
        type: "message",
        id: "u",
        parentId: null,
        timestamp: ts,
        message: { role: "user", content: filler, timestamp: at },
      }) + "\n" + assistant(at, i % 3 === 0 ? "gpt-4o" : "claude-sonnet-4-5", filler);
    }
    const path = join(dir, `${at}_${i}.jsonl`);
    await Deno.writeTextFile(path, text);
    // As a history is: each file last written when its session ran.
    await Deno.utime(path, new Date(at), new Date(at));
    paths.push(path);
  }
  const yesterday = new Date(now - DAY);
  for (let i = 0; i < Math.min(n, 100); i++) {
    await Deno.utime(join(sessionsDir, `--src-project${i}--`), yesterday, yesterday);
  }
  await Deno.utime(sessionsDir, yesterday, yesterday);
  return paths;
}

function assistant(at: number, model: string, text: string): string {
  return JSON.stringify({
    type: "message",
    id: "a",
    parentId: "u",
    timestamp: new Date(at).toISOString(),
    message: {
      role: "assistant",
      content: [{ type: "text", text }],
      provider: "p",
      model,
      usage: {
        input: 1200,
        output: 300,
        cacheRead: 4000,
        cacheWrite: 0,
        totalTokens: 5500,
        cost: { input: 0.0036, output: 0.0045, cacheRead: 0.0012, cacheWrite: 0, total: 0.0093 },
      },
      stopReason: "stop",
      timestamp: at,
    },
  }) + "\n";
}

/** Runs the usage scenario. */
export async function usage(ctx: BenchContext): Promise<void> {
  const turns = ctx.quick ? 4 : 10;
  const samples = ctx.quick ? 10 : 40;
  const home = await tempDir("baton-bench-usage-");
  const relay = await RelayProcess.start();
  // The relay and the runner are both on the path; the runner does the work.
  await ctx.pinning.toServer(relay.proc.pid);
  let runner: RunnerProcess | undefined;
  try {
    const t0 = performance.now();
    const paths = await writeHistory(join(home, ".baton", "sessions"), FILES, turns);
    ctx.log(`${FILES} session files written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const user = await signUp(relay.url);
    const start = async () => {
      runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
      const [r] = await (await user.api("/api/runners")).json();
      return r.id as string;
    };
    let runnerId = await start();
    const ask = async (range = "90d") => {
      const t = performance.now();
      const res = await user.api(`/api/runners/${runnerId}/usage?range=${range}`);
      const body = await res.json();
      if (res.status !== 200) {
        throw new Error(`usage answered ${res.status}: ${JSON.stringify(body)}`);
      }
      return { ms: performance.now() - t, body };
    };

    const cold = await ask();
    ctx.log(`first answer (reads all ${cold.body.filesIndexed} files): ${ms(cold.ms)}`);
    const warm: number[] = [];
    for (let i = 0; i < samples; i++) {
      warm.push((await ask(["7d", "30d", "90d", "all"][i % 4])).ms);
    }
    const p50 = percentileOf(warm, 50);
    const p99 = percentileOf(warm, 99);
    ctx.log(`warm answers: p50 ${ms(p50)}, p99 ${ms(p99)}`);

    // Ten of today's conversations take a turn (the live ones a runner has).
    for (const p of paths.filter((_, i) => i % 120 === 0).slice(0, 10)) {
      await Deno.writeTextFile(p, assistant(Date.now(), "claude-sonnet-4-5", "more"), {
        append: true,
      });
    }
    const grown = await ask();
    if (!(grown.body.totalCostUsd > cold.body.totalCostUsd)) {
      throw new Error("The turns appended to ten files were not counted");
    }
    ctx.log(`after 10 files grew: ${ms(grown.ms)}`);

    await runner!.stop();
    runnerId = await start();
    const restarted = await ask();
    ctx.log(`first answer after a daemon restart: ${ms(restarted.ms)}`);

    const bytes = JSON.stringify(cold.body).length;
    ctx.row({
      scenario: "11 usage",
      case: `usage over ${FILES / 1000}k pi session files (${turns} turns each), warm index`,
      metric: "answer time p50 (p99)",
      baton: { name: "baton", value: p50, text: `${ms(p50)} (${ms(p99)})` },
      baselines: [{ name: "rescan", value: cold.ms, text: ms(cold.ms) }],
      ratios: [{ of: 0, label: "of a rescan" }],
      goal: { text: "≤ 200 ms", test: ({ baton }) => baton <= 200 },
      note: `rescan: the first answer, reading every file (what a rescan per request would ` +
        `cost each time); after 10 files grew ${ms(grown.ms)}; answer ${
          (bytes / 1024).toFixed(0)
        } KB (${cold.body.sessions.length} of ${cold.body.sessionCount} sessions listed)`,
      detail: { cold: cold.ms, warm, grown: grown.ms, restarted: restarted.ms, bytes },
    });
    ctx.row({
      scenario: "11 usage",
      case: `first usage answer after a daemon restart (${FILES / 1000}k files, index on disk)`,
      metric: "answer time",
      baton: { name: "baton", value: restarted.ms, text: ms(restarted.ms) },
      baselines: [{ name: "rescan", value: cold.ms, text: ms(cold.ms) }],
      ratios: [{ of: 0, label: "of a rescan" }],
      goal: { text: "≤ 0.3 of a rescan", test: ({ ratios: [r] }) => r! <= 0.3 },
      note: "the restarted daemon loads its persisted index, checks every file once (stat) " +
        "and reads none again",
      detail: { restarted: restarted.ms, cold: cold.ms },
    });
  } finally {
    await runner?.stop();
    await relay.stop();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
}
