/**
 * Load generator of the fan-out, steady-rate and durability scenarios: one
 * synthetic runner streaming events of one session and `viewers` viewer
 * sockets, all in this process (the server under test runs in another).
 *
 * Throughput mode is closed-loop: at most `window` events are in flight
 * (sent but not yet received by every viewer). Rate mode sends `rate`
 * events/s on a clock. Ack mode (no viewers) keeps at most `window` events
 * unacknowledged and counts acks: events accepted by the relay.
 *
 * Prints `@{"ev":"ready"}` once connected, waits for `{"cmd":"go"}` on
 * stdin, then prints `@{"ev":"result", ...}`.
 *
 * @module
 */
import { io as ioClient } from "socket.io-client";
import { commands, cpuShare, emit, type ProcStat, procStat } from "../_proc.ts";
import { Histogram } from "../_stats.ts";
import { EventSource, frameSeqs } from "../_workload.ts";
import { spawnSession, SyntheticRunner } from "../clients/synthetic_runner.ts";
import { type ClientImpl, openViewers, type ServerKind } from "../clients/viewers.ts";

/** Configuration passed as the first argument (JSON). */
export interface FanoutConfig {
  kind: ServerKind;
  url: string;
  apiKey?: string;
  viewers: number;
  client: ClientImpl;
  mode: "throughput" | "rate" | "ack";
  /** Events in flight (throughput, ack). */
  window: number;
  /** Events per second (rate). */
  rate: number;
  /** Events per runner frame. */
  batch: number;
  warmupMs: number;
  durationMs: number;
  /** Pid of the server under test, for its CPU and RSS. */
  serverPid: number;
}

/** What the load generator reports. */
export interface FanoutResult {
  kind: ServerKind;
  viewers: number;
  mode: string;
  /** Events delivered to viewers (one event to one viewer = one delivery) per second. */
  deliveriesPerSec: number;
  /** Events per second the runner got through (delivered to all viewers, or acked). */
  eventsPerSec: number;
  latency: ReturnType<Histogram["summary"]>;
  serverCpu: number;
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

let sendTime = new Float64Array(1 << 16);
let counts = new Uint16Array(1 << 16);
function grow(seq: number): void {
  while (seq >= sendTime.length) {
    const t = new Float64Array(sendTime.length * 2);
    t.set(sendTime);
    sendTime = t;
    const c = new Uint16Array(counts.length * 2);
    c.set(counts);
    counts = c;
  }
}

let sent = 0;
let fully = 0;
let acked = 0;
let stopping = false;
let measuring = false;
let windowStart = 0;
let deliveries = 0;
let frames = 0;
let gaps = 0;
const hist = new Histogram();
const lastSeen = new Int32Array(Math.max(1, cfg.viewers));

// ---------------------------------------------------------------------------
// The publishing side

let publish: (frame: string) => void;
let sessionId = "bench";
let runner: SyntheticRunner | null = null;

const t0 = performance.now();
if (cfg.kind === "baton") {
  runner = await SyntheticRunner.connect({ url: cfg.url, apiKey: cfg.apiKey! });
  sessionId = await spawnSession(cfg.url, cfg.apiKey!, runner.runnerId);
  const r = runner;
  publish = (frame) => r.send(frame);
  r.onAck = (_s, seq) => {
    acked = seq;
    if (cfg.mode === "ack") onAcked(seq);
  };
} else if (cfg.kind === "bare") {
  const ws = new WebSocket(cfg.url.replace(/^http/, "ws") + "/publish");
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error("Publisher socket failed"));
  });
  publish = (frame) => ws.send(frame);
} else {
  const s = ioClient(cfg.url + "/pub", { transports: ["websocket"], forceNew: true });
  await new Promise<void>((resolve, reject) => {
    s.on("connect", () => resolve());
    s.on("connect_error", reject);
  });
  publish = (frame) => s.emit("events", frame);
}

