/**
 * The runner daemon: keeps the control link to the relay, answers its
 * requests, and numbers, buffers and re-sends the sessions' events until the
 * relay acknowledges them. The sessions' workers are session_workers.ts's;
 * the requests about one session, session_requests.ts's.
 *
 * @module
 */
import { canCoalesce, coalesce } from "../shared/events.ts";
import type {
  AckMessage,
  ErrorMessage,
  InputRequest,
  RelayWelcome,
  SessionEventBody,
  SpawnRequest,
  TriggerRequest,
} from "../shared/protocol.ts";
import denoJson from "../deno.json" with { type: "json" };
import { parseFlags } from "../shared/flags.ts";
import {
  ConfigError,
  ensureRunnerId,
  loadRunnerConfig,
  RUNNER_FLAGS,
  type RunnerConfig,
  runnerFlags,
} from "./config.ts";
import { ControlLink, RelayRejectedError, type ReplyStream, RequestError } from "./control_link.ts";
import { runTunnel } from "./tunnel.ts";
import { RelayNodes } from "./relay_nodes.ts";
import { SessionRegistry } from "./registry.ts";
import { resolveRoots } from "./roots.ts";
import { takeSecrets } from "./_secrets.ts";
import { SandboxService } from "./sandbox/service.ts";
import { QuestionService } from "./approvals/service.ts";
import { makePrivate } from "../shared/private_files.ts";
import { listModels } from "./models.ts";
import { Workspace } from "./workspace/mod.ts";
import { gitSandboxProblem } from "./workspace/git_sandbox.ts";
import { SANDBOX_ENV } from "./sandbox/folder_policy.ts";
import { ServiceHost, serviceInitTimeoutMs } from "./services/host.ts";
import type { DaemonSession } from "./daemon_session.ts";
import { SessionWorkers } from "./session_workers.ts";
import { SessionRequests } from "./session_requests.ts";

/** Exit codes the supervisor understands. */
export const DaemonExit = {
  /** Stopped on request or by a signal: the supervisor stops too. */
  stopped: 0,
  /** The relay asked for a restart: start again at once. */
  restart: 75,
  /** The configuration cannot work (bad key, no relay): retrying is pointless. */
  config: 78,
} as const;

/** Most events in one frame to the relay. */
const FRAME_EVENTS = 500;
/** Socket buffer above which the daemon waits before sending more events. */
const LINK_HIGH_WATER = 4 * 1024 * 1024;

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
  readonly #workers: SessionWorkers;
  readonly #sessions: Map<string, DaemonSession>;
  readonly #requests: SessionRequests;
  readonly #link: ControlLink;
  readonly #relay: RelayNodes;
  readonly #stop = new AbortController();
  #exitCode: number = DaemonExit.stopped;
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
    const registry = new SessionRegistry(options.config.batonDir);
    const relay = this.#relay = new RelayNodes(options.config.relayUrls);
    this.#workers = new SessionWorkers({
      config: options.config,
      registry,
      sandbox: this.#sandbox,
      warmWorkers: options.warmWorkers,
      sleepAfterMs: options.sleepAfterMs,
      enqueue: (s, e) => this.#enqueue(s, e),
      call: (op, data) => this.#link.call(op, data),
      log: options.log,
    });
    this.#sessions = this.#workers.sessions;
    this.#requests = new SessionRequests({
      // Attachments come from the node the control channel is on: the one that asked.
      config: {
        ...options.config,
        get relayUrl() {
          return relay.current;
        },
      },
      roots: options.roots,
      registry,
      workers: this.#workers,
      sandbox: this.#sandbox,
      enqueue: (s, e) => this.#enqueue(s, e),
      log: options.log,
    });
    this.#questions = new QuestionService({
      batonDir,
      session: (id) => {
        const s = this.#sessions.get(id);
        return s ? { ended: s.ended, awake: !!s.worker && !s.asleep && !s.waking } : null;
      },
      sessions: () => this.#sessions.keys(),
      ask: (id, message) => this.#workers.ask(id, message),
      tell: (id, message) => this.#sessions.get(id)?.worker?.send(message),
    });
    this.#workspace = new Workspace({
      config: options.config,
      roots: options.roots,
      conversationsDir: registry.conversationsDir,
      cwdOf: (id) =>
        this.#sessions.get(id)?.ended === false ? this.#sessions.get(id)!.entry.cwd : null,
      awake: (id) => this.#sessions.get(id)?.asleep === false,
      send: (msg) => this.#link.send(msg),
      workers: () => this.#workers.awake(),
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
      relay,
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
    await this.#workers.resumeAll();
    this.#workers.refillSpare();
    this.#workspace.previews.start();
    this.#services.start();
    const tunnel = runTunnel(this.#opts.config, this.#opts.runnerId, {
      relay: this.#relay,
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
    await this.#workers.shutdown();
    return this.#exitCode;
  }

  /** Stops the daemon (signal, stop or restart request). */
  stop(exitCode: number = DaemonExit.stopped): void {
    if (this.#workers.stopping) return;
    this.#workers.stopping = true;
    this.#exitCode = exitCode;
    // Give acknowledged-but-unsent events a moment to reach the relay.
    this.#flushAll();
    setTimeout(() => this.#stop.abort(), 300);
  }

  // -------------------------------------------------------------------------
  // Events towards the relay

  #enqueue(s: DaemonSession, e: SessionEventBody): void {
    // The git watch follows the worker: off while the session sleeps, back when it wakes.
    if (e.type === "session_end" || e.type === "session_sleep") {
      this.#workspace.sessionStopped(s.entry.sessionId, e.type === "session_sleep");
      if (e.type === "session_end") void this.#workers.endProcesses(s);
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
        this.#workers.drop(s);
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
    this.#workers.maybeForget(s);
  }

  #onRelayError(e: ErrorMessage): void {
    if (e.code === "unknown_session" && e.sessionId) {
      const s = this.#sessions.get(e.sessionId);
      if (!s) return;
      this.#opts.log(`relay does not know session ${e.sessionId}; stopping it`);
      this.#workers.drop(s);
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
        return this.#requests.spawn(data as SpawnRequest);
      case "input":
        return this.#requests.input(data as InputRequest);
      case "trigger":
        return this.#requests.trigger(data as TriggerRequest);
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
        return this.#requests.delete(data as { sessionId?: unknown });
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
  // `--sandbox` counts for the git service's own sandbox too, which reads the daemon's environment.
  if (config.sandboxMode) Deno.env.set(SANDBOX_ENV.mode, config.sandboxMode);
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
    `runner ${runnerId} (${config.name}) → ${config.relayUrls.join(", ")}; roots: ${
      roots ? roots.join(", ") : "any folder"
    }; pid ${Deno.pid}`,
  );
  gitSandboxProblem().then((problem) => problem && log(problem));
  return await daemon.run();
}
