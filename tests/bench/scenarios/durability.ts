/**
 * Scenario 3: events per second one session gets accepted (stored and
 * acked) with the durable SQLite log, against the same relay with the log
 * kept in memory only (`servers/baton_relay.ts --volatile`).
 *
 * @module
 */
import type { BenchContext } from "../_report.ts";
import { ms, si } from "../_stats.ts";
import type { FanoutResult } from "../load/fanout.ts";
import { runLoad, type Server, startServers } from "./fanout.ts";

/** Runs the durability scenario (one round of it: `main.ts` repeats it). */
export async function durability(ctx: BenchContext): Promise<void> {
  const [durable, volatile] = await startServers(ctx, "baton", ["baton", ["--volatile"]]);
  try {
    for (const batch of ctx.quick ? [1] : [1, 50]) {
      const runs: Partial<Record<"durable" | "volatile", FanoutResult>> = {};
      for (const [name, server] of [["durable", durable], ["volatile", volatile]] as const) {
        const r = await ingestLoad(
          server,
          batch,
          ctx.quick ? 200 : 1000,
          ctx.quick ? 800 : 3000,
        );
        ctx.log(
          `accept, frames of ${batch}, ${name}: ${si(r.eventsPerSec)} events/s, ack p50 ${
            ms(r.latency.p50)
          }, server ${(r.serverCpu * 100).toFixed(0)}% CPU`,
        );
        runs[name] = r;
      }
      const d = runs.durable!;
      const v = runs.volatile!;
      ctx.row({
        scenario: "3 durability",
        case: `one session, ${batch === 1 ? "one event per frame" : `frames of ${batch} events`}`,
        metric: "events/s accepted (acked)",
        baton: { name: "baton", value: d.eventsPerSec, text: si(d.eventsPerSec) },
        baselines: [{ name: "log in memory", value: v.eventsPerSec, text: si(v.eventsPerSec) }],
        ratios: [{ of: 0 }],
        goal: {
          text: "≥ 5,000 events/s and ratio ≥ 0.8",
          test: ({ baton, ratios: [ratio] }) => baton >= 5000 && ratio! >= 0.8,
        },
        note: `ack p50 ${ms(d.latency.p50)}; server ${(d.serverCpu * 100).toFixed(0)}% CPU`,
        detail: { durable: d, volatile: v },
      });
    }
  } finally {
    await durable.proc.stop();
    await volatile.proc.stop();
  }
}

/**
 * Durable ingest: one session's events sent as fast as the relay acks them
 * (2,000 in flight), in frames of `batch`, with no viewer.
 */
export function ingestLoad(
  server: Server,
  batch: number,
  warmupMs: number,
  durationMs: number,
): Promise<FanoutResult> {
  return runLoad(server, {
    viewers: 0,
    client: "native",
    mode: "ack",
    window: 2000,
    rate: 0,
    batch,
    warmupMs,
    durationMs,
  });
}
