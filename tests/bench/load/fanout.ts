/**
 * Load generator of the fan-out, steady-rate, durability and sessions
 * scenarios: one synthetic runner streaming events of `sessions` sessions
 * and `viewers` viewer sockets per session, all in this process (the server
 * under test runs in another).
 *
 * Throughput mode is closed-loop: at most `window` events of a session are
 * in flight (sent but not yet received by every viewer of it). Rate mode
 * sends `rate` events/s per session on a clock (sessions out of phase).
 * Ack mode (no viewers) keeps at most `window` events of a session
 * unacknowledged and counts acks: events accepted by the relay.
 *
 * With `viewerUrls` the viewers of a session are split evenly across those
 * relays (the cluster scenario: the runner on node A, viewers on A and B).
 *
 * Prints `@{"ev":"ready"}` once connected, waits for `{"cmd":"go"}` on
 * stdin, then prints `@{"ev":"result", ...}`.
 *
 * @module
 */
import { io as ioClient } from "socket.io-client";
import { readLines } from "../../../runner/_lines.ts";
import { commands, cpuShare, emit, type ProcStat, procStat } from "../_proc.ts";
import { Histogram, type LatencySummary } from "../_stats.ts";
import { EventSource, frameSeqs } from "../_workload.ts";
import { spawnSession, SyntheticRunner } from "../clients/synthetic_runner.ts";
import { TcpWebSocket } from "../clients/tcp_ws.ts";
import {
  type ClientImpl,
  openViewers,
  type ServerKind,
  type ViewerConn,
} from "../clients/viewers.ts";

/** Configuration passed as the first argument (JSON). */
export interface FanoutConfig {
  kind: ServerKind;
  url: string;
  apiKey?: string;
  /** Viewers per session. */
  viewers: number;
  /** Sessions streaming at once (default 1; more than one puts viewers in rooms on the baselines). */
  sessions?: number;
  client: ClientImpl;
  mode: "throughput" | "rate" | "ack";
  /** Events in flight per session (throughput, ack). */
  window: number;
  /** Events per second per session (rate). */
  rate: number;
  /** Events per runner frame. */
  batch: number;
  warmupMs: number;
  durationMs: number;
  /** Pid of the server under test, for its CPU and RSS. */
  serverPid: number;
  /** With client "c" (rate mode only): the built `load/wsview.c`. */
  wsview?: string;
  /**
   * Where the viewers connect, split evenly in this order (default: `url`);
   * the runner always dials `url`.
   */
  viewerUrls?: string[];
  /** More processes whose CPU to report (a cluster's other node, its database, its bus). */
  otherPids?: number[];
}

/** What the load generator reports. */
export interface FanoutResult {
  kind: ServerKind;
  viewers: number;
  mode: string;
  /** Events delivered to viewers (one event to one viewer = one delivery) per second. */
  deliveriesPerSec: number;
  /** Events per second the runner got through, all sessions (delivered to all viewers, or acked). */
  eventsPerSec: number;
  latency: ReturnType<Histogram["summary"]>;
  serverCpu: number;
  /** CPU of `otherPids` together, as a share of one core (0 without them). */
  otherCpu: number;
  /** With the C client and several `viewerUrls`: the latency each URL's viewers saw. */
  latencyByUrl?: { url: string; p50: number; p99: number; n: number }[];
  clientCpu: number;
  serverRss: number;
  serverHwm: number;
  /** Frames the viewers received per second (all viewers together). */
  framesPerSec: number;
  sent: number;
  /** Events not delivered to every viewer by the end of the drain. */
  undelivered: number;
  /** Frames that did not continue a viewer's sequence (loss or duplicate). */
  gaps: number;
  connectMs: number;
}

const cfg = JSON.parse(Deno.args[0]!) as FanoutConfig;
const events = new EventSource();

/** One session's stream, as the load generator sees it. */
class Stream {
  sent = 0;
  /** Highest seq every viewer of the session has received. */
  fully = 0;
  acked = 0;
  sendTime: Float64Array;
  counts: Uint16Array;

  constructor(readonly id: string, readonly index: number, capacity: number) {
    this.sendTime = new Float64Array(capacity);
    this.counts = new Uint16Array(capacity);
  }

  grow(seq: number): void {
    while (seq >= this.sendTime.length) {
      const t = new Float64Array(this.sendTime.length * 2);
      t.set(this.sendTime);
      this.sendTime = t;
      const c = new Uint16Array(this.counts.length * 2);
      c.set(this.counts);
      this.counts = c;
    }
  }
}

