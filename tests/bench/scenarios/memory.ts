/**
 * Scenario 5: relay memory. RSS of an idle relay as `baton relay` starts it
 * (and after a first sign-in with a browser connected), against a bare
 * `Deno.serve`; RSS per idle connection (1,000 viewers, 100
 * runners) against the bare broadcaster's per-socket cost; and RSS after a
 * viewer that never reads has been sent 100 MB of events, against the bare
 * broadcaster that queues everything for it; 1,000 viewers catching up at
 * once; and 200 viewers that never read.
 *
 * @module
 */
import { join } from "node:path";
import { signUp } from "../../harness/client.ts";
import { ROOT } from "../../harness/procs.ts";
import { procStat } from "../_proc.ts";
import type { BenchContext, GoalFigures } from "../_report.ts";
import { mb } from "../_stats.ts";
import { frameSeqs } from "../_workload.ts";
import { spawnSession, SyntheticRunner } from "../clients/synthetic_runner.ts";
import { TcpWebSocket } from "../clients/tcp_ws.ts";
import { openViewers, type ViewerConn } from "../clients/viewers.ts";
import { type Server, startServer, startServers } from "./fanout.ts";
import { replayOnce, seedSession } from "./replay.ts";

const MiB = 1024 * 1024;

async function settle(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/** How long {@linkcode rss} lets a server settle first (shorter in quick runs). */
let settleMs = 500;

/** RSS of the server after a short settle (median of 3 reads, a fifth of that apart). */
async function rss(server: Server): Promise<number> {
  await settle(settleMs);
  const reads: number[] = [];
  for (let i = 0; i < 3; i++) {
    reads.push(procStat(server.proc.pid).rss);
    await settle(settleMs / 5);
  }
  return reads.sort((a, b) => a - b)[1]!;
}

/** A WebSocket client on a raw TCP socket that does the handshake, subscribes and never reads again. */
async function stalledViewer(
  url: string,
  path: string,
  headers: Record<string, string>,
  firstMessage: string | null,
): Promise<Deno.TcpConn> {
  const u = new URL(url);
  const conn = await Deno.connect({ hostname: u.hostname, port: Number(u.port) });
  const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
  const extra = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("");
  await conn.write(new TextEncoder().encode(
    `GET ${path} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`,
  ));
  // Read the 101 answer only.
  const buf = new Uint8Array(4096);
  let head = "";
  while (!head.includes("\r\n\r\n")) {
    const n = await conn.read(buf);
    if (n === null) throw new Error("Stalled viewer: connection closed during the handshake");
    head += new TextDecoder().decode(buf.subarray(0, n));
  }
  if (!head.startsWith("HTTP/1.1 101")) {
    throw new Error(`Stalled viewer refused: ${head.split("\r\n")[0]}`);
  }
  if (firstMessage) await conn.write(maskedTextFrame(firstMessage));
  return conn;
}

function maskedTextFrame(text: string): Uint8Array {
  const payload = new TextEncoder().encode(text);
  const len = payload.length;
  const header = len < 126 ? [0x81, 0x80 | len] : [0x81, 0x80 | 126, len >> 8, len & 0xff];
  const mask = crypto.getRandomValues(new Uint8Array(4));
  const out = new Uint8Array(header.length + 4 + len);
  out.set(header, 0);
  out.set(mask, header.length);
  for (let i = 0; i < len; i++) out[header.length + 4 + i] = payload[i]! ^ mask[i % 4]!;
  return out;
}

/** Frame of one big tool output event. */
function bigFrame(sessionId: string, seq: number, text: string): string {
  return `{"t":"events","sessionId":"${sessionId}","events":[{"seq":${seq},"ts":${Date.now()},` +
    `"e":{"type":"tool_execution_update","toolCallId":"call_${seq}","toolName":"bash",` +
    `"partialResult":{"content":[{"type":"text","text":"${text}"}]}}}]}`;
}

async function idleConnections(ctx: BenchContext): Promise<void> {
  const viewers = ctx.quick ? 500 : 1000;
  const runners = 100;
  const [baton, bare] = await startServers(ctx, "baton", "bare");
  const conns: ViewerConn[] = [];
  const links: SyntheticRunner[] = [];
  try {
    const sessionId = await seedSession(baton, 100);
    const bIdle = await rss(baton);
    conns.push(
      ...await openViewers(
        viewers,
        { kind: "baton", url: baton.url, apiKey: baton.apiKey, sessionId },
        "native",
        () => {},
      ),
    );
    const bViewers = await rss(baton);
    for (let i = 0; i < runners; i += 10) {
      links.push(
        ...await Promise.all(
          Array.from(
            { length: 10 },
            () => SyntheticRunner.connect({ url: baton.url, apiKey: baton.apiKey }),
          ),
        ),
      );
    }
    const bRunners = await rss(baton);

    const aIdle = await rss(bare);
    conns.push(...await openViewers(viewers, { kind: "bare", url: bare.url }, "native", () => {}));
    const aViewers = await rss(bare);

    const perViewer = (bViewers - bIdle) / viewers;
    const perRunner = (bRunners - bViewers) / runners;
    const barePer = (aViewers - aIdle) / viewers;
    ctx.log(
      `idle: baton ${mb(bIdle)} → ${mb(bViewers)} (+${viewers} viewers) → ${mb(bRunners)} ` +
        `(+${runners} runners); bare ${mb(aIdle)} → ${mb(aViewers)}`,
    );
    ctx.row({
      scenario: "5 memory",
      case: `${viewers} idle viewers (subscribed)`,
      metric: "RSS per connection",
      baton: { name: "baton", value: perViewer, text: `${(perViewer / 1024).toFixed(1)} KB` },
      baselines: [{
        name: "(a) bare socket",
        value: barePer,
        text: `${(barePer / 1024).toFixed(1)} KB`,
      }],
      ratios: [{ of: 0 }],
      note: `relay RSS ${mb(bIdle)} idle → ${mb(bViewers)}`,
      detail: { bIdle, bViewers, aIdle, aViewers },
    });
    ctx.row({
      scenario: "5 memory",
      case: `${runners} idle runners`,
      metric: "RSS per connection",
      baton: { name: "baton", value: perRunner, text: `${(perRunner / 1024).toFixed(1)} KB` },
      baselines: [{
        name: "(a) bare socket",
        value: barePer,
        text: `${(barePer / 1024).toFixed(1)} KB`,
      }],
      ratios: [{ of: 0 }],
      note: `relay RSS → ${mb(bRunners)} with ${viewers} viewers and ${runners} runners`,
      detail: { bViewers, bRunners },
    });
  } finally {
    for (const c of conns) c.close();
    for (const l of links) l.close();
    await baton.proc.stop();
    await bare.proc.stop();
  }
}

/** Streams `bytes` of 32 KB events past `stalledCount` stalled viewers and a normal one; returns RSS figures. */
export async function stalled(
  server: Server,
  bytes: number,
  stalledCount = 1,
  settleSeconds = 0,
) {
  const text = "x".repeat(32 * 1024);
  const total = Math.ceil(bytes / text.length);
  let sessionId = "bench";
  let publish: (frame: string) => void;
  let acked = 0;
  let runner: SyntheticRunner | null = null;
  let pub: TcpWebSocket | null = null;
  if (server.kind === "baton") {
    runner = await SyntheticRunner.connect({ url: server.url, apiKey: server.apiKey });
    sessionId = await spawnSession(server.url, server.apiKey, runner.runnerId);
    runner.onAck = (_s, seq) => acked = seq;
    publish = (f) => runner!.send(f);
  } else {
    pub = await TcpWebSocket.connect(server.url.replace(/^http/, "ws") + "/publish");
    publish = (f) => pub!.send(f);
  }
  let received = 0;
  let gaps = 0;
  const [normal] = await openViewers(
    1,
    { kind: server.kind, url: server.url, apiKey: server.apiKey, sessionId },
    "native",
    (_i, t) => {
      const s = frameSeqs(t);
      if (!s) return;
      if (s[0] !== received + 1) gaps++;
      received = s[1];
    },
  );
  const conns: Deno.TcpConn[] = [];
  for (let i = 0; i < stalledCount; i++) {
    conns.push(
      server.kind === "baton"
        ? await stalledViewer(
          server.url,
          "/_viewer",
          { "x-api-key": server.apiKey },
          JSON.stringify({ t: "subscribe", sessionId, since: 0 }),
        )
        : await stalledViewer(server.url, "/", {}, null),
    );
  }
  const idle = await rss(server);
  const t0 = performance.now();
  // Keep about 2 MB in flight towards the server (acked for baton, received by the normal viewer).
  let sent = 0;
  while (received < total) {
    const done = server.kind === "baton" ? Math.min(acked, received + 64) : received;
    while (sent < total && sent - done < 64) publish(bigFrame(sessionId, ++sent, text));
    await new Promise((r) => setTimeout(r, 2));
    if (performance.now() - t0 > 120_000) throw new Error("Stalled-viewer run did not finish");
  }
  const seconds = (performance.now() - t0) / 1000;
  const after = await rss(server);
  const peak = procStat(server.proc.pid).hwm;
  // V8 gives garbage back lazily (its memory reducer runs once the process
  // is quiet): watch RSS settle for up to 40 s, while the stalled viewer
  // stays connected.
  let settled = after;
  let waited = 0;
  for (let i = 1; i <= settleSeconds; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    settled = await rss(server);
    waited = i;
    if (settled - idle < 50 * MiB) break;
  }
  normal!.close();
  for (const conn of conns) conn.close();
  runner?.close();
  pub?.close();
  return { idle, after, peak, settled, settleSeconds: waited, seconds, total, gaps };
}

async function stalledViewerRun(ctx: BenchContext): Promise<void> {
  const bytes = 100 * MiB;
  const [baton, bare] = await startServers(ctx, "baton", "bare");
  try {
    // Only baton is watched as it settles: the bare broadcaster keeps what it queued.
    const b = await stalled(baton, bytes, 1, ctx.quick ? 0 : 40);
    const a = await stalled(bare, bytes);
    // The same stream with no stalled viewer: what streaming 100 MB costs by itself.
    let c: Awaited<ReturnType<typeof stalled>> | null = null;
    if (!ctx.quick) {
      const control = await startServer(ctx, "baton");
      c = await stalled(control, bytes, 0).finally(() => control.proc.stop());
    }
    ctx.log(
      `stalled: baton ${mb(b.idle)} → ${mb(b.after)} (peak ${mb(b.peak)}) in ${
        b.seconds.toFixed(1)
      } s; ` +
        `bare ${mb(a.idle)} → ${mb(a.after)}`,
    );
    const grown = b.settled - b.idle;
    ctx.row({
      scenario: "5 memory",
      case: "a viewer that never reads, sent 100 MB",
      metric: "RSS over idle once settled (right after the stream; peak)",
      baton: {
        name: "baton",
        value: grown,
        text: `+${mb(grown)} after ${b.settleSeconds} s (+${mb(b.after - b.idle)}; peak +${
          mb(b.peak - b.idle)
        })`,
      },
      baselines: [{
        name: "(a) bare",
        value: a.settled - a.idle,
        text: `+${mb(a.settled - a.idle)} (+${mb(a.after - a.idle)} right after)`,
      }],
      ratios: [{ of: 0 }],
      goal: { text: "< 50 MB above idle", test: (f) => f.baton < 50 * MiB, sound: b.gaps === 0 },
      note: (c ? `same stream without the stalled viewer: +${mb(c.after - c.idle)}; ` : "") +
        `a normal viewer next to it got all ${b.total} events in ${b.seconds.toFixed(1)} s` +
        (b.gaps ? ` but with ${b.gaps} gaps` : ""),
      detail: { baton: b, bare: a, withoutStalledViewer: c },
    });
  } finally {
    await baton.proc.stop();
    await bare.proc.stop();
  }
}

/**
 * Many viewers that never read (phones on a dead network, say): each one's
 * kernel buffers take ~4 MB, then the server holds the rest. baton caps what
 * all viewers together may have waiting (VIEWER_QUEUE_BUDGET, 32 MB); the
 * bare server queues it all.
 */
async function manyStalledRun(ctx: BenchContext): Promise<void> {
  const count = ctx.quick ? 50 : 200;
  const bytes = 6 * MiB;
  const [baton, bare] = await startServers(ctx, "baton", "bare");
  try {
    const b = await stalled(baton, bytes, count, ctx.quick ? 0 : 30);
    const a = await stalled(bare, bytes, count);
    // The same stream to the normal viewer alone, on a fresh relay (full runs).
    let c: Awaited<ReturnType<typeof stalled>> | null = null;
    if (!ctx.quick) {
      const control = await startServer(ctx, "baton");
      c = await stalled(control, bytes, 0).finally(() => control.proc.stop());
    }
    ctx.log(
      `${count} stalled: baton ${mb(b.idle)} → ${mb(b.after)} → ${
        mb(b.settled)
      } after ${b.settleSeconds} s; bare ${mb(a.idle)} → ${mb(a.after)}` +
        (c ? `; without them ${mb(c.idle)} → ${mb(c.after)}` : ""),
    );
    const grown = b.settled - b.idle;
    ctx.row({
      scenario: "5 memory",
      case: `${count} viewers that never read, sent ${bytes / MiB} MB each`,
      metric: "RSS over idle once settled (right after the stream)",
      baton: {
        name: "baton",
        value: grown,
        text: `+${mb(grown)} after ${b.settleSeconds} s (+${mb(b.after - b.idle)})`,
      },
      baselines: [{
        name: "(a) bare",
        value: a.after - a.idle,
        text: `+${mb(a.after - a.idle)}`,
      }],
      ratios: [{ of: 0 }],
      ...(ctx.quick ? {} : {
        goal: {
          text: "< 50 MB above idle once settled",
          test: (f: GoalFigures) => f.baton < 50 * MiB,
          sound: b.gaps === 0,
        },
      }),
      note: `the first ~4 MB to each sits in the kernel's socket buffers; ` +
        (c ? `the same stream without them: +${mb(c.after - c.idle)}; ` : "") +
        `a normal viewer next to them got all ${b.total} events in ${b.seconds.toFixed(1)} s` +
        (b.gaps ? ` but with ${b.gaps} gaps` : ""),
      detail: { baton: b, bare: a, withoutStalledViewers: c },
    });
  } finally {
    await baton.proc.stop();
    await bare.proc.stop();
  }
}

/** Opens `n` viewers on the bare server's `/replay` (50 at a time), each until caught up. */
async function bareReplays(url: string, n: number, total: number): Promise<WebSocket[]> {
  const out: WebSocket[] = [];
  const replayUrl = `${url.replace(/^http/, "ws")}/replay?total=${total}&since=0`;
  for (let i = 0; i < n; i += 50) {
    const batch = Array.from(
      { length: Math.min(50, n - i) },
      () => replayOnce(replayUrl, {}, null, true),
    );
    out.push(...(await Promise.all(batch)).map((r) => r.ws));
  }
  return out;
}

/**
 * 1,000 viewers joining a session with history at once (a shared link, a
 * dashboard on many screens): relay RSS once all of them caught up.
 */
async function catchUpBurst(ctx: BenchContext): Promise<void> {
  const viewers = ctx.quick ? 500 : 1000;
  const events = 1000;
  const [baton, bare] = await startServers(ctx, "baton", "bare");
  const conns: ViewerConn[] = [];
  const sockets: WebSocket[] = [];
  try {
    const sessionId = await seedSession(baton, events);
    const bIdle = await rss(baton);
    const t0 = performance.now();
    conns.push(
      ...await openViewers(
        viewers,
        { kind: "baton", url: baton.url, apiKey: baton.apiKey, sessionId },
        "native",
        () => {},
      ),
    );
    const bMs = performance.now() - t0;
    const bAfter = await rss(baton);
    const aIdle = await rss(bare);
    const t1 = performance.now();
    sockets.push(...await bareReplays(bare.url, viewers, events));
    const aMs = performance.now() - t1;
    const aAfter = await rss(bare);
    ctx.log(
      `catch-up burst: baton ${mb(bIdle)} → ${mb(bAfter)} in ${bMs.toFixed(0)} ms; ` +
        `bare ${mb(aIdle)} → ${mb(aAfter)} in ${aMs.toFixed(0)} ms`,
    );
    ctx.row({
      scenario: "5 memory",
      case: `${viewers} viewers join a ${events}-event session (~540 KB) at once`,
      metric: "RSS over idle once all caught up",
      baton: { name: "baton", value: bAfter - bIdle, text: `+${mb(bAfter - bIdle)}` },
      baselines: [{
        name: "(a) bare replay",
        value: aAfter - aIdle,
        text: `+${mb(aAfter - aIdle)}`,
      }],
      ratios: [{ of: 0 }],
      note: `all caught up in ${(bMs / 1000).toFixed(1)} s (bare ${
        (aMs / 1000).toFixed(1)
      } s, 500-event frames from memory); baton sends catch-up frames of up to 64 KB`,
      detail: { bIdle, bAfter, bMs, aIdle, aAfter, aMs },
    });
  } finally {
    for (const c of conns) c.close();
    for (const s of sockets) s.close();
    await baton.proc.stop();
    await bare.proc.stop();
  }
}

/** The relay's idle memory goal (issue 17): an embedded relay that nobody uses yet. */
const IDLE_GOAL = 60 * MiB;

/** RSS of `pid` after `ms` to settle (median of 3 reads, 200 ms apart). */
async function settledRss(pid: number, ms: number): Promise<number> {
  await settle(ms);
  const reads: number[] = [];
  for (let i = 0; i < 3; i++) {
    reads.push(procStat(pid).rss);
    await settle(200);
  }
  return reads.sort((a, b) => a - b)[1]!;
}

/**
 * `baton relay` (or `deno task relay`) started as a user starts it, with a
 * fresh data folder under a temporary HOME; resolves once it listens.
 */
async function startUserRelay(
  ctx: BenchContext,
  how: "run" | "task",
): Promise<{ child: Deno.ChildProcess; url: string; home: string }> {
  const home = await Deno.makeTempDir({ prefix: "baton-bench-idle-" });
  const [command, ...prefix] = [...ctx.pinning.serverPrefix(), Deno.execPath()];
  const args = how === "run" ? ["run", "-A", "main.ts", "relay"] : ["task", "-q", "relay"];
  const child = new Deno.Command(command!, {
    args: [...prefix, ...args, "--port", "0"],
    cwd: ROOT,
    env: {
      NO_COLOR: "1",
      HOME: home,
      // The temporary HOME must not send Deno to an empty cache (it would
      // download every npm package again, and that memory would be counted).
      DENO_DIR: Deno.env.get("DENO_DIR") ?? join(Deno.env.get("HOME") ?? "", ".cache", "deno"),
    },
    stdout: "piped",
    stderr: "null",
  }).spawn();
  let out = "";
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const deadline = setTimeout(() => child.kill("SIGKILL"), 60_000);
  while (!/listening on (\S+)/.test(out)) {
    const r = await reader.read();
    if (r.done) throw new Error(`baton relay (${how}) exited before listening:\n${out}`);
    out += r.value;
  }
  clearTimeout(deadline);
  // Keep reading so that the relay never blocks on a full pipe.
  (async () => {
    while (!(await reader.read()).done) { /* discard */ }
  })().catch(() => {});
  return { child, url: out.match(/listening on (\S+)/)![1]!, home };
}

async function stopUserRelay(r: { child: Deno.ChildProcess; home: string }): Promise<void> {
  // The relay under `deno task` first: the wrapper need not pass the signal on.
  for (const pid of [...childrenOf(r.child.pid), r.child.pid]) {
    try {
      Deno.kill(pid, "SIGTERM");
    } catch {
      // Already gone.
    }
  }
  await r.child.status;
  await Deno.remove(r.home, { recursive: true }).catch(() => {});
}

/** The pids of `pid`'s children (Linux). */
function childrenOf(pid: number): number[] {
  try {
    const text = Deno.readTextFileSync(`/proc/${pid}/task/${pid}/children`).trim();
    return text ? text.split(/\s+/).map(Number) : [];
  } catch {
    return [];
  }
}

/**
 * RSS of an idle relay on the embedded default, as the process a user runs
 * (`deno run -A main.ts relay`, what `baton relay` is from source), then
 * after a first sign-up and sign-in with a viewer connected; against a bare
 * `Deno.serve` broadcaster. What the `deno task relay` wrapper process adds
 * is in the note.
 */
async function idleRelay(ctx: BenchContext): Promise<void> {
  const settleFor = ctx.quick ? 1000 : 3000;
  const relay = await startUserRelay(ctx, "run");
  let idle = 0;
  let signedIn = 0;
  try {
    idle = await settledRss(relay.child.pid, settleFor);
    const user = await signUp(relay.url);
    const viewer = new WebSocket(`${relay.url.replace(/^http/, "ws")}/_viewer`, {
      headers: { cookie: user.cookie, origin: relay.url },
    });
    await new Promise((resolve, reject) => {
      viewer.onopen = resolve;
      viewer.onerror = () => reject(new Error("viewer socket failed"));
    });
    await (await user.web("/api/sessions")).body?.cancel();
    signedIn = await settledRss(relay.child.pid, settleFor);
    viewer.close();
  } finally {
    await stopUserRelay(relay);
  }
  // The task runner in front of it: its own process, the relay its child.
  const task = await startUserRelay(ctx, "task");
  let wrapper = 0;
  let wrapped = 0;
  try {
    wrapper = await settledRss(task.child.pid, settleFor);
    const kids = childrenOf(task.child.pid);
    wrapped = kids.reduce((sum, pid) => sum + procStat(pid).rss, 0);
  } finally {
    await stopUserRelay(task);
  }
  const bare = await startServer(ctx, "bare");
  let bareIdle = 0;
  try {
    bareIdle = await settledRss(bare.proc.pid, settleFor);
  } finally {
    await bare.proc.stop();
  }
  ctx.log(
    `idle relay: ${mb(idle)} → ${mb(signedIn)} signed in; deno task wrapper ${mb(wrapper)} ` +
      `(+ relay ${mb(wrapped)}); bare Deno.serve ${mb(bareIdle)}`,
  );
  ctx.row({
    scenario: "5 memory",
    case: "idle relay (`deno run -A main.ts relay`, new data folder)",
    metric: "RSS",
    baton: { name: "baton", value: idle, text: mb(idle) },
    baselines: [{ name: "(a) bare Deno.serve", value: bareIdle, text: mb(bareIdle) }],
    goal: { text: "< 60 MB", test: (f) => f.baton < IDLE_GOAL },
    note: `\`deno task relay\` adds its own process: ${mb(wrapper)} (the relay under it ${
      mb(wrapped)
    })`,
    detail: { idle, bareIdle, wrapper, wrapped },
  });
  ctx.row({
    scenario: "5 memory",
    case: "the same relay after a first sign-up and sign-in, a browser's viewer connected",
    metric: "RSS",
    baton: { name: "baton", value: signedIn, text: mb(signedIn) },
    baselines: [{ name: "(a) bare Deno.serve", value: bareIdle, text: mb(bareIdle) }],
    note: "better-auth is loaded on the first request that needs it",
    detail: { idle, signedIn },
  });
}

/** Runs the memory scenario. */
export async function memory(ctx: BenchContext): Promise<void> {
  settleMs = ctx.quick ? 250 : 500;
  await idleRelay(ctx);
  await idleConnections(ctx);
  await catchUpBurst(ctx);
  await stalledViewerRun(ctx);
  await manyStalledRun(ctx);
}
