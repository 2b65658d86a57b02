/**
 * Scenario 13: the byte-stream channel (issue 19). A real relay and runner
 * process; a local HTTP service on the runner's machine (in this process,
 * on 127.0.0.1) reached directly and through the HTTP tunnel
 * (`/api/tunnel/runner/{id}/{port}/`, the owner's cookie). Rows: download
 * throughput against direct loopback, time to first byte, 100 concurrent
 * streams, a stalled reader's memory on the relay and the runner, and the
 * web terminal's keystroke round trip through `/_terminal` and a real PTY.
 *
 * @module
 */
import WebSocket from "ws";
import { json, signUp, type User } from "../../harness/client.ts";
import { RelayProcess, type RunnerProcess, startRunner } from "../../harness/procs.ts";
import { daemonPid } from "../../harness/rss.ts";
import { procStat } from "../_proc.ts";
import type { BenchContext } from "../_report.ts";
import { mb, ms, percentileOf } from "../_stats.ts";

const MB = 1024 * 1024;
const CHUNK = 64 * 1024;

function rssOf(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^VmRSS:\s+(\d+)\s+kB/m);
  return m ? Number(m[1]) * 1024 : 0;
}

/** CPU ms of the relay and the runner's daemon, for CPU per MB tunnelled. */
function cpuOf(relay: number, daemon: number): { relay: number; daemon: number } {
  return { relay: procStat(relay).cpuMs, daemon: procStat(daemon).cpuMs };
}

/** "relay X + runner Y ms of CPU per MB" between two cpuOf readings. */
function cpuPerMb(
  before: { relay: number; daemon: number },
  after: { relay: number; daemon: number },
  megabytes: number,
): { relay: number; daemon: number; text: string } {
  const relay = (after.relay - before.relay) / megabytes;
  const daemon = (after.daemon - before.daemon) / megabytes;
  return {
    relay,
    daemon,
    text: `CPU per MB: relay ${relay.toFixed(2)} ms + runner ${daemon.toFixed(2)} ms`,
  };
}

/** `/big?mb=N` made as it is read; `/tiny` a few bytes. */
function startService() {
  const chunk = new Uint8Array(CHUNK).fill(120);
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const url = new URL(req.url);
    if (url.pathname === "/tiny") return new Response("ok");
    let left = Number(url.searchParams.get("mb")) * (MB / CHUNK);
    return new Response(
      new ReadableStream({
        pull(c) {
          if (left-- <= 0) return c.close();
          c.enqueue(chunk);
        },
      }, { highWaterMark: 0 }),
      { headers: { "content-type": "application/octet-stream" } },
    );
  });
}

async function drain(res: Response): Promise<number> {
  let n = 0;
  for await (const c of res.body!) n += c.byteLength;
  return n;
}

