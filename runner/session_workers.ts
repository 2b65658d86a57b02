/**
 * The daemon's sessions and their worker processes: starting a worker (a
 * spare one when there is), what a worker reports, its exit, putting an idle
 * session to sleep and waking it, inputs that wait for the worker's answer,
 * and ending a session's processes. Events go out through the daemon
 * (`enqueue`), which numbers them for the relay.
 *
 * @module
 */
import type {
  DaemonToWorker,
  SessionEventBody,
  WorkerStart,
  WorkerToDaemon,
} from "../shared/protocol.ts";
import type { DaemonSession } from "./daemon_session.ts";
import type { RunnerConfig } from "./config.ts";
import { RequestError } from "./control_link.ts";
import type { SessionEntry, SessionRegistry } from "./registry.ts";
import { workerEnv, WorkerProcess } from "./worker_host.ts";
import type { SandboxService } from "./sandbox/service.ts";
import { killTree } from "./platform/process_tree.ts";
import { SESSION_MARKER_ENV } from "./workspace/ports.ts";
import { armStartTimeout, type StartTimeoutHost } from "./start_timeout.ts";

/** What a worker is started with, beyond what its session's entry says. */
export type WorkerStartOptions = Pick<
  WorkerStart,
  "prompt" | "images" | "resumeFile" | "resumed" | "woke" | "trigger" | "instruction"
>;

/** Options of {@linkcode SessionWorkers}. */
export interface SessionWorkersOptions {
  config: RunnerConfig;
  registry: SessionRegistry;
  /** Records the sandbox violations workers report. */
  sandbox: Pick<SandboxService, "record">;
  /** Workers started ahead of time (0 or 1) so spawns skip the start-up cost. */
  warmWorkers: number;
  /** How long a session may go without a turn before its worker stops (0: never). */
  sleepAfterMs: number;
  /** Queues an event of the session for the relay. */
  enqueue: (s: DaemonSession, e: SessionEventBody) => void;
  /** Asks the relay, for a session's agent. */
  call: (op: string, data: Record<string, unknown>) => Promise<unknown>;
  log: (line: string) => void;
}

/** The sessions of this runner and the lifecycle of their workers. */
export class SessionWorkers {
  readonly sessions = new Map<string, DaemonSession>();
  /** Set once the runner stops: no worker starts, none counts as crashed. */
  stopping = false;
  readonly #opts: SessionWorkersOptions;
  #spare: WorkerProcess | null = null;
  #nextInputId = 1;
  readonly #timeoutHost: StartTimeoutHost;

