/**
 * Scenario 14 (`--only cluster`, issue 22): two relay nodes on one
 * PostgreSQL and one nats-server.
 *
 * 1. Cross-node event latency: a synthetic runner on node A at 1,000
 *    events/s, viewers on node B against the same viewers on node A (the
 *    same cluster), runner send → viewer.
 * 2. Viewers carried at 100 events/s with p99 under a bound: the viewers
 *    split across both nodes against all of them on node A, at fixed viewer
 *    counts; the most each setup carried.
 * 3. Durable ingest: events/s one relay commits and acks on PostgreSQL
 *    against the same relay on its SQLite file.
 *
 * PostgreSQL and nats-server count as servers under test: they run on the
 * servers' CPUs with the relays. Skipped, in one line, when either is not
 * installed.
 *
 * @module
 */
import { dirname, join } from "node:path";
import type { BenchContext } from "../_report.ts";
import { ms, si } from "../_stats.ts";
import type { FanoutResult } from "../load/fanout.ts";
import { ingestLoad } from "./durability.ts";
import { buildWsview, runLoad, type Server, startServer, startServers } from "./fanout.ts";

/** Events/s of the runner in the latency rows (the issue's figure). */
export const LATENCY_RATE = 1000;
/** Viewers of the latency rows: few, so that the hop, not fan-out work, is what differs. */
export const LATENCY_VIEWERS = 20;
/** Events/s of the capacity rows (the steady-rate row's rate). */
export const CAPACITY_RATE = 100;
/** The capacity rows' viewer counts. */
export const CAPACITY_COUNTS = [200, 400, 800] as const;
/** The p99 (ms) a setup must stay under to count as carrying a viewer count. */
export const P99_BOUND_MS = 50;

/**
 * PostgreSQL as a deployment runs it (its defaults: every commit flushed
 * with fsync), not the test harness's fsync-less settings.
 */
const PG_SETTINGS = { fsync: "on", synchronous_commit: "on", full_page_writes: "on" };

/** The nats-server binary, where tests/harness/nats.ts looks for it; null when absent. */
function natsServerPath(): string | null {
  const dirs = [...(Deno.env.get("PATH") ?? "").split(":"), "/usr/sbin", "/usr/local/bin"];
  for (const dir of dirs) {
    try {
      if (dir && Deno.statSync(join(dir, "nats-server")).isFile) return join(dir, "nats-server");
    } catch {
      // Not there.
    }
  }
  return null;
}

/**
 * The one line the scenario prints instead of running when PostgreSQL or
 * nats-server is not installed; null when both are.
 */
export function skipLine(found: { postgres: boolean; nats: boolean }): string | null {
  const missing = [
    found.postgres ? null : "PostgreSQL (initdb, postgres)",
    found.nats ? null : "nats-server",
  ].filter(Boolean);
  return missing.length
    ? `cluster: skipped: ${
      missing.join(" and ")
    } not installed (apt-get install postgresql nats-server)`
    : null;
}

/** The most viewers of `counts` whose p99 stayed under the bound with the rate held; 0 if none. */
export function mostCarried(
  runs: readonly { viewers: number; p99: number; held: boolean }[],
  boundMs = P99_BOUND_MS,
): number {
  return Math.max(0, ...runs.filter((r) => r.held && r.p99 < boundMs).map((r) => r.viewers));
}