/**
 * The viewers in the C client (`load/wsview.c`), a process of their own: it
 * reads event send times from each frame's `ts`, on its clock.
 */
class NativeViewers {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #lines: AsyncIterator<string>;

  constructor(binary: string, args: string[]) {
    this.#child = new Deno.Command(binary, {
      args,
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#writer = this.#child.stdin.getWriter();
    this.#lines = readLines(this.#child.stdout)[Symbol.asyncIterator]();
  }

  get pid(): number {
    return this.#child.pid;
  }

  async send(cmd: string): Promise<void> {
    await this.#writer.write(new TextEncoder().encode(cmd + "\n"));
  }

  async line(): Promise<string> {
    const r = await this.#lines.next();
    if (r.done) throw new Error("wsview exited");
    return r.value;
  }

  /** Its clock minus ours (ms), from the exchange with the shortest round trip. */
  async clockOffset(): Promise<number> {
    let best = { rtt: Infinity, offset: 0 };
    for (let i = 0; i < 9; i++) {
      const t1 = performance.now();
      await this.send("clock");
      const { clock } = JSON.parse(await this.line()) as { clock: number };
      const t2 = performance.now();
      if (t2 - t1 < best.rtt) best = { rtt: t2 - t1, offset: clock - (t1 + t2) / 2 };
    }
    return best.offset;
  }

  async close(): Promise<void> {
    await this.send("quit").catch(() => {});
    await this.#child.status;
  }
}

const sessionCount = cfg.sessions ?? 1;
const viewerUrls = cfg.viewerUrls?.length ? cfg.viewerUrls : [cfg.url];
/** How many of a session's viewers connect to `viewerUrls[k]`. */
const shareOf = (k: number) =>
  Math.floor(cfg.viewers / viewerUrls.length) + (k < cfg.viewers % viewerUrls.length ? 1 : 0);
let stopping = false;
let measuring = false;
let windowStart = 0;
let deliveries = 0;
let frames = 0;
let gaps = 0;
const hist = new Histogram();
const lastSeen = new Int32Array(Math.max(1, cfg.viewers * sessionCount));
/** Events acknowledged, all sessions together. */
let ackedTotal = 0;

// ---------------------------------------------------------------------------
// The publishing side

let publish: (st: Stream, frame: string) => void;
let runner: SyntheticRunner | null = null;
/** Rooms on the baselines only with several sessions (one session is a broadcast to all). */
const rooms = sessionCount > 1;

const t0 = performance.now();
let ids: string[];
if (cfg.kind === "baton") {
  const r = runner = await SyntheticRunner.connect({ url: cfg.url, apiKey: cfg.apiKey! });
  ids = [];
  for (let i = 0; i < sessionCount; i += 10) {
    const n = Math.min(10, sessionCount - i);
    ids.push(
      ...await Promise.all(
        Array.from({ length: n }, () => spawnSession(cfg.url, cfg.apiKey!, r.runnerId)),
      ),
    );
  }
  publish = (_st, frame) => r.send(frame);
} else {
  ids = rooms ? Array.from({ length: sessionCount }, (_, i) => `s${i}`) : ["bench"];
  if (cfg.kind === "bare") {
    // The same publisher client as baton's synthetic runner; the server routes by the sessionId.
    const ws = await TcpWebSocket.connect(cfg.url.replace(/^http/, "ws") + "/publish");
    publish = (_st, frame) => ws.send(frame);
  } else {
    const s = ioClient(cfg.url + "/pub", { transports: ["websocket"], forceNew: true });
    await new Promise<void>((resolve, reject) => {
      s.on("connect", () => resolve());
      s.on("connect_error", reject);
    });
    publish = rooms
      ? (st, frame) => s.emit("events", frame, st.id)
      : (_st, frame) => s.emit("events", frame);
  }
}
const streams = ids.map((id, i) => new Stream(id, i, rooms ? 1 << 12 : 1 << 16));
if (runner) {
  const byId = new Map(streams.map((st) => [st.id, st]));
  runner.onAck = (sessionId, seq) => {
    const st = byId.get(sessionId);
    if (!st || seq <= st.acked) return;
    ackedTotal += seq - st.acked;
    st.acked = seq;
    if (cfg.mode === "ack") onAcked(st, seq);
  };
}

/** Added to performance.now() for each event's `ts`: 0 but with the C client. */
let tsOffset = 0;

