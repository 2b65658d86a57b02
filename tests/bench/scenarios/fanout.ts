/**
 * Scenario 1: fan-out of one session to 1, 100 and 1,000 viewers, against
 * (a) a bare Deno WebSocket broadcaster and (b) socket.io; then a steady
 * 100 events/s to 1,000 viewers for latency without queueing.
 *
 * @module
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BenchProcess } from "../_proc.ts";
import type { BenchContext } from "../_report.ts";
import { ms, si } from "../_stats.ts";
import type { ClientImpl, ServerKind } from "../clients/viewers.ts";
import type { FanoutConfig, FanoutResult } from "../load/fanout.ts";
import { signUp, type User } from "../../harness/client.ts";

/** A server under test, started once for the whole scenario. */
export interface Server {
  kind: ServerKind;
  proc: BenchProcess;
  url: string;
  apiKey: string;
  /** The account the bench signed up (baton only). */
  user: User | null;
}

const SCRIPTS: Record<ServerKind, string> = {
  baton: "servers/baton_relay.ts",
  bare: "servers/bare_ws.ts",
  socketio: "servers/socketio.ts",
};

/** Display names of the servers. */
export const LABEL: Record<ServerKind, string> = {
  baton: "baton",
  bare: "(a) bare Deno",
  socketio: "(b) socket.io",
};

/** Options of {@linkcode startServer}. */
export interface StartServerOptions {
  /** Arguments of the server's script. */
  args?: string[];
  /** Extra flags for `deno run`. */
  denoFlags?: string[];
}

/** Starts one server under test in its own process, on the servers' cores. */
export async function startServer(
  ctx: BenchContext,
  kind: ServerKind,
  options: StartServerOptions = {},
): Promise<Server> {
  let denoFlags = options.denoFlags ?? [];
  // BATON_BENCH_PROFILE=<dir> writes a V8 CPU profile of every server under test.
  const profileDir = Deno.env.get("BATON_BENCH_PROFILE");
  if (profileDir) denoFlags = [...denoFlags, "--cpu-prof", `--cpu-prof-dir=${profileDir}`];
  const proc = BenchProcess.start(kind, SCRIPTS[kind], {
    args: options.args ?? [],
    denoFlags,
    prefix: ctx.pinning.serverPrefix(),
  });
  const { url } = await proc.message<{ url: string }>("listening", 60_000);
  const user = kind === "baton" ? await signUp(url) : null;
  return { kind, proc, url, apiKey: user?.apiKey ?? "", user };
}

/** A server to start: its kind, or its kind and arguments. */
export type ServerSpec = ServerKind | readonly [ServerKind, string[]];

/**
 * Starts several servers at once (their start-up is not measured); if one
 * fails, the others are stopped.
 */
export async function startServers<const K extends readonly ServerSpec[]>(
  ctx: BenchContext,
  ...specs: K
): Promise<{ -readonly [I in keyof K]: Server }> {
  const started = await Promise.allSettled(
    specs.map((s) =>
      typeof s === "string" ? startServer(ctx, s) : startServer(ctx, s[0], { args: s[1] })
    ),
  );
  const failed = started.find((r) => r.status === "rejected");
  if (failed) {
    for (const r of started) if (r.status === "fulfilled") await r.value.proc.stop();
    throw failed.reason;
  }
  return started.map((r) => (r as PromiseFulfilledResult<Server>).value) as {
    -readonly [I in keyof K]: Server;
  };
}

/** Runs one load generator against a server and returns its result. */
export async function runLoad(
  server: Server,
  opts: Omit<FanoutConfig, "kind" | "url" | "apiKey" | "serverPid">,
): Promise<FanoutResult> {
  const cfg: FanoutConfig = {
    kind: server.kind,
    url: server.url,
    apiKey: server.apiKey,
    serverPid: server.proc.pid,
    ...opts,
  };
  const load = BenchProcess.start(`load-${server.kind}`, "load/fanout.ts", {
    args: [JSON.stringify(cfg)],
  });
  try {
    await load.message("ready", 120_000);
    await load.send({ cmd: "go" });
    return await load.message<FanoutResult>("result", opts.warmupMs + opts.durationMs + 60_000);
  } finally {
    await load.stop();
  }
}