function sendNext(): void {
  const first = sent + 1;
  const last = sent + cfg.batch;
  grow(last);
  const now = performance.now();
  for (let s = first; s <= last; s++) sendTime[s] = now;
  sent = last;
  publish(events.frame(sessionId, first, last, Date.now()));
}

function pump(): void {
  if (stopping || cfg.mode === "rate") return;
  const done = cfg.mode === "ack" ? acked : fully;
  while (sent - done < cfg.window) sendNext();
}

// ---------------------------------------------------------------------------
// The receiving side

function onFrame(i: number, text: string): void {
  const seqs = frameSeqs(text);
  if (!seqs) return;
  const [a, b] = seqs;
  if (a !== lastSeen[i]! + 1) gaps++;
  lastSeen[i] = b;
  const now = performance.now();
  const n = b - a + 1;
  if (measuring) {
    frames++;
    deliveries += n;
    for (let s = a; s <= b; s++) hist.record(now - sendTime[s]!);
  }
  let advanced = false;
  for (let s = a; s <= b; s++) {
    if (++counts[s]! === cfg.viewers && s === fully + 1) {
      fully = s;
      advanced = true;
    }
  }
  if (advanced) {
    while (fully < sent && counts[fully + 1] === cfg.viewers) fully++;
    pump();
  }
}

let ackedInWindow = 0;
let ackedAtStart = 0;
function onAcked(seq: number): void {
  if (measuring) {
    ackedInWindow = seq - ackedAtStart;
    const now = performance.now();
    for (let s = fully + 1; s <= seq; s++) hist.record(now - sendTime[s]!);
  }
  fully = seq;
  pump();
}

const conns = await openViewers(
  cfg.viewers,
  { kind: cfg.kind, url: cfg.url, apiKey: cfg.apiKey ?? "", sessionId, since: 0 },
  cfg.client,
  onFrame,
);
emit("ready", { connectMs: Math.round(performance.now() - t0), sessionId });

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
    const due = Math.floor(((performance.now() - start) / 1000) * cfg.rate);
    while (sent < due) sendNext();
    rateTimer = setTimeout(tick, Math.max(1, 1000 / cfg.rate / 2));
  };
  tick();
} else pump();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
await sleep(cfg.warmupMs);
let serverBefore: ProcStat = procStat(cfg.serverPid);
let selfBefore: ProcStat = procStat(Deno.pid);
windowStart = performance.now();
ackedAtStart = acked;
measuring = true;
await sleep(cfg.durationMs);
measuring = false;
const elapsed = performance.now() - windowStart;
const serverAfter = procStat(cfg.serverPid);
const selfAfter = procStat(Deno.pid);
stopping = true;
clearTimeout(rateTimer);

// Every event sent must reach every viewer (or be acked) before we report.
const drainDeadline = performance.now() + 15_000;
const target = () => cfg.mode === "ack" ? acked : fully;
while (target() < sent && performance.now() < drainDeadline) await sleep(20);

const result: FanoutResult = {
  kind: cfg.kind,
  viewers: cfg.viewers,
  mode: cfg.mode,
  deliveriesPerSec: (deliveries / elapsed) * 1000,
  eventsPerSec: cfg.mode === "ack"
    ? (ackedInWindow / elapsed) * 1000
    : (deliveries / Math.max(1, cfg.viewers) / elapsed) * 1000,
  latency: hist.summary(),
  serverCpu: cpuShare(serverBefore, serverAfter, elapsed),
  clientCpu: cpuShare(selfBefore, selfAfter, elapsed),
  serverRss: serverAfter.rss,
  serverHwm: serverAfter.hwm,
  framesPerSec: (frames / elapsed) * 1000,
  sent,
  undelivered: sent - target(),
  gaps,
  connectMs: Math.round(windowStart - t0),
};
serverBefore = serverAfter;
selfBefore = selfAfter;
emit("result", result as unknown as Record<string, unknown>);
for (const c of conns) c.close();
runner?.close();
Deno.exit(0);