/** Runs the tunnel scenario. */
export async function tunnel(ctx: BenchContext): Promise<void> {
  const sizeMb = ctx.quick ? 200 : 1024;
  const firstBytes = ctx.quick ? 50 : 200;
  const service = startService();
  const relay = await RelayProcess.start({ args: ["--allow-signup"] });
  await ctx.pinning.toServer(relay.proc.pid);
  let runner: RunnerProcess | undefined;
  try {
    const user = await signUp(relay.url);
    runner = await startRunner({
      relayUrl: relay.url,
      apiKey: user.apiKey,
      env: { SHELL: "/bin/bash" },
    });
    await runner.proc.waitFor(/tunnel connected/, 20_000);
    const daemon = daemonPid(runner.proc.pid);
    await ctx.pinning.toServer(runner.proc.pid);
    await ctx.pinning.toServer(daemon);
    const [r] = await (await user.api("/api/runners")).json();
    const runnerId: string = r.id;
    const direct = `http://127.0.0.1:${service.addr.port}`;
    const tunneled = (path: string) =>
      user.web(`/api/tunnel/runner/${runnerId}/${service.addr.port}${path}`);
    // Warm both paths.
    await drain(await tunneled("/big?mb=20"));
    await drain(await fetch(`${direct}/big?mb=20`));

    // 1. Throughput.
    let t = performance.now();
    const directBytes = await drain(await fetch(`${direct}/big?mb=${sizeMb}`));
    const directSecs = (performance.now() - t) / 1000;
    const relayBefore = rssOf(relay.proc.pid), daemonBefore = rssOf(daemon);
    let relayPeak = relayBefore, daemonPeak = daemonBefore;
    const sampler = setInterval(() => {
      relayPeak = Math.max(relayPeak, rssOf(relay.proc.pid));
      daemonPeak = Math.max(daemonPeak, rssOf(daemon));
    }, 50);
    const cpuBefore = cpuOf(relay.proc.pid, daemon);
    t = performance.now();
    const tunnelBytes = await drain(await tunneled(`/big?mb=${sizeMb}`));
    const tunnelSecs = (performance.now() - t) / 1000;
    clearInterval(sampler);
    const cpu = cpuPerMb(cpuBefore, cpuOf(relay.proc.pid, daemon), sizeMb);
    if (tunnelBytes !== sizeMb * MB || directBytes !== sizeMb * MB) {
      throw new Error(`short download: ${tunnelBytes} through the tunnel, ${directBytes} direct`);
    }
    const tunnelRate = sizeMb / tunnelSecs, directRate = sizeMb / directSecs;
    ctx.log(
      `download ${sizeMb} MB: tunnel ${tunnelRate.toFixed(0)} MB/s, direct ${
        directRate.toFixed(0)
      } MB/s; relay +${mb(relayPeak - relayBefore)}, runner +${
        mb(daemonPeak - daemonBefore)
      }; ${cpu.text}`,
    );
    ctx.row({
      scenario: "13 tunnel",
      case: `download of ${sizeMb} MB through the HTTP tunnel`,
      metric: "throughput",
      baton: { name: "baton", value: tunnelRate, text: `${tunnelRate.toFixed(0)} MB/s` },
      baselines: [{
        name: "direct loopback",
        value: directRate,
        text: `${directRate.toFixed(0)} MB/s`,
      }],
      ratios: [{ of: 0, label: "of direct" }],
      goal: { text: "≥ 0.7 of direct", test: ({ ratios: [r] }) => r! >= 0.7 },
      note: `peak RSS growth meanwhile: relay ${mb(relayPeak - relayBefore)}, runner ${
        mb(daemonPeak - daemonBefore)
      }; ${cpu.text}`,
      detail: {
        sizeMb,
        tunnelSecs,
        directSecs,
        relayPeak,
        relayBefore,
        daemonPeak,
        daemonBefore,
        relayCpuMsPerMb: cpu.relay,
        daemonCpuMsPerMb: cpu.daemon,
      },
    });

    // 2. Time to first byte of a small answer, one request at a time.
    const ttfb = async (get: () => Promise<Response>) => {
      const times: number[] = [];
      for (let i = 0; i < firstBytes; i++) {
        const s = performance.now();
        const res = await get();
        const reader = res.body!.getReader();
        await reader.read();
        times.push(performance.now() - s);
        await reader.cancel();
      }
      return times;
    };
    const viaTunnel = await ttfb(() => tunneled("/tiny"));
    const viaDirect = await ttfb(() => fetch(`${direct}/tiny`));
    const tP50 = percentileOf(viaTunnel, 50), dP50 = percentileOf(viaDirect, 50);
    const tP99 = percentileOf(viaTunnel, 99);
    ctx.row({
      scenario: "13 tunnel",
      case: `time to first byte of a small answer (${firstBytes} requests, one at a time)`,
      metric: "p50 (p99)",
      baton: { name: "baton", value: tP50, text: `${ms(tP50)} (${ms(tP99)})` },
      baselines: [{ name: "direct", value: dP50, text: ms(dP50) }],
      goal: { text: "≤ 10 ms over direct (p50)", test: (f) => f.baton - f.baselines[0]! <= 10 },
      note: `overhead p50 ${ms(tP50 - dP50)}: browser → relay (cookie, ownership) → tunnel ` +
        "stream open → runner → service, and back",
      detail: { viaTunnel, viaDirect },
    });

    // 3. 100 concurrent streams of 2 MB each.
    const each = 2;
    const concCpuBefore = cpuOf(relay.proc.pid, daemon);
    t = performance.now();
    const all = await Promise.all(
      Array.from({ length: 100 }, async () => drain(await tunneled(`/big?mb=${each}`))),
    );
    const concSecs = (performance.now() - t) / 1000;
    const concCpu = cpuPerMb(concCpuBefore, cpuOf(relay.proc.pid, daemon), 100 * each);
    t = performance.now();
    await Promise.all(
      Array.from({ length: 100 }, async () => drain(await fetch(`${direct}/big?mb=${each}`))),
    );
    const concDirect = (performance.now() - t) / 1000;
    if (all.some((n) => n !== each * MB)) throw new Error("a concurrent stream came short");
    const concRate = (100 * each) / concSecs, concDirectRate = (100 * each) / concDirect;
    ctx.row({
      scenario: "13 tunnel",
      case: `100 concurrent downloads of ${each} MB through the tunnel`,
      metric: "aggregate throughput",
      baton: { name: "baton", value: concRate, text: `${concRate.toFixed(0)} MB/s` },
      baselines: [{
        name: "direct",
        value: concDirectRate,
        text: `${concDirectRate.toFixed(0)} MB/s`,
      }],
      ratios: [{ of: 0, label: "of direct" }],
      goal: { text: "all 100 whole, ≥ 0.5 of direct", test: ({ ratios: [r] }) => r! >= 0.5 },
      note: `all 100 arrived whole in ${concSecs.toFixed(2)} s; ${concCpu.text}`,
      detail: {
        concSecs,
        concDirect,
        relayCpuMsPerMb: concCpu.relay,
        daemonCpuMsPerMb: concCpu.daemon,
      },
    });

    // 4. A stalled reader: its stream holds the window; the relay and runner stay flat.
    const stalled = await tunneled(`/big?mb=${sizeMb}`);
    const reader = stalled.body!.getReader();
    await reader.read();
    await new Promise((r) => setTimeout(r, 500));
    const rBefore = rssOf(relay.proc.pid), dBefore = rssOf(daemon);
    let rPeak = rBefore, dPeak = dBefore;
    for (let i = 0; i < (ctx.quick ? 20 : 60); i++) {
      await new Promise((r) => setTimeout(r, 50));
      rPeak = Math.max(rPeak, rssOf(relay.proc.pid));
      dPeak = Math.max(dPeak, rssOf(daemon));
    }
    await reader.cancel();
    const grown = Math.max(rPeak - rBefore, 0) + Math.max(dPeak - dBefore, 0);
    ctx.row({
      scenario: "13 tunnel",
      case: `a reader that stops reading a ${sizeMb} MB download`,
      metric: "RSS growth, relay + runner",
      baton: { name: "baton", value: grown / MB, text: mb(grown) },
      baselines: [{ name: "body", value: sizeMb, text: `${sizeMb} MB` }],
      ratios: [{ of: 0, inverse: true, label: "less", floor: 1 }],
      goal: { text: "< 16 MB", test: ({ baton }) => baton < 16 },
      note: `relay +${mb(rPeak - rBefore)}, runner +${mb(dPeak - dBefore)} over ${
        ctx.quick ? 1 : 3
      } s of stall (the stream's window is 512 KiB)`,
      detail: { rBefore, rPeak, dBefore, dPeak },
    });

    // 5. The terminal: one keystroke to its echo, through relay, tunnel and PTY.
    const samples = ctx.quick ? 100 : 400;
    const rtt = await keystrokes(relay.url, user, runnerId, samples);
    const p50 = percentileOf(rtt, 50), p99 = percentileOf(rtt, 99);
    ctx.log(`keystroke round trip: p50 ${ms(p50)}, p99 ${ms(p99)}`);
    ctx.row({
      scenario: "13 tunnel",
      case: `terminal keystroke to echo (${samples} keys, bash readline)`,
      metric: "round trip p50 (p99)",
      baton: { name: "baton", value: p50, text: `${ms(p50)} (${ms(p99)})` },
      baselines: [],
      goal: { text: "p99 ≤ 50 ms", test: () => p99 <= 50 },
      note: "browser socket → relay → tunnel stream → runner → PTY → shell echo → back",
      detail: { rtt },
    });
  } finally {
    await runner?.stop();
    await relay.stop();
    await service.shutdown();
  }
}

