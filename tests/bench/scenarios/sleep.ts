/**
 * Scenario 9: idle sessions asleep. A real relay and a real runner with a
 * short `BATON_SLEEP_AFTER`: what each open session costs (relay + runner
 * tree RSS) while its worker runs and once it sleeps, and how long a prompt
 * to a sleeping session takes to reach the model, against the same prompt
 * to an awake one.
 *
 * @module
 */
import type { BenchContext } from "../_report.ts";
import { mb, ms, percentileOf } from "../_stats.ts";
import { json, signUp, Viewer } from "../../harness/client.ts";
import { MockLlm, MODEL } from "../../harness/mock_llm.ts";
import { RelayProcess, type RunnerProcess, startRunner, tempDir } from "../../harness/procs.ts";
import { procStat } from "../_proc.ts";

const SLEEP_AFTER = "2s";
/** Below this, per-session RSS differences are noise. */
const FLOOR = 100 * 1024;

/** RSS of a process and all its descendants (the runner: supervisor, daemon, workers). */
function treeRss(root: number): number {
  const parent = new Map<number, number>();
  for (const entry of Deno.readDirSync("/proc")) {
    const pid = Number(entry.name);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
      parent.set(pid, Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  const inTree = (pid: number): boolean => {
    for (let p: number | undefined = pid; p; p = parent.get(p)) if (p === root) return true;
    return false;
  };
  let total = 0;
  for (const pid of parent.keys()) {
    if (!inTree(pid)) continue;
    try {
      total += procStat(pid).rss;
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}

/** Runs the sleep scenario. */
export async function sleepScenario(ctx: BenchContext): Promise<void> {
  const n = ctx.quick ? 4 : 12;
  const llm = MockLlm.start();
  const relay = await RelayProcess.start();
  // The relay is the server under test; the runner and the scripted model
  // stay with this process on the load side.
  await ctx.pinning.toServer(relay.proc.pid);
  const home = await tempDir("baton-bench-sleep-");
  let runner: RunnerProcess | undefined;
  let viewer: Viewer | undefined;
  try {
    const user = await signUp(relay.url);
    await llm.writeModelsJson(home);
    runner = await startRunner({
      relayUrl: relay.url,
      apiKey: user.apiKey,
      home,
      env: { BATON_SLEEP_AFTER: SLEEP_AFTER },
    });
    const [r] = await (await user.api("/api/runners")).json();
    viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    const v = viewer;
    const total = () => procStat(relay.proc.pid).rss + treeRss(runner!.proc.pid);
    const count = (id: string, type: string) =>
      v.eventsOf(id).filter((e) => e.e.type === type).length;
    // One session first, ended, so one-time costs (the daemon loading pi's
    // model registry, the relay's caches) are in the base, not per session.
    llm.enqueue({ text: "warm" });
    const warm = (await (await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: r.id, cwd: home, model: MODEL, prompt: "warm up" }),
    )).json()).sessionId as string;
    v.subscribe(warm);
    await v.until(() => count(warm, "agent_end") === 1, "the warm-up answer");
    await user.api(`/api/sessions/${warm}/input`, json("POST", { kind: "end" }));
    await v.until(() => count(warm, "session_end") === 1, "the warm-up end");
    await new Promise((res) => setTimeout(res, 1500));
    const base = total();

    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      llm.enqueue({ text: `answer ${i}` });
      const res = await user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: r.id, cwd: home, model: MODEL, prompt: `session ${i}` }),
      );
      const id = (await res.json()).sessionId as string;
      ids.push(id);
      v.subscribe(id);
      await v.until(() => count(id, "agent_end") === 1, `session ${i} answered`);
    }
    const awake = total();
    await v.until(
      () => ids.every((id) => count(id, "session_sleep") === 1),
      "every session asleep",
      60_000,
    );
    await new Promise((res) => setTimeout(res, 1000));
    const asleep = total();
    const perAwake = (awake - base) / n;
    const perAsleep = Math.max(0, asleep - base) / n;
    ctx.log(
      `${n} sessions: base ${mb(base)}, awake ${mb(awake)}, asleep ${mb(asleep)} (relay + runner)`,
    );
    ctx.row({
      scenario: "9 sleep",
      case: `${n} idle sessions, relay + runner RSS`,
      metric: "memory per open session, asleep",
      baton: { name: "baton", value: perAsleep, text: mb(perAsleep) },
      baselines: [{ name: "awake (worker running)", value: perAwake, text: mb(perAwake) }],
      // Differences of whole-tree RSS are good to about 100 KB per session.
      ratios: [{ of: 0, inverse: true, label: "less", floor: FLOOR }],
      note: "difference of relay + runner tree RSS to before the sessions, per session; " +
        "in the ratio, less than 100 KB counts as 100 KB",
      goal: { text: "< 5 MB asleep", test: (f) => f.baton < 5 * 1024 * 1024 },
      detail: { base, awake, asleep, sessions: n },
    });

    // Wake each one with a prompt; then the same prompt to it awake.
    const wakes: number[] = [];
    const awakes: number[] = [];
    for (const id of ids) {
      for (const list of [wakes, awakes]) {
        // Let the spare worker come back, as between two people's messages.
        await new Promise((res) => setTimeout(res, 600));
        llm.enqueue({ text: "ok" });
        const texts = count(id, "message_update");
        const ends = count(id, "agent_end");
        const t0 = performance.now();
        const res = await user.api(
          `/api/sessions/${id}/input`,
          json("POST", { kind: "prompt", text: "go on" }),
        );
        if (!res.ok) throw new Error(`Prompt failed: ${res.status} ${await res.text()}`);
        await v.until(() => count(id, "message_update") > texts, "the answer's first text");
        list.push(performance.now() - t0);
        await v.until(() => count(id, "agent_end") > ends, "the answer's end");
      }
      if (count(id, "session_waking") !== 1) throw new Error("The first prompt did not wake it");
    }
    const w50 = percentileOf(wakes, 50);
    const a50 = percentileOf(awakes, 50);
    ctx.row({
      scenario: "9 sleep",
      case: `${wakes.length} prompts to sleeping sessions`,
      metric: "prompt → first model text at a viewer, p50 / p95",
      baton: { name: "baton", value: w50, text: `${ms(w50)} / ${ms(percentileOf(wakes, 95))}` },
      baselines: [{
        name: "awake session",
        value: a50,
        text: `${ms(a50)} / ${ms(percentileOf(awakes, 95))}`,
      }],
      ratios: [{ of: 0 }],
      goal: { text: "p50 < 1 s", test: (f) => f.baton < 1000 },
      note: `waking adds ${ms(Math.max(0, w50 - a50))}`,
      detail: { wakes, awakes },
    });
  } finally {
    await viewer?.close();
    await runner?.stop();
    await relay.stop();
    await llm.close();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
}