/** Events in flight for a viewer count: about 32k deliveries, 16–256 events. */
export function windowFor(viewers: number): number {
  return Math.max(16, Math.min(256, Math.ceil(32_768 / viewers)));
}

function cpu(r: FanoutResult): string {
  return `server ${(r.serverCpu * 100).toFixed(0)}% / load ${(r.clientCpu * 100).toFixed(0)}% CPU`;
}

/**
 * Compiles the C viewer client (`load/wsview.c`) into a temporary folder;
 * null when there is no C compiler.
 */
export async function buildWsview(): Promise<string | null> {
  const out = join(await Deno.makeTempDir({ prefix: "baton-bench-wsview-" }), "wsview");
  const src = fileURLToPath(new URL("../load/wsview.c", import.meta.url));
  try {
    const r = await new Deno.Command("cc", { args: ["-O2", "-o", out, src], stderr: "piped" })
      .output();
    if (!r.success) throw new Error(new TextDecoder().decode(r.stderr));
    return out;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

/** Runs the fan-out scenario (one round of it: `main.ts` repeats it). */
export async function fanout(
  ctx: BenchContext,
  options: { counts?: number[]; client?: ClientImpl } = {},
): Promise<void> {
  const counts = options.counts ?? [1, 100, 1000];
  const client = options.client ?? "native";
  const warmupMs = ctx.quick ? 150 : 1000;
  const durationMs = ctx.quick ? 500 : 3000;
  const kinds: ServerKind[] = ["bare", "socketio", "baton"];
  const servers = new Map<ServerKind, Server>();
  let wsview: string | null = null;
  try {
    for (const s of await startServers(ctx, ...kinds)) servers.set(s.kind, s);
    for (const viewers of counts) {
      const runs = new Map<ServerKind, FanoutResult>();
      for (const kind of kinds) {
        const r = await runLoad(servers.get(kind)!, {
          viewers,
          client,
          mode: "throughput",
          window: windowFor(viewers),
          rate: 0,
          batch: 1,
          warmupMs,
          durationMs,
        });
        ctx.log(
          `fan-out ${viewers} viewers, ${LABEL[kind]}: ${si(r.deliveriesPerSec)} deliveries/s, ` +
            `p50 ${ms(r.latency.p50)}, p99 ${ms(r.latency.p99)}, ${cpu(r)}` +
            (r.undelivered || r.gaps ? `, LOST ${r.undelivered} GAPS ${r.gaps}` : ""),
        );
        runs.set(kind, r);
      }
      const baton = runs.get("baton")!;
      const bare = runs.get("bare")!;
      const sio = runs.get("socketio")!;
      const lossNote = [baton, bare, sio].some((r) => r.undelivered || r.gaps)
        ? "events lost or out of order"
        : undefined;
      ctx.row({
        scenario: "1 fan-out",
        case: `${viewers} viewer${viewers === 1 ? "" : "s"}, saturated`,
        metric: "deliveries/s",
        baton: { name: "baton", value: baton.deliveriesPerSec, text: si(baton.deliveriesPerSec) },
        baselines: [
          { name: "(a)", value: bare.deliveriesPerSec, text: si(bare.deliveriesPerSec) },
          { name: "(b)", value: sio.deliveriesPerSec, text: si(sio.deliveriesPerSec) },
        ],
        ratios: [{ of: 0, label: "a" }, { of: 1, label: "b" }],
        goal: { text: "≥ 0.5× a and > b", test: ({ ratios: [a, b] }) => a! >= 0.5 && b! > 1 },
        ...(lossNote ? { note: lossNote } : {}),
        detail: { baton, bare, socketio: sio },
      });
      ctx.row({
        scenario: "1 fan-out",
        case: `${viewers} viewer${viewers === 1 ? "" : "s"}, saturated`,
        metric: "latency p50 / p99",
        baton: {
          name: "baton",
          value: baton.latency.p99,
          text: `${ms(baton.latency.p50)} / ${ms(baton.latency.p99)}`,
        },
        baselines: [
          {
            name: "(a)",
            value: bare.latency.p99,
            text: `${ms(bare.latency.p50)} / ${ms(bare.latency.p99)}`,
          },
          {
            name: "(b)",
            value: sio.latency.p99,
            text: `${ms(sio.latency.p50)} / ${ms(sio.latency.p99)}`,
          },
        ],
        note: `window ${windowFor(viewers)} events in flight; baton ${cpu(baton)}`,
      });
    }

    // Steady rate: 100 events/s to 1,000 viewers, latency without queueing:
    // with the viewers in the C client (the server's latency, goal), then
    // in the Deno client the saturated runs use (its own queueing included;
    // left out of quick runs).
    const steadyViewers = counts.includes(1000) ? 1000 : counts[counts.length - 1]!;
    wsview = await buildWsview();
    if (!wsview) ctx.log("no C compiler (cc): the steady rate runs with Deno viewers only");
    for (const c of wsview ? (ctx.quick ? ["c"] as const : ["c", client] as const) : [client]) {
      const steady = new Map<ServerKind, FanoutResult>();
      // The goal is absolute (p99 < 20 ms): quick runs leave the baselines out.
      for (const kind of ctx.quick ? ["baton"] as const : kinds) {
        const r = await runLoad(servers.get(kind)!, {
          viewers: steadyViewers,
          client: c,
          mode: "rate",
          window: 0,
          rate: 100,
          batch: 1,
          warmupMs,
          durationMs: ctx.quick ? 700 : 4000,
          ...(c === "c" ? { wsview: wsview! } : {}),
        });
        ctx.log(
          `steady 100 ev/s to ${steadyViewers} (${c} viewers), ${LABEL[kind]}: ${
            si(r.eventsPerSec)
          } ev/s, p50 ${ms(r.latency.p50)}, p99 ${ms(r.latency.p99)}, ${cpu(r)}`,
        );
        steady.set(kind, r);
      }
      const b = steady.get("baton")!;
      const text = (r: FanoutResult) =>
        `${ms(r.latency.p50)} / ${ms(r.latency.p99)} (${si(r.eventsPerSec)} ev/s)`;
      ctx.row({
        scenario: "1 fan-out",
        case: `steady 100 events/s, ${steadyViewers} viewers, ${
          c === "c" ? "C viewers (load/wsview.c)" : `Deno viewers (${c})`
        }`,
        metric: "latency p50 / p99",
        baton: { name: "baton", value: b.latency.p99, text: text(b) },
        baselines: ([["bare", "(a)"], ["socketio", "(b)"]] as const).flatMap(([kind, name]) => {
          const r = steady.get(kind);
          return r ? [{ name, value: r.latency.p99, text: text(r) }] : [];
        }),
        // The goal asks for the rate too: a round that did not hold 100 events/s misses it.
        ...(c === "c" || !wsview
          ? {
            goal: { text: "p99 < 20 ms", test: (f) => f.baton < 20, sound: b.eventsPerSec >= 95 },
          }
          : {}),
        note: `baton ${cpu(b)}${
          c === "c" ? "" : "; the viewers' own queueing in the load generator is included"
        }`,
        detail: Object.fromEntries(steady),
      });
    }
  } finally {
    for (const s of servers.values()) await s.proc.stop();
    if (wsview) await Deno.remove(dirname(wsview), { recursive: true }).catch(() => {});
  }
}