/** Opens a terminal, types `samples` keys one at a time and times each echo. */
async function keystrokes(
  base: string,
  user: User,
  runnerId: string,
  samples: number,
): Promise<number[]> {
  const res = await user.web(
    "/api/runners/terminal",
    json("POST", { runnerId }, { origin: base }),
  );
  if (res.status !== 200) throw new Error(`terminal: ${res.status} ${await res.text()}`);
  const { terminalId } = await res.json();
  const ws = new WebSocket(
    `${base.replace(/^http/, "ws")}/_terminal?runnerId=${runnerId}&terminalId=${terminalId}`,
    { headers: { cookie: user.cookie, origin: base } },
  );
  let out = "";
  let wake = () => {};
  const dec = new TextDecoder();
  ws.on("message", (data, binary) => {
    if (binary) out += dec.decode(data as Uint8Array, { stream: true });
    wake();
  });
  await new Promise((ok, fail) => (ws.once("open", ok), ws.once("error", fail)));
  const until = async (done: () => boolean, limitMs = 10_000) => {
    const end = Date.now() + limitMs;
    while (!done()) {
      if (Date.now() > end) {
        throw new Error(`terminal: no echo in ${JSON.stringify(out.slice(-200))}`);
      }
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, 50);
      });
    }
  };
  const send = (s: string) => ws.send(new TextEncoder().encode(s));
  send("echo ready\r");
  await until(() => /ready\r\n/.test(out));
  await new Promise((r) => setTimeout(r, 300));
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    // A letter, then its erasure: readline echoes each at once, the line stays empty.
    const key = i % 2 === 0 ? "x" : "\x7f";
    // readline erases with a backspace, then "\x1b[K" or "\b \b".
    const expect = i % 2 === 0 ? "x" : "\b";
    out = "";
    const s = performance.now();
    send(key);
    await until(() => out.includes(expect));
    times.push(performance.now() - s);
  }
  ws.close();
  await user.web(`/api/runners/${runnerId}/terminals/${terminalId}`, {
    method: "DELETE",
    headers: { origin: base },
  });
  return times;
}