function sendNext(st: Stream): void {
  const first = st.sent + 1;
  const last = st.sent + cfg.batch;
  st.grow(last);
  const now = performance.now();
  for (let s = first; s <= last; s++) st.sendTime[s] = now;
  st.sent = last;
  publish(st, events.frame(st.id, first, last, natives.length ? now + tsOffset : Date.now()));
}

function pump(st: Stream): void {
  if (stopping || cfg.mode === "rate") return;
  const done = cfg.mode === "ack" ? st.acked : st.fully;
  while (st.sent - done < cfg.window) sendNext(st);
}

// ---------------------------------------------------------------------------
// The receiving side

/** A frame at viewer `i` (of all sessions' viewers; session `i / viewers`). */
function onFrame(i: number, text: string): void {
  const seqs = frameSeqs(text);
  if (!seqs) return;
  const st = streams[Math.floor(i / cfg.viewers)]!;
  const [a, b] = seqs;
  if (a !== lastSeen[i]! + 1) gaps++;
  lastSeen[i] = b;
  const now = performance.now();
  const n = b - a + 1;
  if (measuring) {
    frames++;
    deliveries += n;
    for (let s = a; s <= b; s++) hist.record(now - st.sendTime[s]!);
  }
  let advanced = false;
  for (let s = a; s <= b; s++) {
    if (++st.counts[s]! === cfg.viewers && s === st.fully + 1) {
      st.fully = s;
      advanced = true;
    }
  }
  if (advanced) {
    while (st.fully < st.sent && st.counts[st.fully + 1] === cfg.viewers) st.fully++;
    pump(st);
  }
}

function onAcked(st: Stream, seq: number): void {
  if (measuring) {
    const now = performance.now();
    for (let s = st.fully + 1; s <= seq; s++) hist.record(now - st.sendTime[s]!);
  }
  st.fully = seq;
  pump(st);
}

if (cfg.client === "c" && (cfg.mode !== "rate" || !cfg.wsview || sessionCount > 1)) {
  throw new Error(
    "The C client runs the rate mode of one session only, and needs the wsview binary",
  );
}
/** The C clients: one per viewer URL that gets viewers. */
const natives = cfg.client === "c"
  ? viewerUrls.flatMap((u, k) =>
    shareOf(k) === 0 ? [] : [
      new NativeViewers(cfg.wsview!, [
        cfg.kind,
        new URL(u).hostname,
        new URL(u).port,
        String(shareOf(k)),
        cfg.apiKey ?? "",
        streams[0]!.id,
      ]),
    ]
  )
  : [];
const conns: ViewerConn[] = [];
if (!natives.length) {
  for (const st of streams) {
    let first = 0;
    for (const [k, url] of viewerUrls.entries()) {
      const n = shareOf(k);
      if (n === 0) continue;
      const base = st.index * cfg.viewers + first;
      first += n;
      conns.push(
        ...await openViewers(
          n,
          {
            kind: cfg.kind,
            url,
            apiKey: cfg.apiKey ?? "",
            sessionId: st.id,
            since: 0,
            ...(rooms ? { room: st.id } : {}),
          },
          cfg.client as ClientImpl,
          (i, text) => onFrame(base + i, text),
        ),
      );
    }
  }
}
for (const native of natives) {
  const line = await native.line();
  if (line !== "ready") throw new Error(`wsview: ${line}`);
}
// Every C client reads CLOCK_MONOTONIC: one offset serves them all.
if (natives.length) tsOffset = await natives[0]!.clockOffset();
emit("ready", { connectMs: Math.round(performance.now() - t0), sessions: streams.length });

for await (const cmd of commands()) {
  if (cmd.cmd === "go") break;
}

// ---------------------------------------------------------------------------
// Run: warm up, measure, drain

let rateTimer: ReturnType<typeof setTimeout> | undefined;
if (cfg.mode === "rate") {
  const start = performance.now();
  const tick = () => {
    if (stopping) return;
    const elapsed = (performance.now() - start) / 1000;
    for (const st of streams) {
      // Sessions out of phase, as independent agents are.
      const due = Math.floor(elapsed * cfg.rate + st.index / streams.length);
      while (st.sent < due) sendNext(st);
    }
    rateTimer = setTimeout(tick, Math.max(1, 1000 / (cfg.rate * streams.length) / 2));
  };
  tick();
} else for (const st of streams) pump(st);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
await sleep(cfg.warmupMs);
/** CPU of the load generator: this process and the C client if any. */
const selfStat = (): ProcStat => {
  const me = procStat(Deno.pid);
  let cpuMs = me.cpuMs;
  for (const native of natives) cpuMs += procStat(native.pid).cpuMs;
  return { ...me, cpuMs };
};
const serverBefore = procStat(cfg.serverPid);
/** CPU ms of the other processes (one that is gone counts as none). */
const otherCpuMs = () =>
  (cfg.otherPids ?? []).map((pid) => {
    try {
      return procStat(pid).cpuMs;
    } catch {
      return NaN;
    }
  });
