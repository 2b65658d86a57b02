/**
 * Scenario 4: `POST /api/runners/spawn` → the session's first event reaching
 * a viewer, with a real relay, a real runner and the scripted model, with
 * one warm worker (the default) and with none (`BATON_WARM_WORKERS=0`).
 *
 * @module
 */
import type { BenchContext } from "../_report.ts";
import { ms, percentileOf } from "../_stats.ts";
import { json, signUp, type User } from "../../harness/client.ts";
import { MockLlm } from "../../harness/mock_llm.ts";
import { RelayProcess, type RunnerProcess, startRunner, tempDir } from "../../harness/procs.ts";

interface SpawnTiming {
  /** POST answered. */
  response: number;
  /** First event of the session at the viewer. */
  firstEvent: number;
  firstEventType: string;
  /** First streamed text of the model at the viewer. */
  firstText: number;
}

/** A viewer that notes when each session's first event and first text arrive. */
class TimingViewer {
  readonly first = new Map<string, { at: number; type: string }>();
  readonly firstText = new Map<string, number>();
  #waiters: (() => void)[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.onmessage = (ev) => {
      const msg = JSON.parse(ev.data as string);
      if (msg.t !== "events") return;
      const now = performance.now();
      for (const e of msg.events as { e: { type: string } }[]) {
        if (!this.first.has(msg.sessionId)) {
          this.first.set(msg.sessionId, { at: now, type: e.e.type });
        }
        if (e.e.type === "message_update" && !this.firstText.has(msg.sessionId)) {
          this.firstText.set(msg.sessionId, now);
        }
      }
      for (const w of this.#waiters.splice(0)) w();
    };
  }

  static async open(url: string, apiKey: string): Promise<TimingViewer> {
    // deno-lint-ignore no-explicit-any
    const ws: WebSocket = new (WebSocket as any)(url.replace(/^http/, "ws") + "/_viewer", {
      headers: { "x-api-key": apiKey },
    });
    await new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = () => reject(new Error("Viewer failed"));
    });
    return new TimingViewer(ws);
  }

  subscribe(sessionId: string): void {
    this.ws.send(JSON.stringify({ t: "subscribe", sessionId, since: 0 }));
  }

  async until(pred: () => boolean, timeoutMs = 30_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (!pred()) {
      if (performance.now() > deadline) throw new Error("Timed out waiting for session events");
      await new Promise<void>((r) => {
        this.#waiters.push(r);
        setTimeout(r, 100);
      });
    }
  }
}

/** The relay, its user and the scripted model, shared by both runs. */
interface SpawnStack {
  relay: RelayProcess;
  user: User;
  llm: MockLlm;
}

async function measure(
  ctx: BenchContext,
  { relay, user, llm }: SpawnStack,
  warm: number,
  spawns: number,
  settleMs: number,
): Promise<SpawnTiming[]> {
  let runner: RunnerProcess | undefined;
  let viewer: TimingViewer | undefined;
  const home = await tempDir("baton-bench-runner-");
  try {
    await llm.writeModelsJson(home);
    runner = await startRunner({
      relayUrl: relay.url,
      apiKey: user.apiKey,
      home,
      env: { BATON_WARM_WORKERS: String(warm) },
    });
    const runners: { id: string; connected: boolean }[] = await (await user.api("/api/runners"))
      .json();
    const r = runners.find((x) => x.connected);
    if (!r) throw new Error("The runner is not connected");
    viewer = await TimingViewer.open(relay.url, user.apiKey);
    const v = viewer;
    const out: SpawnTiming[] = [];
    // One spawn first (not counted) so the relay, runner and page cache are warm.
    for (let i = 0; i <= spawns; i++) {
      await new Promise((res) => setTimeout(res, settleMs));
      const t0 = performance.now();
      const res = await user.api(
        "/api/runners/spawn",
        json("POST", {
          runnerId: r.id,
          cwd: home,
          model: { provider: "mock", id: "mock-1" },
          prompt: "Say OK",
        }),
      );
      const t1 = performance.now();
      if (!res.ok) throw new Error(`Spawn failed: ${res.status} ${await res.text()}`);
      const { sessionId } = await res.json();
      v.subscribe(sessionId);
      await v.until(() => v.firstText.has(sessionId));
      const first = v.first.get(sessionId)!;
      if (i > 0) {
        out.push({
          response: t1 - t0,
          firstEvent: first.at - t0,
          firstEventType: first.type,
          firstText: v.firstText.get(sessionId)! - t0,
        });
      }
      await user.api(`/api/sessions/${sessionId}/input`, json("POST", { kind: "end" }));
    }
    ctx.log(
      `spawn, ${warm} warm: first event ${out.map((t) => t.firstEvent.toFixed(0)).join(", ")} ms`,
    );
    return out;
  } finally {
    viewer?.ws.close();
    await runner?.stop();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
}

/** Runs the spawn scenario. */
export async function spawnLatency(ctx: BenchContext): Promise<void> {
  const llm = MockLlm.start();
  const relay = await RelayProcess.start();
  // The relay is the server under test; the runner, its workers and the
  // scripted model stay with this process on the load side.
  await ctx.pinning.toServer(relay.proc.pid);
  let warmRuns: SpawnTiming[], coldRuns: SpawnTiming[];
  try {
    const stack = { relay, llm, user: await signUp(relay.url) };
    warmRuns = await measure(ctx, stack, 1, ctx.quick ? 3 : 20, ctx.quick ? 800 : 2500);
    coldRuns = await measure(ctx, stack, 0, ctx.quick ? 1 : 10, 300);
  } finally {
    await relay.stop();
    await llm.close();
  }
  const p = (runs: SpawnTiming[], key: "firstEvent" | "firstText" | "response", q: number) =>
    percentileOf(runs.map((r) => r[key]), q);
  for (
    const [key, label] of [
      ["firstEvent", "spawn → first event at a viewer"],
      ["firstText", "spawn → first model text at a viewer"],
    ] as const
  ) {
    const w50 = p(warmRuns, key, 50);
    const c50 = p(coldRuns, key, 50);
    ctx.row({
      scenario: "4 spawn",
      case: `${warmRuns.length} spawns, 1 warm worker`,
      metric: `${label}, p50 / p95`,
      baton: { name: "baton", value: w50, text: `${ms(w50)} / ${ms(p(warmRuns, key, 95))}` },
      baselines: [{
        name: "no warm worker",
        value: c50,
        text: `${ms(c50)} / ${ms(p(coldRuns, key, 95))} (${coldRuns.length} spawns)`,
      }],
      ratios: [{ of: 0, inverse: true, label: "faster" }],
      ...(key === "firstEvent"
        ? { goal: { text: "p50 < 500 ms", test: (f) => f.baton < 500 } }
        : {}),
      note: key === "firstEvent"
        ? `first event: ${warmRuns[0]?.firstEventType}; POST answered in ${
          ms(p(warmRuns, "response", 50))
        } p50`
        : undefined,
      detail: { warm: warmRuns, cold: coldRuns },
    });
  }
}
