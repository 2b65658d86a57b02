/**
 * `deno task bench`: measures the relay against bare baselines on this
 * machine, in one run, and prints ratios. See docs/performance.md.
 *
 *   deno task bench [--quick] [--rounds N]
 *                   [--only fanout,replay,durability,spawn,memory,http,ui,sessions,sleep,disk,
 *                          usage,files,tunnel,cluster]
 *                   [--client native|ws] [--out file.json] [--unpinned]
 *
 * Every scenario runs `--rounds` times (3, or 1 with `--quick`), round by
 * round: all scenarios once, then all again, so that a passing disturbance
 * lands in one round of several scenarios rather than in every round of
 * one. Each row shows the median round's figures with the spread of all
 * rounds, and the median and range of its ratios (`_report.ts`).
 *
 * Where the machine allows, the servers under test run on their own cores
 * and everything else on the others (`_pinning.ts`); `--unpinned` turns
 * that off.
 *
 * A full run writes tests/bench/results/latest.json (committed: the table in
 * docs/performance.md comes from it); a quick or partial run writes
 * results/partial.json (not committed), unless `--out` says otherwise.
 *
 * @module
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Pinning } from "./_pinning.ts";
import { BENCH_DIR } from "./_proc.ts";
import { type BenchContext, mergeRounds, renderTable, type ResultRow } from "./_report.ts";
import type { ClientImpl } from "./clients/viewers.ts";
import { cluster } from "./scenarios/cluster.ts";
import { disk } from "./scenarios/disk.ts";
import { durability } from "./scenarios/durability.ts";
import { files } from "./scenarios/files.ts";
import { fanout } from "./scenarios/fanout.ts";
import { hasWrk, http } from "./scenarios/http.ts";
import { memory } from "./scenarios/memory.ts";
import { replay } from "./scenarios/replay.ts";
import { sessions } from "./scenarios/sessions.ts";
import { sleepScenario } from "./scenarios/sleep.ts";
import { spawnLatency } from "./scenarios/spawn.ts";
import { uiRender } from "./scenarios/ui.ts";
import { tunnel } from "./scenarios/tunnel.ts";
import { usage } from "./scenarios/usage.ts";

const SCENARIOS = [
  "fanout",
  "replay",
  "durability",
  "spawn",
  "memory",
  "http",
  "ui",
  "sessions",
  "sleep",
  "disk",
  "usage",
  "files",
  "tunnel",
  "cluster",
] as const;
type Scenario = (typeof SCENARIOS)[number];
/**
 * Scenarios whose server shares this process with its client (the web
 * client's relay runs in-process with the page driver): they run on every
 * allowed CPU, as before pinning.
 */