  constructor(options: SessionWorkersOptions) {
    this.#opts = options;
    this.#timeoutHost = {
      isStopping: () => this.stopping,
      enqueue: (s, e) => options.enqueue(s, e),
      save: (s) => this.save(s),
      clearSleep: (s) => this.clearSleep(s),
      endProcesses: (s) => this.endProcesses(s),
      log: options.log,
    };
  }

  /**
   * Brings back the sessions of the last run: those with a turn in flight
   * get a worker at once (the turn is over, and the viewers must see so);
   * the others sleep until an input or a trigger wakes them.
   */
  async resumeAll(): Promise<void> {
    for (const entry of await this.#opts.registry.list()) {
      const s = this.add(entry, null);
      if (entry.busy) {
        this.start(s, { prompt: "", resumeFile: entry.piSessionFile, resumed: true });
        this.#opts.log(`resuming session ${entry.sessionId} (a turn was in flight)`);
        continue;
      }
      s.asleep = true;
      if (!entry.asleep) {
        entry.asleep = true;
        this.#opts.enqueue(s, { type: "session_sleep" });
        this.save(s);
      }
    }
  }

  /** Sessions whose worker runs, with its pid (live previews watch their process trees). */
  *awake(): Iterable<{ sessionId: string; pid: number }> {
    for (const s of this.sessions.values()) {
      if (s.worker && !s.asleep && !s.ended) {
        yield { sessionId: s.entry.sessionId, pid: s.worker.pid };
      }
    }
  }

  /** Holds a new session (no worker yet). */
  add(entry: SessionEntry, nextSeq: number | null): DaemonSession {
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
    this.sessions.set(entry.sessionId, s);
    return s;
  }

  /** Writes the session's registry entry (errors are logged). */
  save(s: DaemonSession): void {
    this.#opts.registry.save(s.entry).catch((e) => this.#opts.log(`registry: ${e}`));
  }

  #spawnWorker(label: string): WorkerProcess {
    return WorkerProcess.spawn({
      env: workerEnv(this.#opts.config),
      cwd: this.#opts.config.home,
      label,
      log: this.#opts.log,
    });
  }

  /** Starts a spare worker if none waits (and warm workers are wanted). */
  refillSpare(): void {
    if (this.stopping || this.#spare || this.#opts.warmWorkers < 1) return;
    const spare = this.#spawnWorker("worker spare");
    this.#spare = spare;
    spare.exited.then(() => {
      if (this.#spare === spare) this.#spare = null;
    });
  }

  /** Gives the session a worker (the spare one if there is) and starts its agent. */
  start(s: DaemonSession, start: WorkerStartOptions): void {
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
    this.save(s);
    worker.exited.then((st: Deno.CommandStatus) => this.#onWorkerExit(s, worker, st));
    armStartTimeout(this.#timeoutHost, s, worker, {
      limit: this.#opts.config.startTimeoutMs,
      resumed: start.resumed,
    });
    // The next spare loads pi once this session has started, not against its start (stop 28).
    worker.settled.then(() => this.refillSpare());
  }

  #onWorkerMessage(s: DaemonSession, msg: WorkerToDaemon): void {
    switch (msg.t) {
      case "started":
        if (msg.piSessionFile && msg.piSessionFile !== s.entry.piSessionFile) {
          this.#opts.registry.saveConversation(s.entry.sessionId, msg.piSessionFile)
            .catch((e) => this.#opts.log(`registry: ${e}`));
        }
        s.entry.piSessionFile = msg.piSessionFile;
        if (msg.model) s.entry.model = msg.model;
        this.save(s);
        return;
      case "event":
        switch (msg.e.type) {
          case "session_end":
            s.ended = true;
            this.clearSleep(s);
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
            this.#opts.sandbox.record(msg.e);
            break;
        }
        this.#opts.enqueue(s, msg.e);
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
        this.#opts.enqueue(s, { type: "session_end", reason: "error", message: msg.message });
        return;
      case "call": {
        // The agent's trigger tools ask the relay, on behalf of this session only.
        const worker = s.worker;
        this.#opts.call(msg.op, { ...msg.data, sessionId: s.entry.sessionId }).then(
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
    if (this.stopping) return;
    if (s.asleep) {
      // Put to sleep on purpose (see #sleep), unless it was ended meanwhile.
      if (!s.ended) this.#opts.enqueue(s, { type: "session_sleep" });
      this.maybeForget(s);
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
    if (this.stopping) return;
    if (!s.ended) {
      const how = st.signal ? `signal ${st.signal}` : `exit code ${st.code}`;
      this.#opts.log(`session ${s.entry.sessionId}: worker exited unexpectedly (${how})`);
      s.ended = true;
      this.#opts.enqueue(s, {
        type: "session_end",
        reason: "crashed",
        message: `The agent's worker process exited unexpectedly (${how})`,
        exitCode: st.code,
        signal: st.signal,
      });
    }
    this.#opts.registry.remove(s.entry.sessionId).catch((e) => this.#opts.log(`registry: ${e}`));
    this.maybeForget(s);
  }

  // -------------------------------------------------------------------------
  // Sleep and wake

  /** Records whether a turn is in flight (kept on disk for a restart) and times sleep. */
  #setWorking(s: DaemonSession, working: boolean): void {
    if (s.working !== working) {
      s.working = working;
      s.entry.busy = working;
      this.save(s);
    }
    if (working) this.clearSleep(s);
    else this.#armSleep(s);
  }

  /** Stops the session's idle countdown. */
  clearSleep(s: DaemonSession): void {
    if (s.sleepTimer !== null) clearTimeout(s.sleepTimer);
    s.sleepTimer = null;
  }

  /** (Re)starts the idle countdown of a session whose agent is idle. */
  #armSleep(s: DaemonSession): void {
    this.clearSleep(s);
    const ms = this.#opts.sleepAfterMs;
    if (ms <= 0 || s.working || s.ended || s.asleep || !s.worker || this.stopping) return;
    s.sleepTimer = setTimeout(() => this.#sleep(s), ms);
  }

  /**
   * Stops an idle session's worker (about 115 MB) and keeps the session: pi
   * has saved its conversation, and the next input or trigger wakes it.
   */
  #sleep(s: DaemonSession): void {
    s.sleepTimer = null;
    if (s.working || s.ended || s.asleep || !s.worker || s.inputs.size > 0) return;
    if (this.stopping) return;
    this.#opts.log(`session ${s.entry.sessionId}: idle, stopping its worker until it is needed`);
    s.asleep = true;
    s.entry.asleep = true;
    this.save(s);
    s.worker.kill("SIGTERM");
  }

  /** Starts a sleeping session's worker again; resolves once it takes input. */
  #wake(s: DaemonSession): Promise<void> {
    s.waking ??= (async () => {
      // A worker still on its way to sleep finishes first.
      if (s.worker) await s.worker.exited;
      if (s.ended || this.stopping) {
        throw new RequestError("session_ended", "Session has ended");
      }
      if (!s.asleep) return;
      this.#opts.log(`session ${s.entry.sessionId}: waking`);
      s.asleep = false;
      s.entry.asleep = false;
      this.#opts.enqueue(s, { type: "session_waking" });
      this.start(s, {
        prompt: "",
        resumeFile: s.entry.piSessionFile,
        resumed: true,
        woke: true,
      });
    })().finally(() => s.waking = null);
    return s.waking;
  }

  /**
   * Sends a message that the session's worker answers with `res`, and waits
   * for it; a sleeping session is woken first.
   */
  async ask(sessionId: string, message: (id: number) => DaemonToWorker): Promise<void> {
    const s = this.sessions.get(sessionId);
    if (!s) throw new RequestError("not_found", "Session is not on this runner");
    if (s.ended) throw new RequestError("session_ended", "Session has ended");
    this.clearSleep(s);
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

  // -------------------------------------------------------------------------
  // Ending

  /** Ends a sleeping session without waking it. */
  endAsleep(s: DaemonSession): void {
    s.ended = true;
    this.#opts.enqueue(s, { type: "session_end", reason: "ended", message: "Ended by user" });
    this.#opts.registry.remove(s.entry.sessionId).catch((e) => this.#opts.log(`registry: ${e}`));
    this.maybeForget(s);
  }

  /** The relay no longer has the session: its events are dropped, its processes ended. */
  drop(s: DaemonSession): void {
    s.ended = true;
    s.queue = [];
    s.unacked = [];
    void this.endProcesses(s);
    this.#opts.registry.remove(s.entry.sessionId).catch(() => {});
    this.maybeForget(s);
  }

  /** Forgets an ended session once it has no worker and nothing left to send. */
  maybeForget(s: DaemonSession): void {
    if (s.ended && !s.worker && s.queue.length === 0 && s.unacked.length === 0) {
      this.sessions.delete(s.entry.sessionId);
    }
  }

  /** Stops every worker (SIGTERM, then SIGKILL after 5 s) and what the sessions run. */
  async shutdown(): Promise<void> {
    this.stopping = true;
    // The runner stops: what its sessions run ends too, sleeping ones' servers included.
    const ending = [...this.sessions.values()].map((s) => this.endProcesses(s));
    const workers = [...this.sessions.values()].map((s) => s.worker).filter((w) => w !== null);
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
  endProcesses(s: DaemonSession): Promise<void> {
    const marker = { name: SESSION_MARKER_ENV, value: s.entry.sessionId };
    return killTree(s.worker?.pid ?? null, { marker }).catch((e) =>
      this.#opts.log(`session ${s.entry.sessionId}: ending its processes failed: ${e}`)
    );
  }
}
