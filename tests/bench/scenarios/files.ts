/**
 * Scenario 12: a runner's files through the relay. A real relay and real
 * runners on a generated tree: `search-files` on 100,000 files (ripgrep on
 * the runner's PATH) against `rg --files` run directly (the floor: listing
 * the files at all) and baton's own walker (a runner without rg), and
 * `read-file` of a 10 MiB file as base64 through the relay against the same
 * JSON body from a bare loopback HTTP server, with the relay's RSS while
 * four such reads stream at once.
 *
 * @module
 */
import { join } from "node:path";
import { Buffer } from "node:buffer";
import type { BenchContext } from "../_report.ts";
import { mb, ms, percentileOf } from "../_stats.ts";
import { procStat } from "../_proc.ts";
import { json, signUp, type User } from "../../harness/client.ts";
import { RelayProcess, type RunnerProcess, startRunner, tempDir } from "../../harness/procs.ts";

const QUERIES = ["widget42 spec", "mod7/file93", "helpers", "zzqx", "w9f1"];

/** Writes `dirs` × `perDir` files (and an ignored folder) under `root`; answers the count. */
async function makeTree(root: string, dirs: number, perDir: number): Promise<number> {
  await Deno.writeTextFile(join(root, ".gitignore"), "node_modules/\n*.tmp\n");
  let n = 0;
  for (let d = 0; d < dirs; d++) {
    const dir = join(root, `pkg${d % 10}`, `mod${d}`);
    await Deno.mkdir(dir, { recursive: true });
    const names = Array.from(
      { length: perDir },
      (_, i) =>
        i % 10 === 0 ? `widget${i}_spec.ts` : i % 10 === 1 ? `helpers${i}.ts` : `file${i}.ts`,
    );
    await Promise.all(names.map((f) => Deno.writeFile(join(dir, f), new Uint8Array())));
    n += perDir;
  }
  await Deno.mkdir(join(root, "node_modules", "big"), { recursive: true });
  await Promise.all(
    Array.from(
      { length: 1000 },
      (_, i) =>
        Deno.writeFile(join(root, "node_modules", "big", `widget42_spec${i}.js`), new Uint8Array()),
    ),
  );
  return n;
}

async function timed(f: () => Promise<void>): Promise<number> {
  const t = performance.now();
  await f();
  return performance.now() - t;
}

async function search(user: User, runnerId: string, cwd: string, query: string) {
  const res = await user.api(
    `/api/runners/${runnerId}/search-files`,
    json("POST", { cwd, query, limit: 100 }),
  );
  if (!res.ok) throw new Error(`search-files: ${res.status} ${await res.text()}`);
  return await res.json() as { files: string[]; engine: string; truncated: boolean };
}