const othersBefore = otherCpuMs();
const selfBefore = selfStat();
windowStart = performance.now();
const ackedAtStart = ackedTotal;
await Promise.all(natives.map((n) => n.send("measure")));
measuring = true;
await sleep(cfg.durationMs);
measuring = false;
await Promise.all(natives.map((n) => n.send("stop")));
const elapsed = performance.now() - windowStart;
const ackedInWindow = ackedTotal - ackedAtStart;
const serverAfter = procStat(cfg.serverPid);
const othersAfter = otherCpuMs();
const selfAfter = selfStat();
stopping = true;
clearTimeout(rateTimer);

let latency: LatencySummary;
let undelivered: number;
let latencyByUrl: FanoutResult["latencyByUrl"];
if (natives.length) {
  // Each C client drains on its own and reports what it measured.
  interface WsviewResult {
    frames: number;
    deliveries: number;
    gaps: number;
    closed: number;
    latency: { count: number; mean: number; p50: number; p90: number; p99: number; max: number };
  }
  const parts: { r: WsviewResult; undelivered: number }[] = [];
  for (const native of natives) {
    await native.send(`drain ${streams[0]!.sent} 15000`);
    const r = JSON.parse(await native.line()) as WsviewResult;
    const drained = JSON.parse(await native.line()) as { undelivered: number };
    parts.push({ r, undelivered: drained.undelivered + (r.closed > 0 ? streams[0]!.sent : 0) });
    await native.close();
  }
  frames =
    deliveries =
    gaps =
    undelivered =
      0;
  for (const { r, undelivered: u } of parts) {
    frames += r.frames;
    deliveries += r.deliveries;
    gaps += r.gaps;
    undelivered += u;
  }
  if (parts.length > 1) {
    latencyByUrl = parts.map(({ r }, k) => ({
      url: viewerUrls.filter((_, i) => shareOf(i) > 0)[k]!,
      p50: r.latency.p50,
      p99: r.latency.p99,
      n: r.latency.count,
    }));
  }
  // Several clients (viewers on several relays): the percentiles of their
  // union lie between the clients' own, so the highest is an upper bound.
  const n = parts.reduce((sum, { r }) => sum + r.latency.count, 0);
  const top = (k: "p50" | "p90" | "p99" | "max") => Math.max(...parts.map(({ r }) => r.latency[k]));
  latency = {
    n,
    mean: parts.reduce((sum, { r }) => sum + r.latency.mean * r.latency.count, 0) / Math.max(1, n),
    p50: top("p50"),
    p90: top("p90"),
    p99: top("p99"),
    max: top("max"),
  };
} else {
  // Every event sent must reach every viewer (or be acked) before we report.
  const drainDeadline = performance.now() + 15_000;
  const behind = () => {
    let n = 0;
    for (const st of streams) n += st.sent - (cfg.mode === "ack" ? st.acked : st.fully);
    return n;
  };
  while (behind() > 0 && performance.now() < drainDeadline) await sleep(20);
  latency = hist.summary();
  undelivered = behind();
}

const result: FanoutResult = {
  kind: cfg.kind,
  viewers: cfg.viewers,
  mode: cfg.mode,
  deliveriesPerSec: (deliveries / elapsed) * 1000,
  eventsPerSec: cfg.mode === "ack"
    ? (ackedInWindow / elapsed) * 1000
    : (deliveries / Math.max(1, cfg.viewers) / elapsed) * 1000,
  latency,
  serverCpu: cpuShare(serverBefore, serverAfter, elapsed),
  ...(latencyByUrl ? { latencyByUrl } : {}),
  otherCpu: othersAfter.reduce((sum, ms, i) => sum + ((ms - othersBefore[i]!) || 0), 0) / elapsed,
  clientCpu: cpuShare(selfBefore, selfAfter, elapsed),
  serverRss: serverAfter.rss,
  serverHwm: serverAfter.hwm,
  framesPerSec: (frames / elapsed) * 1000,
  sent: streams.reduce((n, st) => n + st.sent, 0),
  undelivered,
  gaps,
  connectMs: Math.round(windowStart - t0),
};
emit("result", result as unknown as Record<string, unknown>);
for (const c of conns) c.close();
runner?.close();
Deno.exit(0);
