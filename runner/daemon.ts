/**
 * The runner daemon: keeps the control link to the relay, starts one worker
 * per session and numbers, buffers and re-sends their events until the relay
 * acknowledges them.
 *
 * @module
 */
import { canCoalesce, coalesce } from "../shared/events.ts";
import {
  type AckMessage,
  type DaemonToWorker,
  type DeliveredTrigger,
  type ErrorMessage,
  INPUT_KINDS,
  type InputKind,
  type InputRequest,
  type RelayWelcome,
  type SessionEvent,
  type SessionEventBody,
  type SpawnRequest,
  type SpawnResult,
  type TriggerRequest,
  type WorkerStart,
  type WorkerToDaemon,
} from "../shared/protocol.ts";
import denoJson from "../deno.json" with { type: "json" };
import { parseFlags } from "../shared/flags.ts";
import {
  ConfigError,
  controlUrl,
  ensureRunnerId,
  loadRunnerConfig,
  RUNNER_FLAGS,
  type RunnerConfig,
  runnerFlags,
} from "./config.ts";
import { ControlLink, RelayRejectedError, type ReplyStream, RequestError } from "./control_link.ts";
import { runTunnel } from "./tunnel.ts";
import { type SessionEntry, SessionRegistry } from "./registry.ts";
import { checkCwd, defaultCwd, PathRejectedError, resolveRoots } from "./roots.ts";
import { WorkerProcess } from "./worker_host.ts";
import { takeSecrets, withoutSecrets } from "./_secrets.ts";
import { SandboxService } from "./sandbox/service.ts";
import { QuestionService } from "./approvals/service.ts";
import { makePrivate } from "../shared/private_files.ts";
import { assertModelKnown, listModels } from "./models.ts";
import { withAttachments } from "./workspace/attachments.ts";
import { Workspace } from "./workspace/mod.ts";
import { ServiceHost, serviceInitTimeoutMs } from "./services/host.ts";
import { killTree } from "./platform/process_tree.ts";
import { SESSION_MARKER_ENV } from "./workspace/ports.ts";

/** Exit codes the supervisor understands. */
export const DaemonExit = {
  /** Stopped on request or by a signal: the supervisor stops too. */
  stopped: 0,
  /** The relay asked for a restart: start again at once. */
  restart: 75,
  /** The configuration cannot work (bad key, no relay): retrying is pointless. */
  config: 78,
} as const;

const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Most events in one frame to the relay. */
const FRAME_EVENTS = 500;
/** Socket buffer above which the daemon waits before sending more events. */
const LINK_HIGH_WATER = 4 * 1024 * 1024;

/** A session the daemon holds: its worker and its not yet acknowledged events. */
interface DaemonSession {
  entry: SessionEntry;
  worker: WorkerProcess | null;
  /** Seq of the next event; null until the relay says where a resumed session stands. */
  nextSeq: number | null;
  /** Events not numbered yet (coalesced while the relay is away). */
  queue: SessionEventBody[];
  /** Numbered events the relay has not acknowledged, oldest first. */
  unacked: SessionEvent[];
  /** Highest seq sent on the current connection. */
  sentSeq: number;
  /** The worker reported (or the daemon recorded) the end of the session. */
  ended: boolean;
  /** The agent is on a turn (from agent_start until agent_end or an error). */
  working: boolean;
  /** The worker was (or is being) stopped for want of turns; input wakes it. */
  asleep: boolean;
  /** The wake in progress, which inputs arriving meanwhile wait for. */
  waking: Promise<void> | null;
  /** Puts the worker to sleep once the session has been idle long enough. */
  sleepTimer: ReturnType<typeof setTimeout> | null;
  inputs: Map<number, { resolve: () => void; reject: (e: Error) => void }>;
}

/** Options of {@linkcode Daemon}. */
export interface DaemonOptions {
  config: RunnerConfig;
  runnerId: string;
  /** Resolved workspace roots, or null to accept any folder. */
  roots: string[] | null;
  /** Workers started ahead of time (0 or 1) so spawns skip the start-up cost. */
  warmWorkers: number;
  /** How long a session may go without a turn before its worker stops (0: never). */
  sleepAfterMs: number;
  log: (line: string) => void;
}