/** Runs the files scenario. */
export async function files(ctx: BenchContext): Promise<void> {
  const dirs = ctx.quick ? 200 : 1000;
  const perDir = 100;
  const root = await Deno.realPath(await tempDir("baton-bench-files-"));
  const tree = join(root, "tree");
  await Deno.mkdir(tree);
  const t0 = performance.now();
  const count = await makeTree(tree, dirs, perDir);
  ctx.log(`made ${count} files in ${ms(performance.now() - t0)}`);
  const relay = await RelayProcess.start();
  await ctx.pinning.toServer(relay.proc.pid);
  const runners: RunnerProcess[] = [];
  try {
    const user = await signUp(relay.url);
    const env = { BATON_WORKSPACE_ROOTS: root };
    runners.push(await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, env }));
    runners.push(
      await startRunner({
        relayUrl: relay.url,
        apiKey: user.apiKey,
        env: { ...env, PATH: "/nonexistent", BATON_RUNNER_NAME: "no-rg" },
      }),
    );
    const list = await (await user.api("/api/runners")).json() as { id: string; name: string }[];
    const withRg = list.find((r) => r.name !== "no-rg")!.id;
    const noRg = list.find((r) => r.name === "no-rg")!.id;

    // search-files: each query a few times, on each engine, and bare rg.
    const rounds = ctx.quick ? 2 : 5;
    const viaRg: number[] = [];
    const viaWalker: number[] = [];
    const bare: number[] = [];
    let engineSeen = "";
    for (let i = 0; i < rounds; i++) {
      for (const q of QUERIES) {
        viaRg.push(
          await timed(async () => {
            const r = await search(user, withRg, tree, q);
            engineSeen = r.engine;
            if (r.truncated) throw new Error("search was truncated");
          }),
        );
        viaWalker.push(await timed(async () => void await search(user, noRg, tree, q)));
      }
      bare.push(
        await timed(async () => {
          const out = await new Deno.Command("rg", {
            args: ["--files", "--hidden", "--no-require-git", "--glob", "!.git"],
            cwd: tree,
            stdout: "piped",
            stderr: "null",
          }).output();
          if (!out.success) throw new Error("rg failed");
        }),
      );
    }
    if (engineSeen !== "ripgrep") throw new Error(`expected ripgrep, got ${engineSeen}`);
    const p50 = percentileOf(viaRg, 50);
    ctx.log(
      `search-files on ${count} files: rg ${ms(p50)} p50, walker ${
        ms(percentileOf(viaWalker, 50))
      }, bare rg --files ${ms(percentileOf(bare, 50))}`,
    );
    ctx.row({
      scenario: "12 files",
      case: `search-files on ${Math.round(count / 1000)}k files (.gitignore'd folder beside)`,
      metric: "time per search, p50 / p95",
      baton: { name: "baton", value: p50, text: `${ms(p50)} / ${ms(percentileOf(viaRg, 95))}` },
      baselines: [
        {
          name: "rg --files alone",
          value: percentileOf(bare, 50),
          text: ms(percentileOf(bare, 50)),
        },
        {
          name: "baton, walker (no rg)",
          value: percentileOf(viaWalker, 50),
          text: ms(percentileOf(viaWalker, 50)),
        },
      ],
      ratios: [{ of: 0 }],
      goal: { text: "p50 < 1 s", test: (f) => f.baton < 1000 },
      note: "through the relay, fuzzy-ranked, best 100 kept; the ratio is to listing the files " +
        "with ripgrep directly in this process",
      detail: { viaRg, viaWalker, bare, count },
    });

    // read-file: 10 MiB as base64, one at a time, then four at once (relay RSS).
    const big = join(tree, "big.bin");
    const bytes = new Uint8Array(10 * 1024 * 1024);
    for (let i = 0; i < bytes.length; i += 65536) {
      crypto.getRandomValues(bytes.subarray(i, i + 65536));
    }
    await Deno.writeFile(big, bytes);
    const read = async () => {
      const res = await user.api(
        `/api/runners/${withRg}/read-file`,
        json("POST", { path: big, encoding: "base64" }),
      );
      if (!res.ok) throw new Error(`read-file: ${res.status}`);
      const body = await res.json();
      if (body.size !== bytes.length) throw new Error("read-file: wrong size");
    };
    await read();
    const reads: number[] = [];
    for (let i = 0; i < (ctx.quick ? 3 : 8); i++) reads.push(await timed(read));
    const before = procStat(relay.proc.pid).rss;
    let peak = before;
    const timer = setInterval(() => peak = Math.max(peak, procStat(relay.proc.pid).rss), 20);
    const together = await timed(() =>
      Promise.all([read(), read(), read(), read()]).then(() => {})
    );
    clearInterval(timer);
    peak = Math.max(peak, procStat(relay.proc.pid).rss);

    // The same JSON body from a bare loopback server.
    const payload = JSON.stringify({
      ok: true,
      content: Buffer.from(bytes).toString("base64"),
      encoding: "base64",
      size: bytes.length,
    });
    const server = Deno.serve(
      { port: 0, hostname: "127.0.0.1", onListen() {} },
      () => new Response(payload, { headers: { "content-type": "application/json" } }),
    );
    const bareReads: number[] = [];
    try {
      for (let i = 0; i < (ctx.quick ? 3 : 8); i++) {
        bareReads.push(
          await timed(async () => {
            await (await fetch(`http://127.0.0.1:${server.addr.port}/`)).json();
          }),
        );
      }
    } finally {
      await server.shutdown();
    }
    const r50 = percentileOf(reads, 50);
    const b50 = percentileOf(bareReads, 50);
    ctx.log(
      `read-file 10 MiB: ${ms(r50)} p50 (bare ${ms(b50)}); 4 at once ${ms(together)}, ` +
        `relay RSS ${mb(before)} → ${mb(peak)}`,
    );
    ctx.row({
      scenario: "12 files",
      case: "read-file of 10 MiB as base64, through the relay",
      metric: "time per read, p50",
      baton: { name: "baton", value: r50, text: ms(r50) },
      baselines: [{ name: "bare loopback HTTP, same body", value: b50, text: ms(b50) }],
      ratios: [{ of: 0 }],
      goal: { text: "< 2 s", test: (f) => f.baton < 2000 },
      note: "runner reads, sends 48 KiB chunks paced by acks, relay streams them out",
      detail: { reads, bareReads },
    });
    ctx.row({
      scenario: "12 files",
      case: "4 reads of 10 MiB at once",
      metric: "relay RSS growth (peak)",
      baton: { name: "baton", value: peak - before, text: mb(peak - before) },
      baselines: [{ name: "bytes in flight", value: 4 * 13.4e6, text: mb(4 * 13.4e6) }],
      ratios: [{ of: 0, inverse: true, label: "less" }],
      goal: { text: "< 64 MB", test: (f) => f.baton < 64 * 1024 * 1024 },
      note: `all four done in ${ms(together)}; the relay holds at most 8 × 64 KiB of each read`,
      detail: { before, peak, together },
    });
  } finally {
    for (const r of runners) await r.stop();
    await relay.stop();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}