const UNPINNED: readonly Scenario[] = ["ui", "disk"];

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      quick: { type: "boolean", default: false },
      rounds: { type: "string" },
      only: { type: "string" },
      client: { type: "string", default: "native" },
      out: { type: "string" },
      unpinned: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(
      "Usage: deno task bench [--quick] [--rounds N] [--only a,b] [--client native|ws]\n" +
        "                       [--out file.json] [--unpinned]\n" +
        "  --quick      shorter measurements and fewer of them (a smoke run)\n" +
        "  --rounds N   run every scenario N times; rows show the median and the spread\n" +
        "               (default 3, 1 with --quick)\n" +
        "  --only a,b   run only these scenarios\n" +
        "  --client     baton's and the bare server's viewers on Deno's WebSocket (native)\n" +
        "               or npm:ws (ws)\n" +
        "  --out file   where the results go (default results/latest.json for a full run,\n" +
        "               results/partial.json otherwise)\n" +
        "  --unpinned   do not pin servers and load to separate cores\n" +
        `Scenarios: ${SCENARIOS.join(", ")}`,
    );
    return 0;
  }
  const only = values.only ? values.only.split(",").map((s) => s.trim()) : [...SCENARIOS];
  for (const s of only) {
    if (!SCENARIOS.includes(s as Scenario)) {
      console.error(`Unknown scenario: '${s}' (one of ${SCENARIOS.join(", ")})`);
      return 2;
    }
  }
  const rounds = values.rounds === undefined ? (values.quick ? 1 : 3) : Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) {
    console.error(`Not a number of rounds: '${values.rounds}' (1 or more)`);
    return 2;
  }
  const client = values.client as ClientImpl;
  if (client !== "native" && client !== "ws") {
    console.error(`Unknown client: '${values.client}' (native or ws)`);
    return 2;
  }
  // A quick or partial run must not replace the full run's results.
  const full = !values.quick && only.length === SCENARIOS.length;
  const out = values.out ?? join(BENCH_DIR, "results", full ? "latest.json" : "partial.json");
  /** Each round's rows. */
  const rows: ResultRow[][] = [];
  const started = performance.now();
  const machine = await machineInfo();
  const pinning = await Pinning.setUp({
    off: values.unpinned,
    unpinnedScenarios: UNPINNED.filter((s) => only.includes(s)),
  });
  const ctx: BenchContext = {
    quick: values.quick,
    pinning,
    log: (line) => console.error(`  ${line}`),
    row: (row) => {
      rows.at(-1)!.push(row);
      console.log(renderTable(mergeRounds([[row]])).split("\n").at(-1));
    },
  };
  console.error(
    `baton bench${values.quick ? " (quick)" : ""}: ${plural(rounds, "round")}, ` +
      `${plural(machine.cores, "core")}, load ${machine.loadavg}, deno ${Deno.version.deno}`,
  );
  console.error(`  ${pinning.describe()}`);
  if (machine.loadavg[0]! > 0.5) {
    console.error(
      `  note: the machine is already busy (load ${
        machine.loadavg[0]
      }): ratios hold, absolute numbers drop`,
    );
  }
  if (only.includes("http") && !await hasWrk()) {
    console.error(
      "  note: wrk is not installed; the HTTP scenario falls back to a slower Deno load generator." +
        "\n  Install it for comparable numbers: apt-get install wrk",
    );
  }
  /** Each scenario's time in each round, ms. */
  const timings: Record<string, number[]> = {};
  const failures: string[] = [];
  for (let round = 1; round <= rounds; round++) {
    rows.push([]);
    for (const s of only as Scenario[]) {
      const t = performance.now();
      console.error(`\n${s}${rounds > 1 ? `, round ${round} of ${rounds}` : ""}`);
      const unpinned = UNPINNED.includes(s);
      try {
        if (unpinned) await pinning.toAll(Deno.pid);
        await run(s, ctx, client);
      } catch (err) {
        // One broken scenario should not cost the others' results.
        failures.push(rounds > 1 ? `${s} (round ${round})` : s);
        console.error(`  ${s} failed: ${err instanceof Error ? err.stack : err}`);
      } finally {
        if (unpinned) await pinning.toLoad(Deno.pid);
      }
      (timings[s] ??= []).push(Math.round(performance.now() - t));
    }
  }
  const merged = mergeRounds(rows);
  const table = renderTable(merged, rounds);
  console.log(`\n${table}\n`);
  const elapsed = Math.round((performance.now() - started) / 1000);
  console.error(`done in ${elapsed} s; results in ${out}`);
  await Deno.mkdir(join(out, ".."), { recursive: true });
  await Deno.writeTextFile(
    out,
    JSON.stringify(
      {
        date: new Date().toISOString(),
        quick: values.quick,
        rounds,
        machine,
        pinning: pinning.info,
        deno: Deno.version,
        client,
        elapsedSeconds: elapsed,
        scenarioMs: timings,
        failures,
        table,
        rows: merged,
      },
      null,
      2,
    ) + "\n",
  );
  return failures.length ? 1 : 0;
}

async function run(s: Scenario, ctx: BenchContext, client: ClientImpl): Promise<void> {
  switch (s) {
    case "fanout":
      return await fanout(ctx, { client });
    case "replay":
      return await replay(ctx);
    case "durability":
      return await durability(ctx);
    case "spawn":
      return await spawnLatency(ctx);
    case "memory":
      return await memory(ctx);
    case "http":
      return await http(ctx);
    case "ui":
      return await uiRender(ctx);
    case "sessions":
      return await sessions(ctx);
    case "sleep":
      return await sleepScenario(ctx);
    case "disk":
      return await disk(ctx);
    case "usage":
      return await usage(ctx);
    case "files":
      return await files(ctx);
    case "tunnel":
      return await tunnel(ctx);
    case "cluster":
      return await cluster(ctx);
  }
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

async function machineInfo() {
  const loadavg = (await Deno.readTextFile("/proc/loadavg").catch(() => "0 0 0"))
    .split(" ").slice(0, 3).map(Number);
  const cpuinfo = await Deno.readTextFile("/proc/cpuinfo").catch(() => "");
  return {
    cores: navigator.hardwareConcurrency,
    cpu: cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1] ?? "unknown",
    memoryBytes: Deno.systemMemoryInfo().total,
    loadavg,
    os: `${Deno.build.os} ${Deno.osRelease()}`,
  };
}

if (import.meta.main) Deno.exit(await main());