/** The daemon's state and behaviour, separate from process concerns. */
export class Daemon {
  readonly #opts: DaemonOptions;
  readonly #sessions = new Map<string, DaemonSession>();
  readonly #registry: SessionRegistry;
  readonly #link: ControlLink;
  readonly #stop = new AbortController();
  #exitCode: number = DaemonExit.stopped;
  #stopping = false;
  #spare: WorkerProcess | null = null;
  #nextInputId = 1;
  #flushTimer: ReturnType<typeof setTimeout> | null = null;
  readonly #workspace: Workspace;
  readonly #sandbox: SandboxService;
  readonly #services: ServiceHost;
  readonly #questions: QuestionService;

  constructor(options: DaemonOptions) {
    this.#opts = options;
    const { batonDir, home } = options.config;
    this.#sandbox = new SandboxService({
      home,
      batonDir,
      modeOverride: options.config.sandboxMode,
      noSandbox: Deno.env.get("BATON_NO_SANDBOX") === "1",
    });
    this.#registry = new SessionRegistry(options.config.batonDir);
    this.#questions = new QuestionService({
      batonDir,
      session: (id) => {
        const s = this.#sessions.get(id);
        return s ? { ended: s.ended, awake: !!s.worker && !s.asleep && !s.waking } : null;
      },
      sessions: () => this.#sessions.keys(),
      ask: (id, message) => this.#ask(id, message),
      tell: (id, message) => this.#sessions.get(id)?.worker?.send(message),
    });
    this.#workspace = new Workspace({
      config: options.config,
      roots: options.roots,
      conversationsDir: this.#registry.conversationsDir,
      cwdOf: (id) =>
        this.#sessions.get(id)?.ended === false ? this.#sessions.get(id)!.entry.cwd : null,
      awake: (id) => this.#sessions.get(id)?.asleep === false,
      send: (msg) => this.#link.send(msg),
      workers: () => this.#awakeWorkers(),
      emit: (id, e) =>
        this.#sessions.get(id)?.ended === false && this.#enqueue(this.#sessions.get(id)!, e),
      log: options.log,
    });
    this.#services = new ServiceHost({
      ...options.config,
      runnerId: options.runnerId,
      skipPlugins: options.config.skip.plugins,
      skipServices: options.config.skip.services,
      initTimeoutMs: serviceInitTimeoutMs(Deno.env.get("BATON_SERVICE_INIT_TIMEOUT")),
      log: options.log,
      onChange: () => this.#announce().catch((e) => options.log(`announcing failed: ${e}`)),
    });
    this.#link = new ControlLink({
      url: controlUrl(options.config.relayUrl!),
      hello: () => ({
        apiKey: options.config.apiKey!,
        runnerId: options.runnerId,
        name: options.config.name,
        roots: options.roots ?? [],
        version: denoJson.version,
        platform: Deno.build.os === "windows" ? "win32" : Deno.build.os,
        sessions: [...this.#sessions.values()].map((s) => ({
          sessionId: s.entry.sessionId,
          cwd: s.entry.cwd,
        })),
      }),
      onWelcome: (w) => this.#onWelcome(w),
      onRequest: (op, data, reply) => this.#onRequest(op, data, reply),
      onAck: (a) => this.#onAck(a),
      onRelayError: (e) => this.#onRelayError(e),
      log: options.log,
    });
  }

  /** Runs until stopped; resolves with the process exit code. */
  async run(): Promise<number> {
    await this.#resumeAll();
    this.#refillSpare();
    this.#workspace.previews.start();
    this.#services.start();
    const tunnel = runTunnel(this.#opts.config, this.#opts.runnerId, {
      log: this.#opts.log,
      ready: () => this.#link.connected,
      signal: this.#stop.signal,
      onTerminal: (stream, id) => this.#workspace.terminals.attach(stream, id),
    });
    try {
      await this.#link.run(this.#stop.signal);
    } catch (err) {
      if (!(err instanceof RelayRejectedError)) throw err;
      this.#opts.log(`relay refused this runner: ${err.message}`);
      this.#exitCode = DaemonExit.config;
    }
    this.#workspace.close();
    await this.#services.stop();
    await tunnel.stop();
    await this.#shutdownWorkers();
    return this.#exitCode;
  }

  /** Stops the daemon (signal, stop or restart request). */
  stop(exitCode: number = DaemonExit.stopped): void {
    if (this.#stopping) return;
    this.#stopping = true;
    this.#exitCode = exitCode;
    // Give acknowledged-but-unsent events a moment to reach the relay.
    this.#flushAll();
    setTimeout(() => this.#stop.abort(), 300);
  }

  // -------------------------------------------------------------------------
  // Sessions and workers

  /**
   * Brings back the sessions of the last run: those with a turn in flight
   * get a worker at once (the turn is over, and the viewers must see so);
   * the others sleep until an input or a trigger wakes them.
   */
  async #resumeAll(): Promise<void> {
    for (const entry of await this.#registry.list()) {
      const s = this.#newSession(entry, null);
      if (entry.busy) {
        this.#startWorker(s, { prompt: "", resumeFile: entry.piSessionFile, resumed: true });
        this.#opts.log(`resuming session ${entry.sessionId} (a turn was in flight)`);
        continue;
      }
      s.asleep = true;
      if (!entry.asleep) {
        entry.asleep = true;
        this.#enqueue(s, { type: "session_sleep" });
        this.#saveEntry(s);
      }
    }
  }

  /** Sessions whose worker runs, with its pid (live previews watch their process trees). */
  *#awakeWorkers(): Iterable<{ sessionId: string; pid: number }> {
    for (const s of this.#sessions.values()) {
      if (s.worker && !s.asleep && !s.ended) {
        yield { sessionId: s.entry.sessionId, pid: s.worker.pid };
      }
    }
  }

  #newSession(entry: SessionEntry, nextSeq: number | null): DaemonSession {
    const s: DaemonSession = {
      entry,
      worker: null,
      nextSeq,
      queue: [],
      unacked: [],
      sentSeq: 0,
      ended: false,
      working: entry.busy ?? false,
      asleep: false,
      waking: null,
      sleepTimer: null,
      inputs: new Map(),
    };
    this.#sessions.set(entry.sessionId, s);
    return s;
  }

  #workerEnv(): Record<string, string> {
    // The agent and its tools never see the runner's (or the owner's) credentials.
    const env = withoutSecrets();
    env.PI_CODING_AGENT_DIR = this.#opts.config.batonDir;
    const skip = this.#opts.config.skip;
    if (skip.mcp) env.BATON_NO_MCP = "1";
    if (skip.plugins) env.BATON_NO_PLUGINS = "1";
    if (skip.hooks) env.BATON_NO_HOOKS = "1";
    if (this.#opts.config.sandboxMode) env.BATON_SANDBOX = this.#opts.config.sandboxMode;
    return env;
  }

  #spawnWorker(label: string): WorkerProcess {
    return WorkerProcess.spawn({
      env: this.#workerEnv(),
      cwd: this.#opts.config.home,
      label,
      log: this.#opts.log,
    });
  }

  #refillSpare(): void {
    if (this.#stopping || this.#spare || this.#opts.warmWorkers < 1) return;
    const spare = this.#spawnWorker("worker spare");
    this.#spare = spare;
    spare.exited.then(() => {
      if (this.#spare === spare) this.#spare = null;
    });
  }

  #saveEntry(s: DaemonSession): void {
    this.#registry.save(s.entry).catch((e) => this.#opts.log(`registry: ${e}`));
  }

  #startWorker(
    s: DaemonSession,
    start: {
      prompt: string;
      images?: WorkerStart["images"];
      resumeFile: string | null;
      resumed: boolean;
      woke?: boolean;
      trigger?: DeliveredTrigger;
      instruction?: string;
    },
  ): void {
    const id = s.entry.sessionId;
    const label = `worker ${id.slice(0, 8)}`;
    let worker: WorkerProcess;
    if (this.#spare) {
      worker = this.#spare;
      this.#spare = null;
      worker.label = label;
    } else worker = this.#spawnWorker(label);
    s.worker = worker;
    worker.onMessage = (msg: WorkerToDaemon) => this.#onWorkerMessage(s, msg);
    worker.send({
      t: "start",
      sessionId: id,
      cwd: s.entry.cwd,
      model: s.entry.model,
      prompt: start.prompt,
      ...(start.images ? { images: start.images } : {}),
      resumeFile: start.resumeFile,
      resumed: start.resumed,
      ...(start.woke ? { woke: true } : {}),
      ...(start.trigger ? { trigger: start.trigger } : {}),
      ...(start.instruction ? { instruction: start.instruction } : {}),
      ...(s.entry.agent ? { agent: s.entry.agent } : {}),
    });
    s.entry.pid = worker.pid;
    this.#saveEntry(s);
    worker.exited.then((st: Deno.CommandStatus) => this.#onWorkerExit(s, worker, st));
    // The next spare loads pi once this session has started, not against its start (stop 28).
    worker.settled.then(() => this.#refillSpare());
  }

  #onWorkerMessage(s: DaemonSession, msg: WorkerToDaemon): void {
    switch (msg.t) {
      case "started":
        if (msg.piSessionFile && msg.piSessionFile !== s.entry.piSessionFile) {
          this.#registry.saveConversation(s.entry.sessionId, msg.piSessionFile)
            .catch((e) => this.#opts.log(`registry: ${e}`));
        }
        s.entry.piSessionFile = msg.piSessionFile;
        if (msg.model) s.entry.model = msg.model;
        this.#saveEntry(s);
        return;
      case "event":
        switch (msg.e.type) {
          case "session_end":
            s.ended = true;
            this.#clearSleep(s);
            break;
          case "session_start":
            // A resumed worker has no turn in flight: the one it had is over.
            if (msg.e.resumed) this.#setWorking(s, false);
            else this.#armSleep(s);
            break;
          case "agent_start":
            this.#setWorking(s, true);
            break;
          case "agent_end":
          case "session_error":
            this.#setWorking(s, false);
            break;
          case "sandbox:violation":
            this.#sandbox.record(msg.e);
            break;
        }
        this.#enqueue(s, msg.e);
        return;
      case "res": {
        const p = s.inputs.get(msg.id);
        if (!p) return;
        s.inputs.delete(msg.id);
        if (msg.ok) p.resolve();
        else p.reject(new RequestError(msg.error.code, msg.error.message));
        return;
      }
      case "fatal":
        s.ended = true;
        this.#enqueue(s, { type: "session_end", reason: "error", message: msg.message });
        return;
      case "call": {
        // The agent's trigger tools ask the relay, on behalf of this session only.
        const worker = s.worker;
        this.#link.call(msg.op, { ...msg.data, sessionId: s.entry.sessionId }).then(
          (data) => worker?.send({ t: "result", id: msg.id, ok: true, data }),
          (err) =>
            worker?.send({
              t: "result",
              id: msg.id,
              ok: false,
              error: {
                code: err instanceof RequestError ? err.code : "relay_error",
                message: err instanceof Error ? err.message : String(err),
              },
            }),
        );
        return;
      }
    }
  }

  #onWorkerExit(s: DaemonSession, worker: WorkerProcess, st: Deno.CommandStatus): void {
    if (s.worker !== worker) return;
    s.worker = null;
    for (const p of s.inputs.values()) {
      p.reject(new RequestError("session_ended", "The session's worker exited"));
    }
    s.inputs.clear();
    // During shutdown the session stays registered and comes back at next start.
    if (this.#stopping) return;
    if (s.asleep) {
      // Put to sleep on purpose (see #sleep), unless it was ended meanwhile.
      if (!s.ended) this.#enqueue(s, { type: "session_sleep" });
      this.#maybeForget(s);
      return;
    }
    if (!s.ended && st.signal === "SIGTERM") {
      // A service manager stopping the whole unit signals every process at
      // once: give the daemon's own SIGTERM a moment to arrive before calling
      // this a crash (a stopped runner keeps its sessions for the next start).
      setTimeout(() => this.#workerGone(s, st), 1000);
      return;
    }
    this.#workerGone(s, st);
  }

  #workerGone(s: DaemonSession, st: Deno.CommandStatus): void {
    if (this.#stopping) return;
    if (!s.ended) {
      const how = st.signal ? `signal ${st.signal}` : `exit code ${st.code}`;
      this.#opts.log(`session ${s.entry.sessionId}: worker exited unexpectedly (${how})`);
      s.ended = true;
      this.#enqueue(s, {
        type: "session_end",
        reason: "crashed",
        message: `The agent's worker process exited unexpectedly (${how})`,
        exitCode: st.code,
        signal: st.signal,
      });
    }
    this.#registry.remove(s.entry.sessionId).catch((e) => this.#opts.log(`registry: ${e}`));
    this.#maybeForget(s);
  }

  // -------------------------------------------------------------------------
  // Sleep and wake

  /** Records whether a turn is in flight (kept on disk for a restart) and times sleep. */
  #setWorking(s: DaemonSession, working: boolean): void {
    if (s.working !== working) {
      s.working = working;
      s.entry.busy = working;
      this.#saveEntry(s);
    }
    if (working) this.#clearSleep(s);
    else this.#armSleep(s);
  }

  #clearSleep(s: DaemonSession): void {
    if (s.sleepTimer !== null) clearTimeout(s.sleepTimer);
    s.sleepTimer = null;
  }

  /** (Re)starts the idle countdown of a session whose agent is idle. */
  #armSleep(s: DaemonSession): void {
    this.#clearSleep(s);
    const ms = this.#opts.sleepAfterMs;
    if (ms <= 0 || s.working || s.ended || s.asleep || !s.worker || this.#stopping) return;
    s.sleepTimer = setTimeout(() => this.#sleep(s), ms);
  }

  /**
   * Stops an idle session's worker (about 115 MB) and keeps the session: pi
   * has saved its conversation, and the next input or trigger wakes it.
   */
  #sleep(s: DaemonSession): void {
    s.sleepTimer = null;
    if (s.working || s.ended || s.asleep || !s.worker || s.inputs.size > 0) return;
    if (this.#stopping) return;
    this.#opts.log(`session ${s.entry.sessionId}: idle, stopping its worker until it is needed`);
    s.asleep = true;
    s.entry.asleep = true;
    this.#saveEntry(s);
    s.worker.kill("SIGTERM");
  }

  /** Starts a sleeping session's worker again; resolves once it takes input. */
  #wake(s: DaemonSession): Promise<void> {
    s.waking ??= (async () => {
      // A worker still on its way to sleep finishes first.
      if (s.worker) await s.worker.exited;
      if (s.ended || this.#stopping) {
        throw new RequestError("session_ended", "Session has ended");
      }
      if (!s.asleep) return;
      this.#opts.log(`session ${s.entry.sessionId}: waking`);
      s.asleep = false;
      s.entry.asleep = false;
      this.#enqueue(s, { type: "session_waking" });
      this.#startWorker(s, {
        prompt: "",
        resumeFile: s.entry.piSessionFile,
        resumed: true,
        woke: true,
      });
    })().finally(() => s.waking = null);
    return s.waking;
  }

  /** Ends a sleeping session without waking it. */
  #endAsleep(s: DaemonSession): void {
    s.ended = true;
    this.#enqueue(s, { type: "session_end", reason: "ended", message: "Ended by user" });
    this.#registry.remove(s.entry.sessionId).catch((e) => this.#opts.log(`registry: ${e}`));
    this.#maybeForget(s);
  }

  #maybeForget(s: DaemonSession): void {
    if (s.ended && !s.worker && s.queue.length === 0 && s.unacked.length === 0) {
      this.#sessions.delete(s.entry.sessionId);
    }
  }

  // -------------------------------------------------------------------------
  // Events towards the relay

  #enqueue(s: DaemonSession, e: SessionEventBody): void {
    // The git watch follows the worker: off while the session sleeps, back when it wakes.
    if (e.type === "session_end" || e.type === "session_sleep") {
      this.#workspace.sessionStopped(s.entry.sessionId, e.type === "session_sleep");
      if (e.type === "session_end") void this.#endProcesses(s);
    } else if (e.type === "session_waking") this.#workspace.sessionWaking(s.entry.sessionId);
    const last = s.queue[s.queue.length - 1];
    if (last && canCoalesce(last, e)) s.queue[s.queue.length - 1] = coalesce(last, e);
    else s.queue.push(e);
    // One timer batches a burst of events (from every session) into few frames.
    this.#flushTimer ??= setTimeout(() => {
      this.#flushTimer = null;
      this.#flushAll();
    }, 0);
  }

  #flushAll(): void {
    for (const s of this.#sessions.values()) this.#flush(s);
  }

  /** Numbers queued events and sends whatever the relay has not been sent yet. */
  #flush(s: DaemonSession): void {
    if (!this.#link.connected || s.nextSeq === null) return;
    const ts = Date.now();
    for (const e of s.queue) s.unacked.push({ seq: s.nextSeq++, ts, e });
    s.queue = [];
    while (s.unacked.length > 0 && s.unacked[s.unacked.length - 1]!.seq > s.sentSeq) {
      if (this.#link.bufferedAmount > LINK_HIGH_WATER) {
        this.#flushTimer ??= setTimeout(() => {
          this.#flushTimer = null;
          this.#flushAll();
        }, 20);
        return;
      }
      const start = s.unacked.findIndex((ev) => ev.seq > s.sentSeq);
      const batch = s.unacked.slice(start, start + FRAME_EVENTS);
      if (!this.#link.send({ t: "events", sessionId: s.entry.sessionId, events: batch })) return;
      s.sentSeq = batch[batch.length - 1]!.seq;
    }
  }

  #onWelcome(w: RelayWelcome): void {
    this.#opts.log(`connected to relay as runner ${this.#opts.runnerId}`);
    const ended = new Set(w.ended);
    for (const s of [...this.#sessions.values()]) {
      const id = s.entry.sessionId;
      if (ended.has(id)) {
        // The relay has closed this session: stop its worker and forget it.
        this.#opts.log(`session ${id} is closed on the relay; stopping it`);
        s.ended = true;
        s.queue = [];
        s.unacked = [];
        void this.#endProcesses(s);
        this.#registry.remove(id).catch(() => {});
        this.#maybeForget(s);
        continue;
      }
      const acked = w.acked[id] ?? 0;
      if (s.nextSeq === null || s.nextSeq <= acked) s.nextSeq = acked + 1;
      s.unacked = s.unacked.filter((ev) => ev.seq > acked);
      s.sentSeq = acked;
    }
    this.#flushAll();
    this.#announce().catch((e) => this.#opts.log(`announcing triggers failed: ${e}`));
  }

  /** Tells the relay what this runner's services (and `~/.baton/triggers.json`) offer. */
  async #announce(): Promise<void> {
    const offer = await this.#services.announcement();
    if (this.#link.connected) this.#link.send({ t: "service_announce", ...offer });
  }

  #onAck(a: AckMessage): void {
    const s = this.#sessions.get(a.sessionId);
    if (!s) return;
    let n = 0;
    while (n < s.unacked.length && s.unacked[n]!.seq <= a.seq) n++;
    if (n > 0) s.unacked.splice(0, n);
    this.#maybeForget(s);
  }

  #onRelayError(e: ErrorMessage): void {
    if (e.code === "unknown_session" && e.sessionId) {
      const s = this.#sessions.get(e.sessionId);
      if (!s) return;
      this.#opts.log(`relay does not know session ${e.sessionId}; stopping it`);
      s.ended = true;
      s.queue = [];
      s.unacked = [];
      void this.#endProcesses(s);
      this.#registry.remove(e.sessionId).catch(() => {});
      this.#maybeForget(s);
      return;
    }
    this.#opts.log(`relay error: ${e.code}: ${e.message}`);
  }

  // -------------------------------------------------------------------------
  // Requests from the relay

  #onRequest(op: string, data: unknown, reply: ReplyStream): Promise<unknown> {
    if (this.#workspace.handles(op)) return this.#workspace.request(op, data, reply);
    switch (op) {
      case "spawn":
        return this.#spawn(data as SpawnRequest);
      case "input":
        return this.#input(data as InputRequest);
      case "trigger":
        return this.#trigger(data as TriggerRequest);
      case "models":
        return listModels(this.#opts.config.batonDir).then((r) => r);
      case "sandbox_status":
      case "sandbox_config":
        return this.#sandbox.request(op, data);
      case "answer":
      case "approvals":
        return this.#questions.request(op, data);
      case "delete_session":
        this.#questions.forget(String((data as { sessionId?: unknown })?.sessionId));
        this.#workspace.sessionStopped(String((data as { sessionId?: unknown })?.sessionId));
        return this.#deleteSession(data as { sessionId?: unknown });
      case "stop":
        setTimeout(() => this.stop(DaemonExit.stopped), 50);
        return Promise.resolve({});
      case "restart":
        setTimeout(() => this.stop(DaemonExit.restart), 50);
        return Promise.resolve({});
      default:
        return Promise.reject(new RequestError("unknown_op", `Unknown request: '${op}'`));
    }
  }

  /**
   * The relay deleted a session: stop its worker if it runs, forget it, and
   * delete its pi conversation file (pi's `.jsonl` only). The workspace is
   * left as it is.
   */
  async #deleteSession(req: { sessionId?: unknown }): Promise<{ deleted: boolean }> {
    const id = req?.sessionId;
    if (typeof id !== "string" || !SESSION_ID.test(id)) {
      throw new RequestError("bad_request", "Invalid sessionId");
    }
    const s = this.#sessions.get(id);
    let file = await this.#registry.conversationOf(id);
    if (s) {
      file = s.entry.piSessionFile ?? file;
      s.ended = true;
      s.queue = [];
      s.unacked = [];
      this.#clearSleep(s);
      const worker = s.worker;
      if (worker) {
        worker.kill("SIGTERM");
        // It may still be writing the conversation.
        await Promise.race([worker.exited, new Promise((r) => setTimeout(r, 5000))]);
      }
      this.#sessions.delete(id);
      await this.#registry.remove(id);
    }
    let deleted = false;
    if (file && file.endsWith(".jsonl")) {
      try {
        await Deno.remove(file);
        deleted = true;
      } catch (err) {
        if (!(err instanceof Deno.errors.NotFound)) throw err;
      }
    }
    await this.#registry.removeConversation(id);
    this.#opts.log(
      `session ${id} was deleted on the relay${deleted ? "; its conversation too" : ""}`,
    );
    return { deleted };
  }

  async #spawn(req: SpawnRequest): Promise<SpawnResult> {
    if (this.#stopping) throw new RequestError("runner_stopping", "Runner is shutting down");
    if (typeof req?.sessionId !== "string" || !SESSION_ID.test(req.sessionId)) {
      throw new RequestError("bad_request", "Invalid sessionId");
    }
    if (this.#sessions.has(req.sessionId)) {
      throw new RequestError("bad_request", "Session already exists");
    }
    const { home } = this.#opts.config;
    const wanted = typeof req.cwd === "string" && req.cwd.trim()
      ? req.cwd
      : defaultCwd(this.#opts.roots, home);
    let cwd: string;
    try {
      cwd = await checkCwd(wanted, this.#opts.roots, { home });
    } catch (err) {
      if (err instanceof PathRejectedError) throw new RequestError(err.code, err.message);
      throw err;
    }
    const model = req.model ?? null;
    if (model) await assertModelKnown(this.#opts.config.batonDir, model);
    const prompt = typeof req.prompt === "string" ? req.prompt : "";
    const first = await withAttachments(req, prompt, cwd, this.#opts.config);
    const entry: SessionEntry = {
      sessionId: req.sessionId,
      cwd,
      model,
      piSessionFile: null,
      pid: null,
      createdAt: new Date().toISOString(),
      // A first prompt or trigger starts a turn right away.
      busy: first.text.trim() !== "" || first.images.length > 0 || !!req.trigger,
      ...(typeof req.agent === "string" ? { agent: req.agent } : {}),
    };
    const s = this.#newSession(entry, 1);
    await this.#registry.save(entry);
    this.#startWorker(s, {
      prompt: first.text,
      ...(first.images.length ? { images: first.images } : {}),
      resumeFile: null,
      resumed: false,
      ...(req.trigger ? { trigger: req.trigger } : {}),
      ...(typeof req.instruction === "string" ? { instruction: req.instruction } : {}),
    });
    return { cwd };
  }

  async #input(req: InputRequest): Promise<void> {
    const kind = req?.kind as InputKind;
    if (!INPUT_KINDS.includes(kind)) {
      return Promise.reject(new RequestError("bad_request", "Unknown input kind"));
    }
    const text = typeof req.text === "string" ? req.text : "";
    const s = this.#sessions.get(req?.sessionId);
    // `/sandbox ...` is answered here, where the runner's violations are.
    if (s && !s.ended && text.startsWith("/sandbox") && kind !== "dequeue") {
      return this.#sandbox.slash(text, s.entry.cwd).then((e) => {
        if (!e) return this.#ask(req?.sessionId, (id) => ({ t: "input", id, kind, text }));
        this.#enqueue(s, e);
      });
    }
    if (s?.asleep && !s.ended) {
      // Nothing runs and nothing is queued in a sleeping session: these need no worker.
      if (kind === "abort") return Promise.resolve();
      if (kind === "dequeue") {
        return Promise.reject(
          new RequestError("not_queued", "That message is no longer queued: the agent has read it"),
        );
      }
      if (kind === "end") {
        this.#endAsleep(s);
        return Promise.resolve();
      }
    }
    const cwd = this.#sessions.get(req?.sessionId)?.entry.cwd;
    const { text: withFiles, images } = await withAttachments(req, text, cwd, this.#opts.config);
    return await this.#ask(req?.sessionId, (id) => ({
      t: "input",
      id,
      kind,
      text: withFiles,
      ...(images.length ? { images } : {}),
    }));
  }

  #trigger(req: TriggerRequest): Promise<void> {
    if (!req?.trigger || typeof req.trigger.triggerId !== "string") {
      return Promise.reject(new RequestError("bad_request", "Invalid trigger"));
    }
    return this.#ask(req.sessionId, (id) => ({
      t: "trigger",
      id,
      trigger: req.trigger,
      ...(typeof req.instruction === "string" ? { instruction: req.instruction } : {}),
    }));
  }

  /**
   * Sends a message that the session's worker answers with `res`, and waits
   * for it; a sleeping session is woken first.
   */
  async #ask(sessionId: string, message: (id: number) => DaemonToWorker): Promise<void> {
    const s = this.#sessions.get(sessionId);
    if (!s) throw new RequestError("not_found", "Session is not on this runner");
    if (s.ended) throw new RequestError("session_ended", "Session has ended");
    this.#clearSleep(s);
    if (s.asleep || s.waking) await this.#wake(s);
    if (!s.worker || s.ended) throw new RequestError("session_ended", "Session has ended");
    const id = this.#nextInputId++;
    const worker = s.worker;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        s.inputs.delete(id);
        reject(new RequestError("runner_timeout", "The session did not take the input in time"));
      }, 25_000);
      s.inputs.set(id, {
        resolve: () => (clearTimeout(timer), resolve()),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      worker.send(message(id));
    }).finally(() => this.#armSleep(s));
  }

  async #shutdownWorkers(): Promise<void> {
    this.#stopping = true;
    // The runner stops: what its sessions run ends too, sleeping ones' servers included.
    const ending = [...this.#sessions.values()].map((s) => this.#endProcesses(s));
    const workers = [...this.#sessions.values()].map((s) => s.worker).filter((w) => w !== null);
    if (this.#spare) workers.push(this.#spare);
    for (const w of workers) w.kill("SIGTERM");
    const all = Promise.all(workers.map((w) => w.exited));
    const timeout = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 5000));
    if (await Promise.race([all, timeout]) === "timeout") {
      for (const w of workers) w.kill("SIGKILL");
      await all;
    }
    await Promise.all(ending);
  }

  /**
   * Ends a session's processes: its worker's tree, and what the agent's tools
   * detached from it (found by the session's marker; docs/platforms.md). Not
   * on sleep: a server the agent started may be under live preview.
   */
  #endProcesses(s: DaemonSession): Promise<void> {
    const marker = { name: SESSION_MARKER_ENV, value: s.entry.sessionId };
    return killTree(s.worker?.pid ?? null, { marker }).catch((e) =>
      this.#opts.log(`session ${s.entry.sessionId}: ending its processes failed: ${e}`)
    );
  }
}