/** Processes whose parent is `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${e.name}/stat`);
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) {
        out.push(Number(e.name));
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

function lossOf(r: FanoutResult): string | undefined {
  return r.undelivered || r.gaps ? `LOST ${r.undelivered}, GAPS ${r.gaps}` : undefined;
}

const pct = (share: number) => `${(share * 100).toFixed(0)}%`;

const p50p99 = (r: FanoutResult) => `${ms(r.latency.p50)} / ${ms(r.latency.p99)}`;

/** Runs the cluster scenario (one round of it: `main.ts` repeats it). */
export async function cluster(ctx: BenchContext): Promise<void> {
  const { postgresBin, startPostgres } = await import("../../harness/postgres.ts");
  const skip = skipLine({ postgres: postgresBin() !== null, nats: natsServerPath() !== null });
  if (skip) return ctx.log(skip);
  const { NatsServer } = await import("../../harness/nats.ts");
  const warmupMs = ctx.quick ? 300 : 1000;
  const durationMs = ctx.quick ? 1000 : 4000;
  const pg = await startPostgres({ settings: PG_SETTINGS });
  const nats = await NatsServer.start().catch(async (err) => {
    await pg.stop();
    throw err;
  });
  const servers: Server[] = [];
  let wsview: string | null = null;
  try {
    // The postmaster and the processes it has forked so far; backends it forks later inherit it.
    const postmaster = Number(
      (await Deno.readTextFile(join(pg.dir, "data", "postmaster.pid"))).split("\n")[0],
    );
    for (const pid of [postmaster, ...childrenOf(postmaster)]) await ctx.pinning.toServer(pid);
    await ctx.pinning.toServer(nats.pid);

    const clusterDb = await pg.createDatabase("bench_cluster");
    const ingestDb = await pg.createDatabase("bench_ingest");
    const node = ["--database-url", clusterDb, "--bus-url", nats.url];
    // Node A first: it creates the schema that B then finds, and the keys B must share.
    const dirA = await Deno.makeTempDir({ prefix: "baton-bench-node-a-" });
    const a = await startServer(ctx, "baton", { args: [...node, "--data-dir", dirA] });
    servers.push(a);
    const dirB = await Deno.makeTempDir({ prefix: "baton-bench-node-b-" });
    for (const file of ["secret", "vapid.json"]) {
      await Deno.copyFile(join(dirA, file), join(dirB, file));
    }
    const [bOwn, onPg, onSqlite] = await startServers(
      ctx,
      ["baton", [...node, "--data-dir", dirB]],
      ["baton", ["--database-url", ingestDb]],
      "baton",
    );
    servers.push(bOwn, onPg, onSqlite);
    /**
     * Node B, NATS and PostgreSQL (the postmaster and what it forked: every
     * backend but those of the ingest relay, which is idle meanwhile): the
     * cluster's CPU besides node A's.
     */
    const others = () => [bOwn.proc.pid, nats.pid, postmaster, ...childrenOf(postmaster)];
    /** The p99 each node's viewers saw (the row's two-node figure is the higher: see docs). */
    const split = (r: FanoutResult) => {
      const at = (url: string) => r.latencyByUrl?.find((x) => x.url === url);
      const [onA, onB] = [at(a.url), at(bOwn.url)];
      return onA && onB ? `p99 of A's viewers ${ms(onA.p99)}, of B's ${ms(onB.p99)}; ` : "";
    };
    const cpu = (r: FanoutResult) =>
      `CPU: node A ${pct(r.serverCpu)}, B + NATS + PostgreSQL ${pct(r.otherCpu)}`;
    wsview = await buildWsview();
    if (!wsview) ctx.log("no C compiler (cc): the cluster's viewers run in Deno");
    const client = wsview ? "c" as const : "native" as const;
    const viewersNote = wsview ? "C viewers (load/wsview.c)" : "Deno viewers";

    // 1. Cross-node latency: the runner on A; its viewers on B, then on A.
    const latency = async (viewerUrl: string) =>
      await runLoad(a, {
        viewers: LATENCY_VIEWERS,
        viewerUrls: [viewerUrl],
        otherPids: others(),
        client,
        mode: "rate",
        window: 0,
        rate: LATENCY_RATE,
        batch: 1,
        warmupMs,
        durationMs,
        ...(wsview ? { wsview } : {}),
      });
    const onB = await latency(bOwn.url);
    const onA = await latency(a.url);
    for (const [where, r] of [["B", onB], ["A", onA]] as const) {
      ctx.log(
        `latency, ${LATENCY_VIEWERS} viewers on node ${where}: ${si(r.eventsPerSec)} ev/s, p50 ${
          ms(r.latency.p50)
        }, p99 ${ms(r.latency.p99)}${lossOf(r) ? `, ${lossOf(r)}` : ""}`,
      );
    }
    const held = (r: FanoutResult, rate: number) => r.eventsPerSec >= 0.95 * rate && !lossOf(r);
    const latencyCase =
      `runner on A at ${LATENCY_RATE} events/s, ${LATENCY_VIEWERS} viewers on B (${viewersNote})`;
    const latencyNote = [lossOf(onB) && `B: ${lossOf(onB)}`, lossOf(onA) && `A: ${lossOf(onA)}`]
      .filter(Boolean).join("; ");
    ctx.row({
      scenario: "14 cluster",
      case: latencyCase,
      metric: "runner send → viewer, p50 / p99",
      baton: { name: "baton", value: onB.latency.p99, text: p50p99(onB) },
      baselines: [{ name: "same viewers on A", value: onA.latency.p99, text: p50p99(onA) }],
      note:
        `${si(onB.eventsPerSec)} ev/s held; ${cpu(onB)} (viewers on A: ${pct(onA.serverCpu)}, ${
          pct(onA.otherCpu)
        })` +
        (latencyNote ? `; ${latencyNote}` : ""),
      detail: { onB, onA },
    });
    const addedP50 = onB.latency.p50 - onA.latency.p50;
    const addedP99 = onB.latency.p99 - onA.latency.p99;
    const signed = (x: number) => `${x < 0 ? "−" : "+"}${ms(Math.abs(x))}`;
    ctx.row({
      scenario: "14 cluster",
      case: latencyCase,
      metric: "added by the hop to B, p50 / p99",
      baton: { name: "baton", value: addedP50, text: `${signed(addedP50)} / ${signed(addedP99)}` },
      baselines: [],
      goal: {
        text: "< 5 ms added at p50",
        test: ({ baton }) => baton < 5,
        sound: held(onB, LATENCY_RATE) && held(onA, LATENCY_RATE),
      },
      note: "B's figure minus A's, same round",
    });

    // 2. Viewers carried at a steady rate: split over A and B, against all on A.
    const capacity = { one: [] as FanoutResult[], two: [] as FanoutResult[] };
    for (const viewers of CAPACITY_COUNTS) {
      for (const setup of ["one", "two"] as const) {
        const r = await runLoad(a, {
          viewers,
          viewerUrls: setup === "one" ? [a.url] : [a.url, bOwn.url],
          otherPids: others(),
          client,
          mode: "rate",
          window: 0,
          rate: CAPACITY_RATE,
          batch: 1,
          warmupMs,
          durationMs,
          ...(wsview ? { wsview } : {}),
        });
        ctx.log(
          `${viewers} viewers on ${setup === "one" ? "node A" : "nodes A and B"}: ${
            si(r.eventsPerSec)
          } ev/s, p50 ${ms(r.latency.p50)}, p99 ${ms(r.latency.p99)}${
            lossOf(r) ? `, ${lossOf(r)}` : ""
          }`,
        );
        capacity[setup].push(r);
      }
      const [one, two] = [capacity.one.at(-1)!, capacity.two.at(-1)!];
      const text = (r: FanoutResult) =>
        `${ms(r.latency.p99)} (p50 ${ms(r.latency.p50)}, ${si(r.eventsPerSec)} ev/s)`;
      ctx.row({
        scenario: "14 cluster",
        case: `${viewers} viewers at ${CAPACITY_RATE} events/s, half on A and half on B`,
        metric: "latency p99",
        baton: { name: "baton", value: two.latency.p99, text: text(two) },
        baselines: [{ name: "all on A", value: one.latency.p99, text: text(one) }],
        note: `${split(two)}two nodes ${cpu(two)}; one node ${cpu(one)}` +
          ([one, two].some(lossOf) ? "; events lost or out of order" : ""),
        detail: { one, two },
      });
    }
    const carried = (runs: FanoutResult[]) =>
      mostCarried(
        runs.map((r) => ({
          viewers: r.viewers,
          p99: r.latency.p99,
          held: held(r, CAPACITY_RATE),
        })),
      );
    const two = carried(capacity.two);
    const one = carried(capacity.one);
    const countText = (n: number) => (n ? String(n) : "none");
    ctx.row({
      scenario: "14 cluster",
      case: `most viewers with p99 < ${P99_BOUND_MS} ms at ${CAPACITY_RATE} events/s (of ${
        CAPACITY_COUNTS.join(", ")
      })`,
      metric: "viewers",
      baton: { name: "baton", value: two, text: `${countText(two)} on two nodes` },
      baselines: [{ name: "one node", value: one, text: countText(one) }],
      ratios: [{ of: 0 }],
      goal: { text: "ratio ≥ 1.6", test: ({ ratios: [r] }) => r! >= 1.6 },
      note: "both nodes, PostgreSQL and NATS share the servers' CPUs: see docs/performance.md",
    });

    // 3. Durable ingest, one relay on each store.
    for (const batch of ctx.quick ? [1] : [1, 50]) {
      const ingest = (server: Server) => ingestLoad(server, batch, warmupMs, durationMs);
      const p = await ingest(onPg);
      const s = await ingest(onSqlite);
      for (const [name, r] of [["PostgreSQL", p], ["SQLite", s]] as const) {
        ctx.log(
          `ingest, frames of ${batch}, ${name}: ${si(r.eventsPerSec)} events/s, ack p50 ${
            ms(r.latency.p50)
          }, relay ${(r.serverCpu * 100).toFixed(0)}% CPU`,
        );
      }
      ctx.row({
        scenario: "14 cluster",
        case: `durable ingest, one session, ${
          batch === 1 ? "one event per frame" : `frames of ${batch} events`
        }`,
        metric: "events/s committed (acked)",
        baton: {
          name: "baton",
          value: p.eventsPerSec,
          text: `${si(p.eventsPerSec)} on PostgreSQL`,
        },
        baselines: [{ name: "SQLite", value: s.eventsPerSec, text: si(s.eventsPerSec) }],
        ratios: [{ of: 0 }],
        note: `ack p50 ${ms(p.latency.p50)} (SQLite ${ms(s.latency.p50)}); relay CPU ${
          (p.serverCpu * 100).toFixed(0)
        }% (SQLite ${
          (s.serverCpu * 100).toFixed(0)
        }%); PostgreSQL flushes each commit (fsync), SQLite its WAL at checkpoints`,
        detail: { postgres: p, sqlite: s },
      });
    }
  } finally {
    for (const s of servers) await s.proc.stop();
    await nats.stop();
    await pg.stop();
    if (wsview) await Deno.remove(dirname(wsview), { recursive: true }).catch(() => {});
  }
}
