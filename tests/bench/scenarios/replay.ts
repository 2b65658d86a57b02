/**
 * Scenario 2: a viewer joins a session that has 10,000 stored events, from
 * seq 0 and from the middle: events/s and time until `caught_up`. Baseline:
 * the bare broadcaster sending the same events from memory.
 *
 * @module
 */
import type { BenchContext } from "../_report.ts";
import { ms, percentileOf, si } from "../_stats.ts";
import { EventSource, frameSeqs } from "../_workload.ts";
import { spawnSession, SyntheticRunner } from "../clients/synthetic_runner.ts";
import { type Server, startServers } from "./fanout.ts";

/** Sends `total` events into a new session through a synthetic runner; resolves once acked. */
export async function seedSession(server: Server, total: number): Promise<string> {
  const runner = await SyntheticRunner.connect({ url: server.url, apiKey: server.apiKey });
  try {
    const sessionId = await spawnSession(server.url, server.apiKey, runner.runnerId);
    const events = new EventSource();
    const done = new Promise<void>((resolve) => {
      runner.onAck = (_s, seq) => seq >= total && resolve();
    });
    for (let first = 1; first <= total; first += 500) {
      runner.send(events.frame(sessionId, first, Math.min(total, first + 499), Date.now()));
    }
    await done;
    return sessionId;
  } finally {
    runner.close();
  }
}

interface ReplayRun {
  ms: number;
  events: number;
  /** The viewer, still open when asked for (`keepOpen`). */
  ws: WebSocket;
}

/** Opens a viewer and times the replay until `caught_up`; closes it then unless `keepOpen`. */
export function replayOnce(
  url: string,
  headers: Record<string, string>,
  subscribe: string | null,
  keepOpen = false,
): Promise<ReplayRun> {
  return new Promise((resolve, reject) => {
    // deno-lint-ignore no-explicit-any
    const ws: WebSocket = new (WebSocket as any)(url, { headers });
    let t0 = 0;
    let events = 0;
    ws.onopen = () => {
      if (!subscribe) t0 = performance.now();
    };
    ws.onerror = () => reject(new Error("Replay viewer failed"));
    ws.onmessage = (ev) => {
      const text = ev.data as string;
      const seqs = frameSeqs(text);
      if (seqs) {
        events += seqs[1] - seqs[0] + 1;
        return;
      }
      const msg = JSON.parse(text);
      if (msg.t === "hello" && subscribe) {
        t0 = performance.now();
        ws.send(subscribe);
      } else if (msg.t === "caught_up") {
        const took = performance.now() - t0;
        if (!keepOpen) ws.close();
        resolve({ ms: took, events, ws });
      }
    };
  });
}

/** Runs the replay scenario. */
export async function replay(ctx: BenchContext): Promise<void> {
  const total = 10_000;
  const repeats = ctx.quick ? 3 : 7;
  const [baton, bare] = await startServers(ctx, "baton", "bare");
  try {
    const sessionId = await seedSession(baton, total);
    for (const since of [0, total / 2]) {
      const b: ReplayRun[] = [];
      const a: ReplayRun[] = [];
      for (let i = 0; i < repeats; i++) {
        b.push(
          await replayOnce(
            baton.url.replace(/^http/, "ws") + "/_viewer",
            { "x-api-key": baton.apiKey },
            JSON.stringify({ t: "subscribe", sessionId, since }),
          ),
        );
        a.push(
          await replayOnce(
            bare.url.replace(/^http/, "ws") + `/replay?total=${total}&since=${since}`,
            {},
            null,
          ),
        );
      }
      for (const r of [...a, ...b]) {
        if (r.events !== total - since) {
          throw new Error(`Replay delivered ${r.events} events, expected ${total - since}`);
        }
      }
      const bMs = percentileOf(b.map((r) => r.ms), 50);
      const aMs = percentileOf(a.map((r) => r.ms), 50);
      const rate = (t: number) => ((total - since) / t) * 1000;
      ctx.log(`replay since ${since}: baton ${ms(bMs)}, bare ${ms(aMs)}`);
      ctx.row({
        scenario: "2 replay",
        case: `${total - since} of ${total} events (since ${since})`,
        metric: "time to caught_up (events/s)",
        baton: { name: "baton", value: bMs, text: `${ms(bMs)} (${si(rate(bMs))}/s)` },
        baselines: [{
          name: "(a) from memory",
          value: aMs,
          text: `${ms(aMs)} (${si(rate(aMs))}/s)`,
        }],
        // Of the rates: the baseline's time over baton's.
        ratios: [{ of: 0, inverse: true, label: "a" }],
        note: since === 0
          ? "the first 9,000 come from SQLite, the last 1,000 from the ring"
          : "4,000 from SQLite, 1,000 from the ring",
        detail: { baton: b, bare: a },
      });
    }
  } finally {
    await baton.proc.stop();
    await bare.proc.stop();
  }
}