// ---------------------------------------------------------------------------
// Process entry

/** `baton _daemon` (started by the supervisor). */
export async function daemonMain(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, RUNNER_FLAGS);
  const log = (line: string) => console.error(`[daemon] ${line}`);
  let config: RunnerConfig;
  try {
    // The supervisor hands the key over on stdin, not in our environment.
    const handed = await takeSecrets();
    const env = (k: string) => handed && k === "BATON_API_KEY" ? handed.apiKey : Deno.env.get(k);
    config = await loadRunnerConfig(env, runnerFlags(values));
  } catch (err) {
    if (err instanceof ConfigError) {
      log(err.message);
      return DaemonExit.config;
    }
    throw err;
  }
  if (!config.relayUrl || !config.apiKey) {
    log(!config.relayUrl ? "no relay configured" : "no API key configured");
    return DaemonExit.config;
  }
  Deno.env.set("PI_CODING_AGENT_DIR", config.batonDir);
  // Transcripts, the conversations workers resume from and the runner's key
  // live here: owner-only, also for what older versions (and pi) made wider.
  await Deno.mkdir(config.batonDir, { recursive: true, mode: 0o700 });
  const fixed = await makePrivate(config.batonDir);
  if (fixed > 0) log(`made ${fixed} files and folders under ${config.batonDir} owner-only`);
  const runnerId = await ensureRunnerId(config.batonDir);
  const roots = config.roots ? await resolveRoots(config.roots, config.home) : null;
  const warm = Deno.env.get("BATON_WARM_WORKERS");
  const daemon = new Daemon({
    config,
    runnerId,
    roots,
    warmWorkers: warm === "0" ? 0 : 1,
    sleepAfterMs: config.sleepAfterMs,
    log,
  });
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    if (Deno.build.os === "windows" && sig === "SIGTERM") continue;
    Deno.addSignalListener(sig, () => daemon.stop(DaemonExit.stopped));
  }
  log(
    `runner ${runnerId} (${config.name}) → ${config.relayUrl}; roots: ${
      roots ? roots.join(", ") : "any folder"
    }; pid ${Deno.pid}`,
  );
  return await daemon.run();
}
