import type { DaemonToWorker, WorkerToDaemon } from "../shared/protocol.ts";
import type { RunnerConfig } from "./config.ts";
import { readLines } from "./_lines.ts";
import { selfCommand } from "./_self.ts";
import { withoutSecrets } from "./_secrets.ts";

/** A worker's whole environment: the daemon's without secrets, and what the runner skips. */
export function workerEnv(config: RunnerConfig): Record<string, string> {
  // The agent and its tools never see the runner's (or the owner's) credentials.
  const env = withoutSecrets();
  env.PI_CODING_AGENT_DIR = config.batonDir;
  const skip = config.skip;
  if (skip.mcp) env.BATON_NO_MCP = "1";
  if (skip.plugins) env.BATON_NO_PLUGINS = "1";
  if (skip.hooks) env.BATON_NO_HOOKS = "1";
  if (config.sandboxMode) env.BATON_SANDBOX = config.sandboxMode;
  return env;
}

/** Options of {@linkcode WorkerProcess.spawn}. */
export interface WorkerSpawnOptions {
  /** The worker's whole environment (nothing of the daemon's is inherited). */
  env: Record<string, string>;
  /** Where the worker process starts; it moves into the session's folder itself. */
  cwd: string;
  /** Prefix of the worker's stderr lines in the daemon's log. */
  label: string;
  log: (line: string) => void;
}

/** A worker subprocess seen from the daemon: messages in, messages out, an exit status. */
export class WorkerProcess {
  /** Resolves when the worker has loaded pi and waits for `start`. */
  readonly ready: Promise<void>;
  readonly exited: Promise<Deno.CommandStatus>;
  /** Resolves once the worker's session has started (or the worker has exited). */
  readonly settled: Promise<void>;
  onMessage: (msg: WorkerToDaemon) => void = () => {};
  label = "";
  /** What the worker is doing while it starts, as it last said (`stage`). */
  stage = "loading pi";
  #child: Deno.ChildProcess;
  #writer: WritableStreamDefaultWriter<Uint8Array>;
  #encoder = new TextEncoder();

  private constructor(child: Deno.ChildProcess, options: WorkerSpawnOptions) {
    this.#child = child;
    this.label = options.label;
    this.#writer = child.stdin.getWriter();
    let markReady!: () => void;
    this.ready = new Promise((r) => markReady = r);
    let markStarted!: () => void;
    const started = new Promise<void>((r) => markStarted = r);
    const stdoutDone = (async () => {
      for await (const line of readLines(child.stdout)) {
        let msg: WorkerToDaemon;
        try {
          msg = JSON.parse(line);
        } catch {
          options.log(`[${this.label}] ${line}`);
          continue;
        }
        if (msg.t === "ready") markReady();
        else if (msg.t === "stage") this.stage = String(msg.stage).slice(0, 200);
        else {
          if (msg.t === "started") markStarted();
          this.onMessage(msg);
        }
      }
    })().catch(() => {});
    (async () => {
      for await (const line of readLines(child.stderr)) options.log(`[${this.label}] ${line}`);
    })().catch(() => {});
    // Every stdout message is handled before the exit is reported.
    this.exited = child.status.then(async (st) => {
      await stdoutDone;
      return st;
    });
    this.settled = Promise.race([started, this.exited.then(() => {})]);
  }

  static spawn(options: WorkerSpawnOptions): WorkerProcess {
    const { cmd, args } = selfCommand("_worker");
    const child = new Deno.Command(cmd, {
      args,
      cwd: options.cwd,
      // The whole environment, not additions to ours: what the daemon left
      // out of it (credentials) must not come back by inheritance.
      env: options.env,
      clearEnv: true,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    return new WorkerProcess(child, options);
  }

  get pid(): number {
    return this.#child.pid;
  }

  send(msg: DaemonToWorker): void {
    this.#writer.write(this.#encoder.encode(JSON.stringify(msg) + "\n")).catch(() => {});
  }

  kill(signal: Deno.Signal = "SIGTERM"): void {
    try {
      this.#child.kill(signal);
    } catch {
      // Already gone.
    }
  }
}
