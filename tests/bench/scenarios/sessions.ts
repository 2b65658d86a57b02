/**
 * Scenario 8: many sessions at once, as a team's relay carries them: 100
 * sessions streaming together, each watched by two viewers (a laptop and a
 * phone), against the same baselines routing by session (the bare server's
 * rooms, socket.io's rooms). Saturated (each session with a few events in
 * flight, like a model streaming as fast as it can) and at a steady 50
 * events/s per session, where what it costs the server matters more than
 * how fast it can go.
 *
 * @module
 */
import type { BenchContext, RatioSpec } from "../_report.ts";
import { ms, si } from "../_stats.ts";
import type { ServerKind } from "../clients/viewers.ts";
import type { FanoutResult } from "../load/fanout.ts";
import { LABEL, runLoad, startServers } from "./fanout.ts";

const VIEWERS = 2;
/** Events in flight per session when saturated. */
const WINDOW = 16;
/** Events per second per session in the steady run. */
const RATE = 50;

/** Runs the many-sessions scenario. */
export async function sessions(ctx: BenchContext): Promise<void> {
  const count = ctx.quick ? 20 : 100;
  // Quick runs measure baton alone (a smoke run; take ratios from full runs).
  const kinds: readonly ServerKind[] = ctx.quick ? ["baton"] : ["bare", "socketio", "baton"];
  const servers = await startServers(ctx, ...kinds);
  const byKind = new Map<ServerKind, (typeof servers)[number]>(servers.map((s) => [s.kind, s]));
  const cpu = (r: FanoutResult) => `${(r.serverCpu * 100).toFixed(0)}%`;
  const lost = (rs: FanoutResult[]) =>
    rs.some((r) => r.undelivered || r.gaps) ? "events lost or out of order; " : "";
  try {
    for (const mode of ["throughput", "rate"] as const) {
      const runs = new Map<ServerKind, FanoutResult>();
      for (const kind of kinds) {
        const r = await runLoad(byKind.get(kind)!, {
          viewers: VIEWERS,
          sessions: count,
          client: "native",
          mode,
          window: WINDOW,
          rate: RATE,
          batch: 1,
          warmupMs: ctx.quick ? 300 : 1000,
          durationMs: ctx.quick ? 1000 : 3000,
        });
        ctx.log(
          `${count} sessions × ${VIEWERS} viewers, ${mode}, ${LABEL[kind]}: ${
            si(r.eventsPerSec)
          } events/s, p50 ${ms(r.latency.p50)}, p99 ${ms(r.latency.p99)}, server ${cpu(r)}` +
            (r.undelivered || r.gaps ? `, LOST ${r.undelivered} GAPS ${r.gaps}` : ""),
        );
        runs.set(kind, r);
      }
      const b = runs.get("baton")!;
      const all = [...runs.values()];
      const latency = (r: FanoutResult) => `${ms(r.latency.p50)} / ${ms(r.latency.p99)}`;
      /** The baselines that ran (none in quick runs), by their table name. */
      const others = (["bare", "socketio"] as const).flatMap((kind) => {
        const r = runs.get(kind);
        return r ? [{ name: kind === "bare" ? "(a)" : "(b)", r }] : [];
      });
      const baselines = (value: (r: FanoutResult) => number, text: (r: FanoutResult) => string) =>
        others.map(({ name, r }) => ({ name, value: value(r), text: text(r) }));
      const ratios: RatioSpec[] = others.map(({ name }, i) => ({ of: i, label: name.slice(1, 2) }));
      if (mode === "throughput") {
        ctx.row({
          scenario: "8 sessions",
          case: `${count} sessions × ${VIEWERS} viewers, saturated (${WINDOW} in flight each)`,
          metric: "events/s (all sessions)",
          baton: { name: "baton", value: b.eventsPerSec, text: si(b.eventsPerSec) },
          baselines: baselines((r) => r.eventsPerSec, (r) => si(r.eventsPerSec)),
          ratios,
          note: `${lost(all)}latency p50 / p99: baton ${latency(b)}${
            others.map(({ name, r }) => `, ${name} ${latency(r)}`).join("")
          }; server CPU baton ${cpu(b)}${
            others.map(({ name, r }) => `, ${name} ${cpu(r)}`).join("")
          }`,
          detail: Object.fromEntries(runs),
        });
      } else {
        ctx.row({
          scenario: "8 sessions",
          case: `${count} sessions × ${VIEWERS} viewers, ${RATE} events/s each (${
            si(count * RATE)
          }/s)`,
          metric: "server CPU (latency p50 / p99)",
          baton: { name: "baton", value: b.serverCpu, text: `${cpu(b)} (${latency(b)})` },
          baselines: baselines((r) => r.serverCpu, (r) => `${cpu(r)} (${latency(r)})`),
          ratios,
          note: `${lost(all)}CPU of the server process (all its threads) as a share of one ` +
            "core; baton's includes storing every event",
          detail: Object.fromEntries(runs),
        });
      }
    }
  } finally {
    for (const s of servers) await s.proc.stop();
  }
}
